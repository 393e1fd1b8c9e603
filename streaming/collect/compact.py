"""Lossless compaction: drop the events whose effect the next ones restore exactly.

A follower that keeps up fetches several times a second (about 11 fetch events per
follower-second under a modest acks=all load, docs/real-cluster.md), and its leader appends as
often; yet Kafka decides ISR membership only every L/2 (its isr-expiration task). So, per
follower and per partition, during a run of such fetches (or of appends) at most one event per
`resolution` goes out, and everything a verdict depends on still does:

- a fetch of an ISR replica is dropped only when its next two fetches are already held and
  restore what it told (`superseded`: the follower's LEO, last fetch time, leader LEO at the
  last fetch and lastCaughtUpTimeMs are the same after the second whether it was seen or not),
  and one went out less than `resolution` ago. So the last two fetches before a follower goes
  silent, falls behind without Kafka's previous-fetch credit, errs or changes epoch always go
  out, and lcu is exact where it decides anything (the shrink at lcu + L + 1, IsrExitImminent,
  ReplicaOutOfSync and their causes);
- an append is dropped when the LEO it tells was already known (under acks=all a produce is
  logged after the followers fetched it), or the first fetch of its partition after it, or an
  event before that, tells it again: every fetch is then judged against the same LEO, and a
  busy partition's LEO reaches the monitor with its followers' fetches, at least one per
  resolution;
- nothing is dropped across an event that reads the dropped state: a `metadata` or `broker`
  event, a fetch that errs or diverges, a fetch of a replica outside the ISR (it may join).
  Caught up is judged as the engine judges it: at or above the largest leader LEO any event
  of the partition told so far, whatever the fetch's own `leader_leo` says (seen on a real
  cluster: a deposed leader resuming from a pause appends what its successor never had).

The decision is made at release time (streaming/collect/reorder.py), inside the hold that
already orders the events, so it adds no latency. Between sent events the monitor's view of a
partition's LEOs and HW is up to one `resolution` old: docs/real-cluster.md lists the fields
that are approximate. Pure: time is in the events, nothing reads a clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from replmon.state.monitor import COVERED_RESOLUTION_MS, resolution_ms

if TYPE_CHECKING:
    from replmon.streaming.collect.sessions import SessionForm

INF = float("inf")
# The default resolution's cap at L = 10 s and below: well inside alerts.stuck_after_ms (3 s), a
# partition never looks silent. Above L = 10 s it is L/10 up to 3 s (`resolution_ms`).
RESOLUTION_CAP_MS = COVERED_RESOLUTION_MS


def _marks(ev: dict) -> tuple:
    """What the fetches after this one must repeat to supersede it."""
    return ev.get("leader_epoch"), ev.get("broker_epoch"), ev.get("log_start_offset")


CAUGHT, CREDITED, BEHIND = "caught", "credited", "behind"


def judge(ev: dict, leo: int, previous: tuple[int, int], fresh_ms: int) -> str:
    """An accepted fetch as the engine judges it (docs/kafka-rules.md §1.2): CAUGHT (at its read,
    at or above `leo`, the largest leader LEO any event of its partition told so far, whatever
    its own `leader_leo` says), CREDITED (behind, but at or above the LEO known at the replica's
    `previous` fetch (LEO, time): lcu moves to that fetch's time, if that was at most
    `fresh_ms` before: a credit to an old fetch leaves lcu old) or BEHIND."""
    offset = ev["fetch_offset"]
    if offset >= ev["leader_leo"] and offset >= leo:
        return CAUGHT
    prev_leo, prev_ms = previous
    return CREDITED if offset >= prev_leo and ev["ts"] - prev_ms <= fresh_ms else BEHIND


NEVER = (1 << 62, 0)  # a replica's previous fetch before it has fetched: no credit


class HeldList:
    """Held events given as a list in event-time order, indexed as ReorderBuffer indexes its own."""

    def __init__(self, held: list[dict]) -> None:
        self._partitions: dict[tuple, list] = {}
        self._broker = None
        for i, ev in enumerate(held):
            if "partition" in ev:
                pk = (ev["cluster"], ev["topic"], ev["partition"])
                self._partitions.setdefault(pk, []).append((i, i, ev))
            elif ev["type"] == "broker" and self._broker is None:
                self._broker = (i, i)

    def held_of(self, partition: tuple) -> list:
        return self._partitions.get(partition, [])

    def first_broker(self) -> tuple | None:
        return self._broker


class Compactor:
    """Decides, event by event at release, what is sent (`release`). `default_lag_ms` is L for
    a partition whose metadata has not said it; `requested_ms` overrides the resolution.
    `broker_every_ms`: never drop a fetch when its follower or its partition's leader has had
    no fetch sent for that long; by default RESOLUTION_CAP_MS for a partition whose resolution is
    above it, else none. The engine's broker silence (state/cluster.py) counts fetches across
    all partitions: at a resolution above alerts.stuck_after_ms less a fetch interval, a broker
    with few partitions would look silent between them (seen in a differential run at 3.5 s:
    BrokerUnavailable pages). It costs at most 2 events per broker per `broker_every_ms`,
    whatever the partition count."""

    def __init__(
        self,
        default_lag_ms: int = 30_000,
        requested_ms: int | None = None,
        broker_every_ms: int | None = None,
    ) -> None:
        self.default_lag_ms, self.requested_ms = default_lag_ms, requested_ms
        self.broker_every_ms = broker_every_ms
        self._leader: dict[tuple, int] = {}  # partition -> its leader, as its metadata said
        self._broker_sent: dict[int, int] = {}  # broker -> the time of the last fetch sent of it
        self._lag: dict[tuple, int] = {}  # partition -> replica.lag.time.max.ms its metadata said
        self._isr: dict[tuple, frozenset] = {}  # partition -> the ISR its metadata said
        # What the ISR and L were when the release began, for partitions whose metadata was
        # released since (the events after it are judged as they were before it).
        self._isr_then: dict[tuple, frozenset] = {}
        self._lag_then: dict[tuple, int | None] = {}
        # partition -> replica -> (ts, marks) of the last fetch sent in the run
        self._sent: dict[tuple, dict[int, tuple[int, tuple]]] = {}
        self._told: dict[tuple, int] = {}  # partition -> the largest leader LEO events told
        # partition + replica -> (that LEO, time) at its last fetch
        self._lflo: dict[tuple, tuple[int, int]] = {}
        self._resolution_of: dict[tuple, int] = {}  # partition -> its resolution, as L says now
        self.dropped: Counter = Counter()

    def release(self, released: list[dict], held: Any) -> list[dict]:
        """The events of `released` (event-time order) to send, knowing the `held` ones that
        follow: the ReorderBuffer (its index of held events by partition), or a list in
        event-time order. Each event is judged once, in order, against what came before it; a
        droppable one then reads ahead only its own partition's events up to its replica's
        second next fetch (its partition's next append), so the cost per event does not grow
        with the hold."""
        batch = _Batch(released, HeldList(held) if isinstance(held, list) else held)
        self._isr_then.clear()
        self._lag_then.clear()
        out = []
        for i, ev in enumerate(released):
            pk = batch.partition[i]
            kind = ev["type"]
            if pk is None:  # a heartbeat, or a broker event (a fence, a shutdown)
                if kind == "broker":
                    self._sent.clear()
                out.append(ev)
                continue
            if kind == "metadata":
                self._learn(ev, pk)
                self._sent.pop(pk, None)
                out.append(ev)
                continue
            before = self._told.get(pk, 0)
            leo = self._told[pk] = max(before, ev["leader_leo"])
            status = None
            if kind == "append":
                key = None
            elif "error" not in ev and "diverging_epoch" not in ev:
                key = ev["replica"]
                rk = (*pk, key)
                status = judge(ev, leo, self._lflo.get(rk, NEVER), self._fresh_ms(pk))
                self._lflo[rk] = (leo, ev["ts"])
            else:
                self._sent.pop(pk, None)
                out.append(ev)
                continue
            if key is None:  # an append
                if self._told_again(ev, pk, batch.later(i), before):
                    self.dropped[kind] += 1
                    continue
                out.append(ev)
                continue
            # its epochs, log start, and whether it is in sync
            marks = (*_marks(ev), status == BEHIND)
            if (
                status != BEHIND
                and self._recent(key, pk, ev, marks)
                and not self._broker_due(key, pk, ev["ts"])
                and self._superseded(ev, pk, leo, batch.later(i), before)
            ):
                self.dropped[kind] += 1
                continue
            self._sent.setdefault(pk, {})[key] = (ev["ts"], marks)
            self._broker_sent[key] = self._broker_sent[self._leader.get(pk, -1)] = ev["ts"]
            out.append(ev)
        return out

    def _broker_due(self, replica: int, pk: tuple, ts: int) -> bool:
        """A fetch whose follower or leader has had no fetch sent for `broker_every_ms`."""
        every = self.broker_every_ms
        if every is None:
            if self._resolution(pk) <= RESOLUTION_CAP_MS:
                return False
            every = RESOLUTION_CAP_MS
        sent = self._broker_sent
        return (
            ts - sent.get(replica, -every) >= every
            or ts - sent.get(self._leader.get(pk, -1), -every) >= every
        )

    def _learn(self, ev: dict, pk: tuple) -> None:
        """The ISR and L a metadata event says (what they were stays for the release's reads)."""
        self._isr_then.setdefault(pk, self._isr.get(pk, frozenset()))
        self._isr[pk] = frozenset(ev.get("isr") or ())
        self._leader[pk] = ev.get("leader", -1)
        if ev.get("replica_lag_time_max_ms"):
            self._lag_then.setdefault(pk, self._lag.get(pk))
            self._lag[pk] = ev["replica_lag_time_max_ms"]
            self._resolution_of.pop(pk, None)

    def _superseded(self, ev: dict, pk: tuple, told: int, later: Iterator[dict], before: int) -> bool:
        """Whether the events after `ev` (`later`: its partition's, in event-time order; `told`:
        the largest LEO told at it, `before` before it) restore its effect, and nothing in
        between reads its state (a `metadata` event, an error, a fetch of a replica outside the
        ISR):

        - a CAUGHT or CREDITED fetch of an ISR replica, when its next fetch (same epochs and log
          start) is CAUGHT, or is CREDITED and the one after is CAUGHT or CREDITED too, and the
          LEO it told is told again by the first fetch after it or an event before that (or was
          told before it). Then every fetch up to there is judged against the same LEO, and the
          follower's LEO, last fetch time, leader LEO at its last fetch and lastCaughtUpTimeMs
          are the same there whether it was seen or not (in between, lcu is older by less than
          the time from the last one sent). An append in between may tell less: under acks=all
          the request log writes a produce when its response goes out, after the followers
          fetched what it appended, so its LEO is often older than the fetches' around it.
        (Appends: `_told_again`.)"""
        isr = self._isr_then[pk] if pk in self._isr_then else self._isr.get(pk, frozenset())
        if ev["replica"] not in isr:
            return False
        replica, marks, fresh_ms = ev["replica"], _marks(ev), self._fresh_ms(pk)
        since, previous, first = told, (told, ev["ts"]), False
        restored = before >= told  # without it, the LEO the engine knows is `told` again
        for e in later:
            kind = e["type"]
            if kind == "metadata" or (kind == "fetch" and _reads_state(e, isr)):
                return False
            leo = since = max(since, e["leader_leo"])
            restored = restored or e["leader_leo"] >= told
            if kind != "fetch":
                continue
            if not restored:  # this fetch would be judged against a lower LEO
                return False
            if e["replica"] == replica:
                if _marks(e) != marks:
                    return False
                status = judge(e, leo, previous, fresh_ms)
                if first:  # the second after it
                    return status != BEHIND
                if status == CAUGHT:
                    return True
                if status == BEHIND:
                    return False
                first, previous = True, (leo, e["ts"])
        return False

    def _told_again(self, ev: dict, pk: tuple, later: Iterator[dict], before: int) -> bool:
        """An append whose LEO the engine learns anyway before anything reads it: it was known
        before it (`before`: the largest LEO told before it; under acks=all an append is logged
        after the followers fetched it), or the first fetch after it, or an event before that,
        tells it, with no `metadata` event or fetch that reads the partition's state in
        between. Then every fetch is judged against the same LEO whether it was seen or not,
        and a busy partition's LEO reaches the monitor with its followers' fetches, at most a
        resolution apart (its HW and HighWatermarkStalled's times are approximate already)."""
        leo = ev["leader_leo"]
        if before >= leo:
            return True
        isr = self._isr_then[pk] if pk in self._isr_then else self._isr.get(pk, frozenset())
        for e in later:
            kind = e["type"]
            if kind == "metadata" or (kind == "fetch" and _reads_state(e, isr)):
                return False
            if e["leader_leo"] >= leo:
                return True
            if kind == "fetch":
                return False
        return False

    def _recent(self, key: int, pk: tuple, ev: dict, marks: tuple) -> bool:
        """A fetch of its replica went out less than the partition's resolution ago, and the
        replica is in the reported ISR (a follower rejoining is judged on every fetch)."""
        if key not in self._isr.get(pk, ()):
            return False
        sent = self._sent.get(pk, {}).get(key)
        return sent is not None and sent[1] == marks and ev["ts"] - sent[0] < self._resolution(pk)

    def _resolution(self, pk: tuple) -> int:
        found = self._resolution_of.get(pk)
        if found is None:
            found = self._resolution_of[pk] = resolution_ms(
                self._lag.get(pk, self.default_lag_ms), self.requested_ms
            )
        return found

    def _fresh_ms(self, pk: tuple) -> int:
        """The resolution as it was when the release began (how a fetch's credit is judged)."""
        if pk not in self._lag_then:
            return self._resolution(pk)
        lag = self._lag_then[pk]
        return resolution_ms(self.default_lag_ms if lag is None else lag, self.requested_ms)


def _reads_state(fetch: dict, isr: frozenset) -> bool:
    """A fetch that errs or diverges, or of a replica outside the ISR (it may join)."""
    return "error" in fetch or "diverging_epoch" in fetch or fetch["replica"] not in isr


class _Batch:
    """The released events of one release, laid out to read ahead in one partition."""

    def __init__(self, released: list[dict], held: Any) -> None:
        self.events, self.held, self.first_held_broker = released, held, held.first_broker()
        self.partition: list[tuple | None] = []  # of each event
        self.at: list[int] = []  # each event's place among its partition's
        self.mine: dict[tuple, list[int]] = {}  # partition -> the indices of its events
        self.broker_at: list[int] = []  # the indices of the broker events
        for i, ev in enumerate(released):
            if "partition" in ev:
                pk = (ev["cluster"], ev["topic"], ev["partition"])
                indices = self.mine.setdefault(pk, [])
                self.partition.append(pk)
                self.at.append(len(indices))
                indices.append(i)
            else:
                self.partition.append(None)
                self.at.append(0)
                if ev["type"] == "broker":
                    self.broker_at.append(i)

    def later(self, i: int) -> Iterator[dict]:
        """The events of the i-th one's partition after it, released then held, up to the first
        broker event after it (a fence or shutdown changes ISR eligibility everywhere)."""
        stop = next((b for b in self.broker_at if b > i), None) if self.broker_at else None
        indices = self.mine[self.partition[i]]  # type: ignore[index]  # only asked of partitioned events
        for q in range(self.at[i] + 1, len(indices)):
            k = indices[q]
            if stop is not None and k > stop:
                return
            yield self.events[k]
        if stop is not None:
            return
        held_broker = self.first_held_broker
        for entry in self.held.held_of(self.partition[i]):
            if held_broker is not None and entry[:2] > held_broker:
                return
            yield entry[2]


def published(
    events: list[dict],
    compactor: Compactor | None,
    hold_ms: int,
    step_ms: int,
    session_form: SessionForm | None = None,
) -> list[dict]:
    """What the collector's loop (collector.py, step) sends of `events` read at their own time:
    each step adds what was read, releases what the hold lets go and compacts it knowing what is
    still held, then, with `session_form` (--session-form), turns that into session form. For
    measuring and testing compaction without request logs."""
    from replmon.state.events import TIE_RANK
    from replmon.streaming.collect.reorder import ReorderBuffer

    evs = sorted(events, key=lambda e: (e["ts"], TIE_RANK[e["type"]]))
    buffer, i = ReorderBuffer(hold_ms, 10**8, indexed=compactor is not None), 0
    out: list[dict] = []
    now = evs[0]["ts"] if evs else 0
    while i < len(evs) or len(buffer):
        now += step_ms
        while i < len(evs) and evs[i]["ts"] <= now:
            buffer.add(evs[i])
            i += 1
        released = buffer.release(now)
        sent = compactor.release(released, buffer) if compactor else released
        out += session_form.release(sent, buffer.watermark_ms) if session_form else sent
    return out + session_form.finish() if session_form else out
