"""Fast generators for benchmarks: many partitions, no truth engine.

`scale` is the steady state at full rate: every partition receives one produce batch per 100 ms
round; each of its two followers is parked at the LEO, so the append completes its fetch and its
next fetch arrives 1-5 ms later with `fetch_offset == leader_leo` (the new LEO) and `leader_hw` =
the LEO before the append (RULES §5.2: a follower learns of the HW it moved one fetch later).
This is exactly what the event model produces for a healthy cluster, computed with numpy a round
at a time: every follower stays caught up, so the expected truth is empty. Events are yielded as
JSON lines, in ts order.

`Paced` is a cluster as `replmon collect` publishes it with compaction on: each follower's
fetches and each busy partition's appends at a given rate (events per second, from
docs/real-cluster.md section 5), generated for any window of event time so that a benchmark can
send them as the wall clock reaches it; a follower can be stopped for a while (a fault). With
`session_ms`, idle partitions are published in session form (`replmon collect`'s default).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .model import DEFAULT_START_MS, FIRST_BROKER_EPOCH

ROUND_MS = 100
BROKERS = (1, 2, 3)
REPLICATION_FACTOR = 3
LAG_MAX_MS = 30000
MIN_ISR = 2


@dataclass(frozen=True)
class Layout:
    """Who is where: `partitions` partitions, RF 3 over 3 brokers, leader first."""

    names: list[tuple[str, int]]  # (topic, partition number) per partition
    replicas: list[tuple[int, ...]]
    epochs: dict[int, int]  # broker -> broker epoch
    heads: list[str]  # the `"cluster":..,"topic":..,"partition":..` part of each partition's lines
    cluster: str

    @classmethod
    def of(cls, partitions: int, cluster: str, topic: str, topics: int) -> Layout:
        epochs = {b: FIRST_BROKER_EPOCH + 2 * i for i, b in enumerate(BROKERS)}
        replicas = [
            tuple(BROKERS[(p + i) % len(BROKERS)] for i in range(REPLICATION_FACTOR))
            for p in range(partitions)
        ]
        per_topic = -(-partitions // topics)
        names = [
            (topic if topics == 1 else f"{topic}-{p // per_topic}", p % per_topic) for p in range(partitions)
        ]
        heads = [f'"cluster":"{cluster}","topic":"{name}","partition":{number}' for name, number in names]
        return cls(names, replicas, epochs, heads, cluster)

    def brokers(self, ts: int) -> Iterator[str]:
        for b, epoch in self.epochs.items():
            yield (
                f'{{"type":"broker","ts":{ts},"cluster":"{self.cluster}","broker":{b},"state":"running",'
                f'"broker_epoch":{epoch}}}'
            )

    def metadata(self, p: int, ts: int, lag_max_ms: int, leo: int = 0) -> str:
        reps = self.replicas[p]
        isr = ",".join(map(str, sorted(reps)))
        return (
            f'{{"type":"metadata","ts":{ts},{self.heads[p]},'
            f'"leader":{reps[0]},"leader_epoch":0,"replicas":[{",".join(map(str, reps))}],"isr":[{isr}],'
            f'"leader_leo":{leo},"hw":{leo},"min_insync_replicas":{MIN_ISR},"replica_lag_time_max_ms":{lag_max_ms}}}'
        )

    def fetch_static(self, p: int, replica: int) -> str:
        return (
            f'{self.heads[p]},"replica":{replica},"leader_epoch":0,"broker_epoch":{self.epochs[replica]},'
            f'"log_start_offset":0'
        )


def scale(
    partitions: int,
    seconds: int,
    *,
    seed: int = 0,
    start_ms: int = DEFAULT_START_MS,
    cluster: str = "sim",
    topic: str = "bench",
    topics: int = 1,
    produce_rate: float = 500.0,
) -> Iterator[str]:
    """Yield the JSON lines of `partitions` partitions (RF 3 over 3 brokers) for `seconds` of event time.

    With topics > 1 the partitions are spread over topics `<topic>-0` ... About 30 events per
    partition-second (10 appends, 20 fetches) plus a heartbeat per second.
    """
    if partitions < 1 or seconds < 1:
        raise ValueError("scale needs partitions >= 1 and seconds >= 1")
    rng = np.random.default_rng(seed)
    layout = Layout.of(partitions, cluster, topic, topics)
    yield from layout.brokers(start_ms)
    for p in range(partitions):
        yield layout.metadata(p, start_ms, LAG_MAX_MS)

    # Static parts of each line, per partition (append) and per partition x follower (fetch).
    append_static = layout.heads
    fetch_static = [layout.fetch_static(p, r) for p in range(partitions) for r in layout.replicas[p][1:]]
    follower_row = np.repeat(np.arange(partitions), REPLICATION_FACTOR - 1)
    statics = append_static + fetch_static
    row_partition = list(range(partitions)) + follower_row.tolist()  # line index -> its partition
    heartbeat = f'{{"type":"heartbeat","ts":%d,"cluster":"{cluster}"}}'

    phase = rng.integers(0, ROUND_MS - 15, partitions)  # each partition's produce phase in a round
    mean_batch = produce_rate * ROUND_MS / 1000
    leo = np.zeros(partitions, np.int64)
    for k in range(seconds * 1000 // ROUND_MS):
        w = start_ms + k * ROUND_MS
        if k % (1000 // ROUND_MS) == 0:
            yield heartbeat % w
        hw = leo  # the HW before this round's append
        leo = leo + rng.integers(int(mean_batch * 0.5), int(mean_batch * 1.5) + 1, partitions)
        t_append = w + phase + rng.integers(0, 10, partitions)
        t_fetch = t_append[follower_row] + rng.integers(1, 6, follower_row.size)
        ts = np.r_[t_append, t_fetch]
        order = np.argsort(ts, kind="stable").tolist()
        ts_l, leo_l, hw_l = ts.tolist(), leo.tolist(), hw.tolist()
        for i in order:
            if i >= partitions:
                p = row_partition[i]
                yield (
                    f'{{"type":"fetch","ts":{ts_l[i]},{statics[i]},"fetch_offset":{leo_l[p]},'
                    f'"leader_leo":{leo_l[p]},"leader_hw":{hw_l[p]}}}'
                )
            else:
                yield f'{{"type":"append","ts":{ts_l[i]},{statics[i]},"leader_leo":{leo_l[i]}}}'


@dataclass(frozen=True)
class Fault:
    """Follower `replica` of partition `partition` sends no fetch in [start_ms, end_ms) of event
    time; then it fetches again, caught up."""

    partition: int
    replica: int
    start_ms: int
    end_ms: int


class Paced:
    """The partitions `owned` of `layout` as a compacting collector publishes them, for any
    window of event time (`window`, called with consecutive windows).

    Each follower fetches every 1 / fetch_per_s[p] s and each partition with append_per_s[p] > 0
    appends that often, each at a random phase: a caught-up fetch reports the leader LEO and
    the HW as it was before it (the lowest LEO of the followers), so a stopped follower (a
    `Fault`) holds the HW back and falls behind. With `published_per_s`, only that many of a
    partition's appends a second are sent (a compacting collector drops an append whose LEO
    the next fetch tells): the others only grow the LEO the fetches tell. Lines come with
    their record keys, in ts order.
    """

    def __init__(
        self,
        layout: Layout,
        owned: Sequence[int],
        fetch_per_s: np.ndarray,
        append_per_s: np.ndarray,
        *,
        start_ms: int,
        lag_max_ms: int,
        faults: Sequence[Fault] = (),
        heartbeats: bool = False,
        seed: int = 0,
        session_ms: int | None = None,
        fetcher: int = 0,
        published_per_s: np.ndarray | None = None,
    ) -> None:
        rng = np.random.default_rng(seed)
        self.layout, self.start_ms, self.lag_max_ms = layout, start_ms, lag_max_ms
        self.owned = np.asarray(owned, np.int64)
        n = self.owned.size
        rate = append_per_s[self.owned]
        self._schedule(rng, fetch_per_s[self.owned], rate)
        self.leo = np.zeros(n, np.int64).tolist()
        self.follower_leo = [0] * (2 * n)
        self.hw = [0] * n
        self.batch = rng.integers(100, 300, n).tolist()  # records per (compacted) append
        # the share of its appends a partition publishes, and how far each is to its next one
        self.publish: list[float] | None = None
        if published_per_s is not None:
            share = np.minimum(published_per_s[self.owned] / np.where(rate > 0, rate, 1), 1.0)
            self.publish = share.tolist()
            self.credit = rng.random(n).tolist()
        local = {int(p): i for i, p in enumerate(self.owned.tolist())}
        self.faults = [
            (2 * local[f.partition] + layout.replicas[f.partition].index(f.replica) - 1, f.start_ms, f.end_ms)
            for f in faults
            if f.partition in local
        ]
        self._line_templates(owned)
        self._session_form(owned, rate, session_ms, fetcher)
        self.next_beat = -(-start_ms // 1000) * 1000 if heartbeats else None  # on whole seconds
        self.heartbeat = f'"type":"heartbeat","ts":%d,"cluster":"{layout.cluster}"}}'.encode()

    def _schedule(self, rng, fetch_per_s: np.ndarray, rate: np.ndarray) -> None:
        """Each follower's fetch period and first fetch, and each partition's append period and
        first append (never at a `rate` of 0 appends a second), at random phases from start_ms;
        `fetch_per_s` and `rate` of the owned partitions."""
        n = self.owned.size
        self.fetch_period = np.repeat(1000.0 / fetch_per_s, 2)
        self.fetch_next = self.start_ms + rng.random(2 * n) * self.fetch_period
        self.append_period = np.where(rate > 0, 1000.0 / np.where(rate > 0, rate, 1), np.inf)
        self.append_next = np.where(rate > 0, self.start_ms + rng.random(n) * self.append_period, np.inf)

    def _line_templates(self, owned: Sequence[int]) -> None:
        """The record key of each owned partition, and its append and its followers' fetch lines
        with the per-event values left as %d."""
        layout = self.layout
        self.keys = [f"{layout.cluster}/{layout.names[p][0]}/{layout.names[p][1]}".encode() for p in owned]
        self.appends = [
            f'"type":"append","ts":%d,{layout.heads[p]},"leader_leo":%d}}'.encode() for p in owned
        ]
        self.fetches = [
            f'"type":"fetch","ts":%d,{layout.fetch_static(p, r)},"fetch_offset":%d,"leader_leo":%d,'
            f'"leader_hw":%d}}'.encode()
            for p in owned
            for r in layout.replicas[p][1:]
        ]

    def _session_form(
        self, owned: Sequence[int], rate: np.ndarray, session_ms: int | None, fetcher: int
    ) -> None:
        """Session form (docs/events.md `session`), when session_ms is set: an idle partition's
        follower sends its first fetch naming its session (one per follower and leader of this
        generator, its `fetcher`), then only the session's reads say it, at most one `session`
        event per session_ms. A busy partition's fetches go out as before, in no session."""
        layout, n = self.layout, self.owned.size
        self.session_ms = session_ms
        self.idle = [rate[i // 2] <= 0 for i in range(2 * n)]
        self.idle_mask = np.repeat(rate <= 0, 2)
        if session_ms is not None and any(self.idle[f] for f, _, _ in self.faults):
            # its session's other partitions would go on saying it read
            raise ValueError("session form: a stopped follower of an idle partition is not modelled")
        self.joined = np.zeros(2 * n, bool)
        self.session_of = [
            (r, layout.replicas[p][0]) for p in self.owned.tolist() for r in layout.replicas[p][1:]
        ]
        self.session_keys = sorted(set(self.session_of))
        number = {key: i for i, key in enumerate(self.session_keys)}
        self.session_index = np.array([number[key] for key in self.session_of], np.int64)
        self.session_due: dict[tuple, int] = {}
        self.session_lines = {
            (r, leader): (
                f'"type":"session","ts":%d,"cluster":"{layout.cluster}","replica":{r},"leader":{leader},'
                f'"session_id":{1 + fetcher * 100 + r * 10 + leader}}}'
            ).encode()
            for r in BROKERS
            for leader in BROKERS
            if r != leader
        }
        self.joining = [
            f'"type":"fetch","ts":%d,{layout.fetch_static(p, r)},"fetch_offset":%d,"leader_leo":%d,'
            f'"leader_hw":%d,"session_id":{1 + fetcher * 100 + r * 10 + layout.replicas[p][0]}}}'.encode()
            for p in owned
            for r in layout.replicas[p][1:]
        ]

    def header(self) -> list[tuple[bytes, bytes]]:
        """The brokers (with the heartbeats) and the owned partitions' metadata at start_ms."""
        ts, cluster = self.start_ms, self.layout.cluster.encode()
        lines = [(cluster, line.encode()) for line in self.layout.brokers(ts)] if self.next_beat else []
        return lines + [
            (key, self.layout.metadata(int(p), ts, self.lag_max_ms).encode())
            for key, p in zip(self.keys, self.owned.tolist(), strict=True)
        ]

    def _due(self, nxt: np.ndarray, period: np.ndarray, end_ms: int) -> tuple[np.ndarray, np.ndarray]:
        """(ts, index) of every event of these streams before end_ms; moves them on."""
        ts_all, idx_all = [], []
        while True:
            idx = np.flatnonzero(nxt < end_ms)
            if idx.size == 0:
                break
            ts_all.append(nxt[idx].astype(np.int64))
            idx_all.append(idx)
            nxt[idx] += period[idx]
        if not ts_all:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return np.concatenate(ts_all), np.concatenate(idx_all)

    def _telling(self, f_ts: np.ndarray, f_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Session form: the fetches of this window less the idle followers' that say nothing
        (after its first fetch, an idle follower's only tell when they are its session's next
        `session` event): what `window` would skip, left out before its loop, which then costs
        per event sent rather than per fetch made (most fetches are idle ones)."""
        period = self.session_ms
        assert period is not None
        idle = self.idle_mask[f_idx]
        if not idle.any():
            return f_ts, f_idx
        i_ts, i_f = f_ts[idle], f_idx[idle]
        order = np.lexsort((-1 - i_f, i_ts))  # window's order: by ts, then by kind
        i_ts, i_f = i_ts[order], i_f[order]
        keep = np.zeros(i_ts.size, bool)
        joined = self.joined[i_f]
        first = np.zeros(i_ts.size, bool)
        first[np.unique(i_f, return_index=True)[1]] = True
        joins = first & ~joined  # an idle follower's first fetch ever: it names its session
        keep |= joins
        rest = ~joins
        sessions = self.session_index[i_f]
        for s in np.unique(sessions[rest]).tolist():
            at = np.flatnonzero(rest & (sessions == s))
            times = i_ts[at]
            due = self.session_due.get(self.session_keys[s], int(times[0]))
            while (j := int(np.searchsorted(times, due))) < times.size:
                keep[at[j]] = True
                due = int(times[j]) + period
        return np.r_[f_ts[~idle], i_ts[keep]], np.r_[f_idx[~idle], i_f[keep]]

    def window(self, end_ms: int) -> list[tuple[bytes, bytes]]:
        """Every event before end_ms not given yet, as (key, JSON line), in ts order."""
        a_ts, a_idx = self._due(self.append_next, self.append_period, end_ms)
        f_ts, f_idx = self._due(self.fetch_next, self.fetch_period, end_ms)
        if self.session_ms is not None:
            f_ts, f_idx = self._telling(f_ts, f_idx)
        ts = np.r_[a_ts, f_ts]
        kind = np.r_[a_idx, -1 - f_idx]  # >= 0: an append of partition i; < 0: a fetch of follower -1-k
        order = np.lexsort((kind, ts))
        out: list[tuple[bytes, bytes]] = []
        leo, fleo, hw = self.leo, self.follower_leo, self.hw
        beats = [] if self.next_beat is None else list(range(self.next_beat, end_ms, 1000))
        if beats:
            self.next_beat = beats[-1] + 1000
        beats.append(end_ms)  # a stop
        b, cluster = 0, self.layout.cluster.encode()
        stopped = {f: (start, end) for f, start, end in self.faults}
        for t, k in zip(ts[order].tolist(), kind[order].tolist(), strict=True):
            while beats[b] <= t:
                out.append((cluster, b"{" + self.heartbeat % beats[b]))
                b += 1
            if k >= 0:
                leo[k] += self.batch[k]
                if self.publish is not None:
                    self.credit[k] += self.publish[k]
                    if self.credit[k] < 1:
                        continue
                    self.credit[k] -= 1
                out.append((self.keys[k], b"{" + self.appends[k] % (t, leo[k])))
                continue
            f = -1 - k
            if f in stopped and stopped[f][0] <= t < stopped[f][1]:
                continue
            p = f // 2
            if self.session_ms is not None and self.idle[f]:
                if not self.joined[f]:
                    self.joined[f] = True
                    out.append((self.keys[p], b"{" + self.joining[f] % (t, leo[p], leo[p], hw[p])))
                elif t >= self.session_due.get(self.session_of[f], t):
                    self.session_due[self.session_of[f]] = t + self.session_ms
                    out.append((cluster, b"{" + self.session_lines[self.session_of[f]] % t))
                continue
            out.append((self.keys[p], b"{" + self.fetches[f] % (t, leo[p], leo[p], hw[p])))
            fleo[f] = leo[p]
            hw[p] = min(fleo[2 * p], fleo[2 * p + 1])
        out.extend((cluster, b"{" + self.heartbeat % t) for t in beats[b:-1])
        return out
