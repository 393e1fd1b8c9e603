"""Cluster-wide reasoning: broker roots, which alerts each root explains, and what pages.

The buckets (state/bucket.py) hold slices of the partitions and decide per-partition rules only.
Whatever needs the whole cluster is decided here, in one step that sees every bucket's output
(the bridge runs it on the driver, once per micro-batch, and keeps its state with the
query's checkpoint: streaming/cluster_state.py):

* **Broker episodes** (`BrokerUnavailable`): a broker is unavailable while it is *silent*
  (nothing from it as leader and no fetch by it as follower, anywhere in the cluster, for more
  than `alerts.stuck_after_ms`), *fenced* or *shutting down* (the controller's word, `broker`
  events). One episode per outage: when the cause moves (silent -> fenced) the same alert is
  updated (status `updated`, same id), never paged again. A controlled shutdown is a warning,
  not a page.
* **Grouping in event time**: every alert is held until `alerts.group_wait_ms` of event time
  after it started, so that a root found within that window claims it (Alertmanager's
  group_wait, but decided on event time, so a replay decides the same).
* **Claims**: a replica alert of an unavailable broker, the followers' alerts of a partition
  whose leader is unavailable (cause `leader_unavailable`), and a partition alert whose leader,
  missing replicas or HW holders are unavailable carry the episode's id in `caused_by` and are
  not notified (except UnderMinIsr and OfflinePartition, which always page).
* **Counts**: the episode counts the partitions it took down (under-replicated, under min
  ISR, offline) and the leaders it held; the counts travel on `updated` records (at most one
  per `COUNTS_EVERY_MS` of event time) and on the resolving record.

Silence is computed from *activity segments*: each bucket reports, per broker, maximal runs of
activity in which no two consecutive moments are more than the silence limit apart. Merged
over all buckets with the same rule they give exactly the cluster-wide gaps, whatever the
number of buckets. Decisions are taken in event-time order up to a horizon (the newest activity
anywhere less `stream.reorder_tolerance_ms`), so a replay, or another cut into micro-batches,
decides the same.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from replmon.state import restart_gate, texts
from replmon.state.alert_rules import REPLICA_ALERTS
from replmon.state.alerts import ALWAYS_NOTIFIED, SEVERITY, alert_id, is_notified
from replmon.state.root_cause import (
    BROKER_UNAVAILABLE,
    COUNTED,
    FETCHER_STALLED,
    broker_subject,
    merge_root_alerts,
)

# a broker that stops (silent or fenced) within this of the controller taking it out of an ISR
# while it ran was shut down in a controlled way
CONTROLLED_WITHIN_MS = 10_000
REGROUP_MS = 300_000  # a lagging broker's alerts stay one group this long after the last resolves
COUNTS_EVERY_MS = 1000  # at most one counts update per episode per this much event time
SILENT, FENCED, SHUTTING_DOWN = "broker_silent", "broker_fenced", "broker_shutting_down"
LEADER_UNAVAILABLE = "leader_unavailable"
NEVER = 1 << 62


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    silent_after_ms: int  # a broker with no activity anywhere for longer than this is silent
    group_wait_ms: int  # every alert is held this long (event time) for a root to claim it
    slack_ms: int  # decisions wait until activity this far past them has been seen
    lag_share: float  # the restart gate: a listed follower lagging past this share of L is out


@dataclass(slots=True)
class Episode:
    """One outage of one broker: one BrokerUnavailable alert."""

    alert_id: str
    broker: int
    started_ms: int
    cause: str
    controlled: bool = False  # a controlled shutdown: reported, not paged
    released: bool = False
    notify: bool = False
    ended_ms: int | None = None
    counted: dict = field(default_factory=dict)  # kind -> subjects of the partitions it took down
    counts_dirty: bool = False
    counts_ms: int = -NEVER
    dirty_ms: int = -NEVER  # when the counts last changed
    cause_ms: int = -NEVER  # when the current cause was seen (the fence, the shutdown, the silence)

    def counts(self) -> dict:
        out = {kind: len(self.counted.get(kind, ())) for kind in COUNTED.values()}
        out["leaders_lost"] = len(self.counted.get("leaders_lost", ()))
        return out


@dataclass(slots=True)
class ClusterFacts:
    """What the step knows of one cluster."""

    horizon_ms: int = -NEVER  # decided up to here
    newest_activity_ms: int = -NEVER
    segments: dict = field(default_factory=dict)  # broker -> merged [start, end] activity runs
    replicas: dict = field(default_factory=dict)  # broker -> {bucket: (led, replicas)}
    silent: dict = field(default_factory=dict)  # broker -> silent since
    states: dict = field(default_factory=dict)  # broker -> controller state (fenced, shutting_down)
    pending_states: list = field(default_factory=list)  # (ts, broker, state) not yet applied
    aliases: dict = field(default_factory=dict)  # a bucket's BrokerUnavailable id -> broker
    episodes: dict = field(default_factory=dict)  # broker -> open Episode
    ended: list = field(default_factory=list)  # episodes ended less than 2 x group_wait ago
    held: list = field(default_factory=list)  # alert records waiting for their release
    # follower broker -> [first ReplicaOutOfSync id, its open ones, when the last one resolved]:
    # a broker that lags on several partitions for its own reason is one notification
    lagging: dict = field(default_factory=dict)
    controller_exits: dict = field(default_factory=dict)  # broker -> last time the controller took it out
    decided: dict = field(default_factory=dict)  # released, still firing: alert_id -> decision
    gate: restart_gate.GateFacts = field(default_factory=restart_gate.GateFacts)  # the restart gate's view


class ClusterStep:
    """The cluster-wide step's state and its fold over micro-batches (pure)."""

    def __init__(self, cfg: ClusterConfig) -> None:
        self.cfg = cfg
        self.clusters: dict[str, ClusterFacts] = {}
        self._held_firing: set[str] = set()
        self._release_due: Callable[[Episode], None] = lambda ep: None

    # -- input -----------------------------------------------------------------------------
    def step(
        self,
        alerts: list[dict],
        activity: list[dict],
        flush: bool = False,
        statuses: tuple[list[dict], list[dict]] = ([], []),
    ) -> list[dict]:
        """Fold one micro-batch: the buckets' alert records and activity reports in, the alert
        records to output (decided, in event-time order) out. `flush`: the input has ended
        (a bounded run): release every held alert now. `statuses`: the batch's partition and
        replica statuses, for the restart gate (`restart_verdicts`)."""
        out: list[dict] = []
        for report in activity:
            self._activity(report)
        for rec in merge_root_alerts(alerts):
            facts = self._facts(rec["cluster"])
            if rec["name"] == BROKER_UNAVAILABLE:  # a bucket's view of a controller decision
                facts.aliases[rec["alert_id"]] = rec["broker"]
                state = "running" if rec["status"] == "resolved" else _state_of(rec.get("cause"))
                if state is not None:
                    facts.pending_states.append(
                        (rec["started_ms"] if state != "running" else rec["ts"], rec["broker"], state)
                    )
                continue
            if (
                rec["name"] == "ReplicaOutOfSync"
                and rec["status"] == "firing"
                and rec.get("cause") == "controller"
            ):
                # the controller took the replica out of the ISR while its broker ran: what a
                # controlled shutdown does first (leaders moved away, out of every ISR)
                key = str(rec["replica"])
                facts.controller_exits[key] = max(facts.controller_exits.get(key, -NEVER), rec["started_ms"])
            facts.held.append(rec)
        for name, facts in self.clusters.items():
            horizon = facts.newest_activity_ms - self.cfg.slack_ms
            self._run(name, facts, max(horizon, facts.horizon_ms), out, flush)
        self._observe_gate(statuses, out)
        return out

    def _observe_gate(self, statuses: tuple[list[dict], list[dict]], out: list[dict]) -> None:
        by_cluster: dict[str, tuple[list, list, list]] = {}
        for i, records in enumerate((*statuses, out)):
            for r in records:
                by_cluster.setdefault(r["cluster"], ([], [], []))[i].append(r)
        for name, (partitions, replicas, released) in by_cluster.items():
            restart_gate.observe(self._facts(name).gate, partitions, replicas, released)

    def restart_verdicts(self) -> list[dict]:
        """The restart gate's verdict for every broker of every cluster, as of its clock."""
        cfg = restart_gate.GateConfig(self.cfg.lag_share)
        out = []
        for name, facts in self.clusters.items():
            if facts.newest_activity_ms == -NEVER:
                continue
            down = {b: (ep.cause, ep.alert_id) for b, ep in facts.episodes.items()}
            for broker in sorted(restart_gate.brokers_of(facts.gate) | set(facts.segments)):
                v = restart_gate.verdict(facts.gate, broker, facts.newest_activity_ms, down, cfg)
                out.append({"cluster": name, **v})
        return out

    def _facts(self, cluster: str) -> ClusterFacts:
        facts = self.clusters.get(cluster)
        if facts is None:
            facts = self.clusters[cluster] = ClusterFacts()
        return facts

    def _activity(self, report: dict) -> None:
        facts = self._facts(report["cluster"])
        bucket = report["bucket"]
        limit = self.cfg.silent_after_ms
        for key, info in report["brokers"].items():
            broker = int(key)
            segs = facts.segments.setdefault(broker, [])
            for start, end in info.get("segments", ()):
                _insert(segs, start, end, limit)
                if end > facts.newest_activity_ms:
                    facts.newest_activity_ms = end
            if "led" in info:
                facts.replicas.setdefault(broker, {})[bucket] = (info["led"], info["replicas"])

    # -- the timeline ------------------------------------------------------------------------
    def _run(self, cluster: str, facts: ClusterFacts, horizon: int, out: list, flush: bool) -> None:
        """Apply, in event-time order, everything that happens in (facts.horizon_ms, horizon]:
        broker silences and returns, controller states, and the release of held alerts."""
        start = facts.horizon_ms
        self._held_firing = {r["alert_id"] for r in facts.held if r["status"] == "firing"}
        heap: list[tuple] = []
        seq = itertools.count()
        gw = self.cfg.group_wait_ms

        def push(ts: int, rank: int, kind: str, broker: int | None, arg: Any = None) -> None:
            ts = max(ts, start + 1)  # news of a time already decided is taken now
            key = (ts, rank, -1 if broker is None else broker, _order(arg), next(seq))
            heapq.heappush(heap, (*key, kind, broker, arg))

        self._release_due = lambda ep: (
            push(ep.started_ms + gw, 3, "release_root", ep.broker)
            if flush or ep.started_ms + gw <= horizon
            else None
        )
        scheduled: set[int] = set()

        def counts_due() -> None:  # an update of each outage whose counts changed, at most 1/s
            for ep in facts.episodes.values():
                if ep.counts_dirty and ep.released and ep.broker not in scheduled:
                    at = max(ep.dirty_ms, ep.counts_ms + COUNTS_EVERY_MS)
                    if flush or at <= horizon:
                        scheduled.add(ep.broker)
                        push(at, 5, "counts", ep.broker)

        limit = self.cfg.silent_after_ms
        for broker, segs in facts.segments.items():
            if not self._has_replicas(facts, broker):
                continue
            for i, (_, end) in enumerate(segs):
                quiet_from = end + limit + 1
                nxt = segs[i + 1][0] if i + 1 < len(segs) else None
                if nxt is not None and nxt - end <= limit:
                    continue
                if start < quiet_from <= horizon:
                    push(quiet_from, 1, "silent", broker, end)
                if nxt is not None and start < nxt <= horizon and nxt >= quiet_from:
                    push(nxt, 0, "heard", broker)
        keep = []
        for ts, broker, state in facts.pending_states:
            if ts <= horizon or flush:
                push(ts, 2, "state", broker, state)
            else:
                keep.append((ts, broker, state))
        facts.pending_states = keep
        for ep in facts.episodes.values():
            if not ep.released:
                self._release_due(ep)
        waiting = []
        for rec in facts.held:
            due = rec["started_ms"] + gw if rec["status"] == "firing" else rec["ts"]
            if due <= horizon or flush:
                push(due, 4, "release", None, rec)
            else:
                waiting.append(rec)
        facts.held = []
        while heap:
            ts, *_, kind, broker, arg = heapq.heappop(heap)
            if kind == "silent":
                if broker not in facts.silent:
                    facts.silent[broker] = arg
                    self._broker_changed(cluster, facts, broker, ts, out)
            elif kind == "heard":
                if facts.silent.pop(broker, None) is not None:
                    self._broker_changed(cluster, facts, broker, ts, out)
            elif kind == "state":
                if arg == "running":  # registered and running: the controller says it is back
                    facts.states.pop(broker, None)
                    facts.silent.pop(broker, None)
                else:
                    facts.states[broker] = arg
                self._broker_changed(cluster, facts, broker, ts, out)
            elif kind == "release_root":
                ep = facts.episodes.get(broker)
                if ep is not None and not ep.released:
                    self._release_root(cluster, facts, ep, ts, out)
            elif kind == "counts":
                scheduled.discard(broker)
                ep = facts.episodes.get(broker)
                if ep is not None and ep.counts_dirty and ep.released:
                    ep.counts_dirty = False
                    ep.counts_ms = ts
                    out.append(self._root_record(cluster, ep, "updated", ts))
            else:
                self._release(cluster, facts, arg, ts, out, waiting)
            counts_due()
        facts.held = waiting + facts.held
        facts.horizon_ms = max(horizon, start)
        # an alert it claims started by its end + group_wait and is released group_wait later:
        # until then it is needed, whatever time a batch ended at
        facts.ended = [ep for ep in facts.ended if ep.ended_ms + 2 * gw >= facts.horizon_ms]
        for key, at in list(facts.controller_exits.items()):
            if at + CONTROLLED_WITHIN_MS < facts.horizon_ms:
                del facts.controller_exits[key]
        for segs in facts.segments.values():  # what no decision can need any more
            cut = facts.horizon_ms - 2 * self.cfg.silent_after_ms
            while len(segs) > 1 and segs[1][1] < cut:
                segs.pop(0)

    def _has_replicas(self, facts: ClusterFacts, broker: int) -> bool:
        """A broker that holds no replica (as the buckets last reported) is expected to be quiet."""
        per_bucket = facts.replicas.get(broker)
        return per_bucket is None or any(r for _, r in per_bucket.values())

    # -- broker episodes --------------------------------------------------------------------
    def _broker_changed(self, cluster: str, facts: ClusterFacts, broker: int, ts: int, out: list) -> None:
        state = facts.states.get(broker)
        cause = FENCED if state == "fenced" else SHUTTING_DOWN if state == "shutting_down" else None
        if cause is None and broker in facts.silent:
            cause = SILENT
        ep = facts.episodes.get(broker)
        if cause is not None and ep is None:
            started = facts.silent[broker] + self.cfg.silent_after_ms + 1 if cause == SILENT else ts
            started = min(started, ts)
            if cause != SHUTTING_DOWN and started - facts.controller_exits.get(str(broker), -NEVER) <= (
                CONTROLLED_WITHIN_MS
            ):
                # the controller emptied the broker just before it stopped: a controlled shutdown
                # (the Admin API does not show it, and the heartbeat asking for it may not be seen)
                cause = SHUTTING_DOWN
            ep = Episode(
                alert_id(BROKER_UNAVAILABLE, broker_subject(cluster, broker), started),
                broker,
                started,
                cause,
                controlled=cause == SHUTTING_DOWN,
                cause_ms=ts,
            )
            facts.episodes[broker] = ep
            self._release_due(ep)
        elif cause == SILENT and ep is not None and ep.controlled:
            pass  # a broker that shut down is silent too: still the shutdown
        elif cause is not None and ep is not None and cause != ep.cause:
            ep.cause = cause
            ep.cause_ms = ts
            ep.controlled = ep.controlled or cause == SHUTTING_DOWN
            if ep.released:
                out.append(self._root_record(cluster, ep, "updated", ts))
        elif cause is None and ep is not None:
            del facts.episodes[broker]
            ep.ended_ms = ts
            facts.ended.append(ep)
            if not ep.released:  # over within group_wait: recorded, never notified
                ep.released, ep.notify = True, False
                out.append(self._root_record(cluster, ep, "firing", ep.started_ms))
            out.append(self._root_record(cluster, ep, "resolved", ts))

    def _release_root(self, cluster: str, facts: ClusterFacts, ep: Episode, ts: int, out: list) -> None:
        ep.released = True
        ep.notify = True
        ep.counts_dirty = False
        ep.counts_ms = ts
        out.append(self._root_record(cluster, ep, "firing", ep.started_ms))

    def _root_record(self, cluster: str, ep: Episode, status: str, ts: int) -> dict:
        counts = ep.counts()
        severity = "warning" if ep.controlled else SEVERITY[BROKER_UNAVAILABLE]
        rec: dict[str, Any] = {
            "alert_id": ep.alert_id,
            "name": BROKER_UNAVAILABLE,
            "status": status,
            "severity": severity,
            "cluster": cluster,
            "topic": None,
            "partition": None,
            "replica": None,
            "broker": ep.broker,
            "subject": broker_subject(cluster, ep.broker),
            "started_ms": ep.started_ms,
            "ts": ts,
            "reason": "",
            "cause": ep.cause,
            "caused_by": None,
            "root_cause": True,
            "notify": ep.notify and status != "updated",
            "silenced_by": [],
            "counts": counts,
            "cause_ms": ep.cause_ms,
        }
        if status == "resolved":
            rec["reason"] = texts.close_text(
                BROKER_UNAVAILABLE,
                "heard_again" if ep.cause == SILENT else "running",
                broker=ep.broker,
                cluster=cluster,
            )
        else:
            rec["reason"] = texts.open_text(
                BROKER_UNAVAILABLE,
                ep.cause,
                broker=ep.broker,
                cluster=cluster,
                since=texts.fmt_clock(self._cause_since(ep)),
                counts=texts.fmt_counts(counts),
            )
        return rec

    def _cause_since(self, ep: Episode) -> int:
        """The time of the fact the open text names: for a silence, the broker's last activity
        (the episode starts silent_after_ms + 1 later, _broker_changed); else when the current
        cause was seen (a fence after a silence comes later than the episode's start)."""
        if ep.cause == SILENT:
            return ep.started_ms - self.cfg.silent_after_ms - 1
        return max(ep.cause_ms, ep.started_ms)  # (a state saved before cause_ms existed: the start)

    def _episode_for(self, facts: ClusterFacts, broker: int | None, at_ms: int) -> Episode | None:
        """The outage of `broker` that explains something that started at `at_ms`: open then,
        or starting within group_wait after it, or ended less than group_wait before it."""
        if broker is None or broker < 0:
            return None
        gw = self.cfg.group_wait_ms
        for ep in (facts.episodes.get(broker), *reversed(facts.ended)):
            if ep is None or ep.broker != broker:
                continue
            if ep.started_ms <= at_ms + gw and (ep.ended_ms is None or ep.ended_ms + gw >= at_ms):
                return ep
        return None

    # -- consequences ------------------------------------------------------------------------
    def _release(
        self, cluster: str, facts: ClusterFacts, rec: dict, ts: int, out: list, waiting: list
    ) -> None:
        aid = rec["alert_id"]
        if rec["status"] != "firing":
            decision = facts.decided.pop(aid, None)
            self._ungroup_lag(facts, rec)
            if decision is None:
                if aid in self._held_firing:  # its firing is still held: resolved within group_wait
                    waiting.append(rec)
                else:  # its firing was decided before this step existed: as it comes
                    out.append(rec)
                return
            self._apply(rec, decision)
            out.append(rec)
            return
        self._held_firing.discard(aid)
        decision = self._decide(facts, rec)
        # its resolve, if it came by the time of this release (a later one may already be in
        # hand, the batch having cut past it: it is not within group_wait for that)
        resolves = [w for w in waiting if w["alert_id"] == aid and w["ts"] <= ts]
        if resolves:  # over before its group_wait ended: recorded, not notified
            decision["quiet"] = True
        self._group_lag(facts, rec, decision)
        self._apply(rec, decision)
        facts.decided[aid] = decision
        out.append(rec)
        ep = decision.get("episode")
        kind = COUNTED.get(rec["name"])
        if ep is not None and kind is not None:
            ep.counted.setdefault(kind, set()).add(rec["subject"])
            ep.counts_dirty, ep.dirty_ms = True, ts
        if (
            ep is not None
            and rec.get("topic") is not None
            and (rec.get("leader") == ep.broker or rec["name"] == "OfflinePartition")
        ):
            # a partition it led, seen to suffer: a leader lost (counted from the alerts, so
            # that the figure depends on event times only)
            led = ep.counted.setdefault("leaders_lost", set())
            subject = f"{rec['cluster']}/{rec['topic']}-{rec['partition']}"
            if subject not in led:
                led.add(subject)
                ep.counts_dirty, ep.dirty_ms = True, ts
        for other in resolves:  # its resolve, already in hand, follows at once
            waiting.remove(other)
            self._release(cluster, facts, other, ts, out, waiting)

    def _decide(self, facts: ClusterFacts, rec: dict) -> dict:
        name, at = rec["name"], rec["started_ms"]
        caused_by, cause = rec.get("caused_by"), rec.get("cause")
        ep = None
        if name in REPLICA_ALERTS:
            ep = self._episode_for(facts, rec.get("replica"), at)
            if ep is not None:
                cause = ep.cause if cause in ("lag", None) else cause
            else:
                ep = self._episode_for(facts, rec.get("leader"), at)
                if ep is not None:
                    cause = LEADER_UNAVAILABLE
        elif name == FETCHER_STALLED:
            ep = self._episode_for(facts, rec.get("broker"), at) or self._episode_for(
                facts, rec.get("leader"), at
            )
        elif name not in (BROKER_UNAVAILABLE, "TelemetryMissing") or rec.get("topic") is not None:
            # what the partition's own alerts say first (its missing replica's alert, or the
            # controller decision the bucket saw cross the threshold), then its leader, then
            # the outages of all the brokers it misses (the latest to start crossed it)
            upstream = facts.decided.get(caused_by) if caused_by else None
            if upstream is not None and upstream.get("episode") is not None:
                ep = upstream["episode"]
            elif caused_by in facts.aliases:
                ep = self._episode_for(facts, facts.aliases[caused_by], at)
            if ep is None:
                ep = self._episode_for(facts, rec.get("leader"), at)
            brokers = rec.get("brokers") or []
            if ep is None and brokers:
                eps = [self._episode_for(facts, b, at) for b in brokers]
                found = [e for e in eps if e is not None]
                if len(found) == len(eps):
                    ep = max(found, key=lambda e: e.started_ms)
            if ep is None:
                # a partition one of whose replicas is out: its leadership moved, its new leader's
                # HW waits for followers that now fetch from it, ... (a replica's own lag still
                # notifies on its own ReplicaOutOfSync)
                eps = [self._episode_for(facts, b, at) for b in rec.get("replicas") or []]
                found = [e for e in eps if e is not None]
                if found:
                    ep = min(found, key=lambda e: e.started_ms)
        if ep is None and caused_by in facts.aliases:  # named a bucket's BrokerUnavailable
            ep = self._episode_for(facts, facts.aliases[caused_by], at)
        if ep is not None:
            caused_by = ep.alert_id
        elif caused_by in facts.aliases:
            caused_by = None
        return {"episode": ep, "caused_by": caused_by, "cause": cause}

    def _group_lag(self, facts: ClusterFacts, rec: dict, decision: dict) -> None:
        """A follower broker out of sync on several partitions for its own reason (no outage
        explains it) is one notification: the first notified ReplicaOutOfSync of the broker
        stands for the others while any is open, or it resolved less than REGROUP_MS ago
        (Alertmanager's group_interval)."""
        if (
            rec["name"] not in ("ReplicaOutOfSync", "IsrFlapping")
            or decision["caused_by"] is not None
            or rec.get("replica") is None
        ):
            return
        group = facts.lagging.get(str(rec["replica"]))
        at = rec["started_ms"]
        if rec["name"] == "IsrFlapping":  # the same lagging broker going in and out: its group's
            if group is not None and (group[1] or at <= group[2] + REGROUP_MS):
                decision["caused_by"] = group[0]
            return
        if group is not None and (group[1] or at <= group[2] + REGROUP_MS):
            decision["caused_by"] = group[0]
            group[1].append(rec["alert_id"])
            return
        if decision.get("quiet"):
            # recorded, not notified (over within group_wait): it cannot stand for a later lag of
            # the broker, which on-call would then never hear of
            return
        facts.lagging[str(rec["replica"])] = [rec["alert_id"], [rec["alert_id"]], -NEVER]

    @staticmethod
    def _ungroup_lag(facts: ClusterFacts, rec: dict) -> None:
        if rec["name"] != "ReplicaOutOfSync" or rec.get("replica") is None:
            return
        group = facts.lagging.get(str(rec["replica"]))
        if group is not None and rec["alert_id"] in group[1]:
            group[1].remove(rec["alert_id"])
            if not group[1]:
                group[2] = rec["ts"]
        for key, (_, members, ended) in list(facts.lagging.items()):
            if not members and ended + REGROUP_MS < facts.horizon_ms:
                del facts.lagging[key]

    @staticmethod
    def _apply(rec: dict, decision: dict) -> None:
        caused_by = decision["caused_by"]
        ep = decision["episode"]
        if (
            decision["cause"] == LEADER_UNAVAILABLE
            and rec.get("cause") != LEADER_UNAVAILABLE
            and rec["status"] == "firing"
        ):
            rec["reason"] = f"its leader, broker {ep.broker}, is unavailable ({ep.cause}): {rec['reason']}"
        rec["cause"] = decision["cause"]
        rec["caused_by"] = caused_by
        rec["root_cause"] = caused_by is None
        notify = is_notified(rec["name"], caused_by) and not decision.get("quiet", False)
        if notify and ep is not None and not ep.controlled and rec["name"] in ALWAYS_NOTIFIED:
            # acks=all rejected or a partition offline pages on its own, except as part of an
            # outage that pages already: then it is in that one page's counts (a controlled
            # shutdown is a warning, so what it takes below min ISR still pages)
            notify = False
        rec["notify"] = notify

    # -- persistence ---------------------------------------------------------------------------
    def to_doc(self) -> dict:
        """The state as plain JSON-able data (kept with the query's checkpoint)."""
        return {
            "format": 1,
            "clusters": {name: _facts_doc(f) for name, f in self.clusters.items()},
        }

    @classmethod
    def from_doc(cls, cfg: ClusterConfig, doc: dict | None) -> ClusterStep:
        step = cls(cfg)
        for name, d in (doc or {}).get("clusters", {}).items():
            step.clusters[name] = _facts_from_doc(d)
        return step


def _state_of(cause: str | None) -> str | None:
    return {FENCED: "fenced", SHUTTING_DOWN: "shutting_down"}.get(cause or "")


def _order(arg: Any) -> tuple:
    """Ties on one event time: a firing before its resolve, then by id (deterministic)."""
    if isinstance(arg, dict):
        return (
            arg["name"] not in REPLICA_ALERTS and arg["name"] != FETCHER_STALLED,
            arg["status"] != "firing",
            arg["alert_id"],
        )
    return (False, False, "")


def _insert(segs: list, start: int, end: int, limit: int) -> None:
    """Add the activity run [start, end] to the sorted merged runs: runs closer than `limit`
    are one."""
    lo = start - limit
    hi = end + limit
    i = 0
    while i < len(segs) and segs[i][1] < lo:
        i += 1
    j = i
    while j < len(segs) and segs[j][0] <= hi:
        start = min(start, segs[j][0])
        end = max(end, segs[j][1])
        j += 1
    segs[i:j] = [[start, end]]


def _episode_doc(ep: Episode) -> dict:
    return {
        "alert_id": ep.alert_id,
        "broker": ep.broker,
        "started_ms": ep.started_ms,
        "cause": ep.cause,
        "controlled": ep.controlled,
        "released": ep.released,
        "notify": ep.notify,
        "ended_ms": ep.ended_ms,
        "counted": {k: sorted(v) for k, v in ep.counted.items()},
        "counts_dirty": ep.counts_dirty,
        "counts_ms": ep.counts_ms,
        "dirty_ms": ep.dirty_ms,
        "cause_ms": ep.cause_ms,
    }


def _episode_from_doc(d: dict) -> Episode:
    d = dict(d)
    d["counted"] = {k: set(v) for k, v in d["counted"].items()}
    return Episode(**d)


def _facts_doc(f: ClusterFacts) -> dict:
    # an episode is named by its alert's id (one alert per episode), so that the same facts
    # give the same document (a replayed batch's state equals the first one's)
    eps = {ep.alert_id: ep for ep in (*f.episodes.values(), *f.ended)}

    def decision_doc(d: dict) -> dict:
        ep = d.get("episode")
        return {"caused_by": d["caused_by"], "cause": d["cause"], "episode": ep.alert_id if ep else None}

    return {
        "horizon_ms": f.horizon_ms,
        "newest_activity_ms": f.newest_activity_ms,
        "segments": [[b, s] for b, s in f.segments.items()],
        "replicas": [[b, [[k, list(v)] for k, v in per.items()]] for b, per in f.replicas.items()],
        "silent": [[b, t] for b, t in f.silent.items()],
        "states": [[b, s] for b, s in f.states.items()],
        "pending_states": [list(p) for p in f.pending_states],
        "aliases": f.aliases,
        "episodes": {k: _episode_doc(ep) for k, ep in eps.items()},
        "open": [[b, ep.alert_id] for b, ep in f.episodes.items()],
        "ended": [ep.alert_id for ep in f.ended],
        "held": f.held,
        "lagging": f.lagging,
        "controller_exits": f.controller_exits,
        "decided": {aid: decision_doc(d) for aid, d in f.decided.items()},
        "gate": restart_gate.to_doc(f.gate),
    }


def _facts_from_doc(d: dict) -> ClusterFacts:
    # (states written before episodes were named by alert id name them by a number: str() reads both)
    eps = {str(k): _episode_from_doc(v) for k, v in d["episodes"].items()}
    f = ClusterFacts(horizon_ms=d["horizon_ms"], newest_activity_ms=d["newest_activity_ms"])
    f.segments = {int(b): [list(x) for x in s] for b, s in d["segments"]}
    f.replicas = {int(b): {int(k): tuple(v) for k, v in per} for b, per in d["replicas"]}
    f.silent = {int(b): t for b, t in d["silent"]}
    f.states = {int(b): s for b, s in d["states"]}
    f.pending_states = [tuple(p) for p in d["pending_states"]]
    f.aliases = dict(d["aliases"])
    f.episodes = {int(b): eps[str(k)] for b, k in d["open"]}
    f.ended = [eps[str(k)] for k in d["ended"]]
    f.held = list(d["held"])
    f.lagging = {k: [v[0], list(v[1]), v[2]] for k, v in d.get("lagging", {}).items()}
    f.controller_exits = dict(d.get("controller_exits", {}))
    f.decided = {
        aid: {
            "caused_by": x["caused_by"],
            "cause": x["cause"],
            "episode": None if x["episode"] is None else eps.get(str(x["episode"])),
        }
        for aid, x in d["decided"].items()
    }
    f.gate = restart_gate.from_doc(d.get("gate"))
    return f


def cluster_config(cfg: Any) -> ClusterConfig:
    """The cluster step's settings, from the engine's (state/monitor.py MonitorConfig)."""
    return ClusterConfig(
        silent_after_ms=cfg.stuck_after_ms,
        group_wait_ms=cfg.group_wait_ms,
        slack_ms=cfg.reorder_tolerance_ms,
        lag_share=cfg.lag_share,
    )


def fold_batches(batches: list[tuple[list[dict], list[dict]]], cfg: Any, flush: bool = True) -> list[dict]:
    """The cluster step over micro-batches of (bucket alert records, activity reports), as the
    streaming query runs it; `flush`: release what is still held after the last one."""
    step = ClusterStep(cluster_config(cfg))
    out: list[dict] = []
    for alerts, activity in batches:
        out += step.step(alerts, activity)
    if flush:
        out += step.step([], [], flush=True)
    return out
