"""ReplicaFetcherStalled: one follower broker's fetcher thread for one leader broker stopped.

A follower broker F runs `num.replica.fetchers` threads per leader broker L; each carries every
partition of L whose fetcher id is k, in one FETCH request per round (docs/kafka-rules.md §6.5). When the
thread stalls, all those partitions stop fetching from L at once while F goes on elsewhere.

Decided per bucket when one of the group's replicas goes out of sync (L after its last fetch,
later than the controller fences a dead broker), from the partitions of the group (F, L, k)
the bucket holds: all of them (at least two) have had no accepted fetch from F for longer than
`stuck_after_ms`, their leader still reports (events within that time), and F is registered.
The alert starts at the group's last fetch + the stuck time + 1 ms; since one FETCH request
serves the whole group, every bucket sees the same last fetch time and derives the same id, and
`root_cause.merge_root_alerts` folds the shares (a bucket holding a single partition of the
group cannot tell it from a one-partition fault and adds no share).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from replmon.state import alert_rules, sessions
from replmon.state.alert_rules import FETCHER_STALLED
from replmon.state.alerts import Alerts, Emitted, alert_id, derived, is_notified

if TYPE_CHECKING:
    from replmon.state.replica import ReplicaState

# (state/monitor.py imports this module: its MonitorConfig and PartitionWatch are Any here)
MonitorConfig = Any
PartitionWatch = Any
Group = list[tuple[PartitionWatch, "ReplicaState"]]  # a fetcher group's partitions and follower

_INT_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: h = 31*h + char over UTF-16 code units, 32-bit wrapping."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def _int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= (1 << 31) else n


# AbstractFetcherManager.getFetcherId: Utils.abs(31 * topic.hashCode() + partition) % num.replica.fetchers,
# wrapping int arithmetic, Utils.abs(Integer.MIN_VALUE) = 0.
def fetcher_id(topic: str, partition: int, num_replica_fetchers: int) -> int:
    n = _int32(31 * java_string_hash(topic) + partition)
    return (0 if n == _INT_MIN else abs(n)) % num_replica_fetchers


class FetcherRoot(NamedTuple):
    """An ongoing fetcher stall: the id of its alert and since when."""

    alert_id: str
    since_ms: int


FetcherKey = tuple[str, int, int, int]  # ("fetcher", follower, leader, fetcher id)


def fetcher_key(follower: int, leader: int, fetcher: int) -> FetcherKey:
    return ("fetcher", follower, leader, fetcher)


def fetcher_subject(cluster: str, follower: int, leader: int, fetcher: int) -> str:
    return f"{cluster}/fetcher/{follower}/{leader}/{fetcher}"


def parse_fetcher_subject(subject: str) -> FetcherKey:
    follower, leader, fetcher = subject.rsplit("/", 3)[1:]
    return fetcher_key(int(follower), int(leader), int(fetcher))


def fetcher_root(cluster: str, follower: int, leader: int, fetcher: int, since_ms: int) -> FetcherRoot:
    return FetcherRoot(
        alert_id(FETCHER_STALLED, fetcher_subject(cluster, follower, leader, fetcher), since_ms), since_ms
    )


class Member(NamedTuple):
    """One partition of a fetcher group, as the check needs it."""

    name: str  # topic-partition
    last_fetch_ms: int  # the follower's last accepted fetch (ReplicaState.leo_update_ms)
    last_event_ms: int  # anything from the partition's leader


# The thread of the group has stopped: every member (at least two) stuck, the leader still
# reporting, the follower broker registered (not fenced, not shutting down). Returns the
# stall's start time, or None.
def stalled_since(
    members: list[Member], now_ms: int, stuck_after_ms: int, follower_registered: bool
) -> int | None:
    if len(members) < 2 or not follower_registered:
        return None
    last = max(m.last_fetch_ms for m in members)
    if now_ms - last <= stuck_after_ms:
        return None
    if any(now_ms - m.last_event_ms > stuck_after_ms for m in members):
        return None  # the leader is silent too: not this thread's doing
    return last + stuck_after_ms + 1


# the replica alerts a root decided after they fired adopts (not IsrFlapping: a count of exits)
REPLICA_ROOTED = tuple(name for name in alert_rules.REPLICA_ALERTS if name != "IsrFlapping")


PartitionKey = tuple[str, str, int]  # (cluster, topic, partition)


class Partitions(Protocol):
    """What the watch reads of its bucket (state/bucket.py's Bucket): the partitions, the
    clusters' views, the set of partitions whose stored state changed, and a way to load them."""

    partitions: dict[PartitionKey, PartitionWatch]
    clusters: dict[str, Any]
    touched: set[PartitionKey]

    def warm_all(self) -> None: ...


class FetcherWatch:
    """Fetcher-stall detection over one bucket's partitions. The open stalls are each cluster
    view's `fetcher_roots` (stored with the bucket by state/codec.py); this decides when one
    opens (`after`: a replica went out of sync) and when it ends (a fetch or session read of
    its group, or the group gone), and emits the root alert's transitions.

    `out` is the current call's records (the stall's own go there); `earlier`, when given,
    the records the same micro-batch emitted before this call: an episode the stall turns out
    to explain may have fired in either, and its records there are replaced by ones that name
    the stall (`_adopt_episodes`)."""

    __slots__ = ("_bucket", "_quiet_after_ms")

    def __init__(self, bucket: Partitions, quiet_after_ms: Callable[[Any, int], int]) -> None:
        # a weak reference: the bucket owns this watch, and the engine makes no reference cycles
        # (streaming/stateful.py freezes what a call keeps; tests/streaming/test_state_cache.py)
        self._bucket = weakref.proxy(bucket)
        self._quiet_after_ms = quiet_after_ms  # state/monitor.py's (which imports this module)

    def after(self, cfg: MonitorConfig, out: Emitted, earlier: Alerts) -> None:
        """A replica that went out of sync with no known root since the last call (the
        decisions `out` recorded) may be one of a stalled fetcher's partitions: check its group
        then, at the alert's own time (so the decision does not depend on how the stream is cut
        into batches). Out of sync is L after the last fetch, later than the controller fences a
        dead broker (broker.session.timeout.ms, 9 s by default, is below L), so a broker that is
        down is not mistaken for one stalled thread. Alerts are rare, so this costs nothing on
        the common path."""
        bucket = self._bucket
        for t in out.take_out_of_sync():
            bucket.warm_all()  # rare: the check reads the replica's whole fetcher group
            watch = bucket.partitions.get((t.cluster, t.topic, t.partition))
            if watch is not None and watch.leader.leader >= 0:
                k = fetcher_id(t.topic, t.partition, cfg.num_replica_fetchers)
                key = fetcher_key(t.replica, watch.leader.leader, k)
                own = bucket.clusters[t.cluster].config(cfg)  # its stated compaction resolution
                self._check(t.cluster, own, out, earlier, key, t.ts)

    def _group(self, cluster: str, key: FetcherKey, cfg: MonitorConfig) -> Group:
        _, follower, leader, k = key
        return [
            (w, w.leader.followers[follower])
            for (c, topic, part), w in self._bucket.partitions.items()
            if c == cluster
            and w.leader.leader == leader
            and follower in w.leader.followers
            and follower in w.leader.replicas
            and fetcher_id(topic, part, cfg.num_replica_fetchers) == k
        ]

    def _check(
        self, cluster: str, cfg: MonitorConfig, out: Alerts, earlier: Alerts, key: FetcherKey, now: int
    ) -> None:
        bucket = self._bucket
        view = bucket.clusters[cluster]
        follower = key[1]
        if key in view.fetcher_roots or follower in view.roots:
            return
        if view.sessions.reads:  # the group's followers as of now
            for (c, _, _), w in bucket.partitions.items():
                if c == cluster and sessions.sync(view.sessions, w, now):
                    bucket.touched.add((c, w.topic, w.partition))
        groups = self._follower_groups(cluster, follower, cfg)
        # a partition's silence counts from its own quiet time (the longest, in a group)
        quiet = self._quiet_after_ms
        stuck = max(
            [quiet(cfg, w.leader.config.replica_lag_time_max_ms) for ms in groups.values() for w, _ in ms],
            default=cfg.stuck_after_ms,
        )
        stuck_groups = {
            g for g, members in groups.items() if all(now - st.leo_update_ms > stuck for _, st in members)
        }
        if stuck_groups == set(groups):
            # the broker is not seen fetching anywhere here: not one thread's doing (whether the
            # broker itself went silent is the cluster step's call: state/cluster.py)
            return
        members = groups.get(key)
        if not members:  # none of its partitions follows this leader now (it was elected, a real capture)
            return
        since = stalled_since(
            [Member(w.name, st.leo_update_ms, w.last_event_ms) for w, st in members],
            now,
            stuck,
            follower_registered=True,
        )
        if since is not None:
            _open_root(cluster, key, since, members, view, out, earlier)
            bucket.touched.update((w.cluster, w.topic, w.partition) for w, _ in members)

    def _follower_groups(self, cluster: str, broker: int, cfg: MonitorConfig) -> dict[FetcherKey, Group]:
        """This bucket's partitions that `broker` follows, by fetcher group."""
        groups: dict[FetcherKey, Group] = {}
        for (c, topic, part), w in self._bucket.partitions.items():
            p = w.leader
            if c != cluster or p.leader < 0 or p.leader == broker:
                continue
            if broker in p.followers and broker in p.replicas:
                key = fetcher_key(broker, p.leader, fetcher_id(topic, part, cfg.num_replica_fetchers))
                groups.setdefault(key, []).append((w, p.followers[broker]))
        return groups

    def fetch_resumed(
        self, cluster: str, watch: PartitionWatch, replica: int, ts: int, cfg: MonitorConfig, out: Alerts
    ) -> None:
        """An accepted fetch of a stalled fetcher's partition ends the stall at its time."""
        p = watch.leader
        st = p.followers.get(replica)
        if st is None or st.leo_update_ms != ts or p.leader < 0:
            return
        key = fetcher_key(
            replica, p.leader, fetcher_id(watch.topic, watch.partition, cfg.num_replica_fetchers)
        )
        view = self._bucket.clusters[cluster]
        root = view.fetcher_roots.get(key)
        if root is not None:
            _close_root(cluster, key, root, view, out, ts)

    def session_resumed(
        self, cluster: str, replica: int, leader: int, sid: int, ts: int, cfg: MonitorConfig, out: Alerts
    ) -> None:
        """A session read of a stalled fetcher's partitions ends the stall at its time."""
        bucket = self._bucket
        bucket.warm_all()
        view = bucket.clusters[cluster]
        for key in [k for k in view.fetcher_roots if k[1] == replica and k[2] == leader]:
            members = self._group(cluster, key, cfg)
            if any(st.session_id == sid and sessions.carries(w, replica, st) for w, st in members):
                for w, _ in members:
                    if sessions.sync(view.sessions, w, ts):
                        bucket.touched.add((w.cluster, w.topic, w.partition))
                _close_root(cluster, key, view.fetcher_roots[key], view, out, ts)

    def close_lost(self, cfg: MonitorConfig, out: Alerts) -> None:
        """Resolve the fetcher stalls whose group lost its partitions (new leaders, a
        reassignment), or whose broker became unavailable (that is the root cause now)."""
        bucket = self._bucket
        for cluster, view in bucket.clusters.items():
            if not view.fetcher_roots:
                continue
            bucket.warm_all()  # rare: a fetcher stalled, its group is read
            for key, root in list(view.fetcher_roots.items()):
                members = self._group(cluster, key, cfg)
                if not members or key[1] in view.roots:
                    at = view.roots[key[1]].since_ms if key[1] in view.roots else view.clock_ms
                    _close_root(cluster, key, root, view, out, at)


def _open_root(
    cluster: str, key: FetcherKey, since: int, members: Group, view: Any, out: Alerts, earlier: Alerts
) -> None:
    _, follower, leader, k = key
    root = view.fetcher_roots[key] = fetcher_root(cluster, follower, leader, k, since)
    view.root_book.update(
        out,
        FETCHER_STALLED,
        fetcher_subject(cluster, follower, leader, k),
        True,
        since,
        (cluster, None, None, follower),
        "",
        cause="fetcher_stalled",
        leader=leader,
        fetcher_id=k,
        partitions=sorted(w.name for w, _ in members),
        counts={},
    )
    # The replica alerts of the group that started with the stall (possibly earlier in this
    # batch) name it; so do the partition alerts that named one of them.
    _adopt_episodes(root.alert_id, cluster, follower, [w for w, _ in members], since, (earlier, out))


def _close_root(cluster: str, key: FetcherKey, root: FetcherRoot, view: Any, out: Alerts, at: int) -> None:
    _, follower, leader, k = key
    del view.fetcher_roots[key]
    view.root_book.update(
        out,
        FETCHER_STALLED,
        fetcher_subject(cluster, follower, leader, k),
        False,
        max(at, root.since_ms),
        (cluster, None, None, follower),
        "",
        leader=leader,
        fetcher_id=k,
    )


def _adopt_episodes(
    root_id: str,
    cluster: str,
    replica: int,
    watches: list[PartitionWatch],
    since: int,
    batch: tuple[Alerts, ...],
) -> None:
    """The replica alerts of `replica` in `watches` that started with the root (possibly earlier
    in this batch) name it as `caused_by`, and so do the partition alerts that named one of them.
    Their records already emitted this batch (in the lists of `batch`) are replaced, in their
    lists, by copies that name it: the records themselves are never changed."""
    renamed: dict[str, str] = {}
    for w in watches:
        rsub = f"{cluster}/{w.name}/{replica}"
        for name in REPLICA_ROOTED:
            episode = w.book.open.get((name, rsub))
            if episode is not None and episode.started_ms >= since and episode.caused_by is None:
                episode.caused_by = root_id
                renamed[episode.alert_id] = root_id
        for episode in w.book.open.values():
            if episode.caused_by in renamed:
                episode.caused_by = root_id
    for records in batch:
        for i, a in enumerate(records):
            if a["alert_id"] in renamed or a.get("caused_by") in renamed:
                if a["alert_id"] in renamed and a.get("caused_by") is not None:
                    continue
                records[i] = derived(
                    a, caused_by=root_id, root_cause=False, notify=is_notified(a["name"], root_id)
                )
