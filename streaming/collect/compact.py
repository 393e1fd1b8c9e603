"""Lossless compaction: drop the events that only repeat "still caught up".

A follower that keeps up tells its leader so on every fetch (about 11 fetch events per
follower-second under a modest acks=all load, docs/real-cluster.md), and the leader appends as
often; yet Kafka decides ISR membership only every L/2 (its isr-expiration task). So, per
follower and per partition, during a run of caught-up fetches (or of appends) at most one event
per `resolution` goes out, and everything a verdict depends on still does:

- a caught-up fetch is dropped only when a later caught-up fetch of the same replica, with the
  same leader epoch, broker epoch and log start offset, is already held (it supersedes the
  dropped one: LEO, lastCaughtUpTimeMs, last fetch time and leader LEO all move to its values),
  the replica is in the ISR the cluster last reported, and one was sent less than `resolution`
  ago. So the first caught-up fetch after a behind one, and the last one before a follower goes
  silent, falls behind, errs or changes epoch, always go out: lcu stays exact where it decides
  anything (ISR shrink at lcu + L + 1, IsrExitImminent, ReplicaOutOfSync, their causes);
- an append is dropped only when a later append of the same partition is held and one was sent
  less than `resolution` ago (the LEO only grows);
- nothing is dropped across an event that changes what the next fetch is judged against: a
  `metadata` or `broker` event, a fetch that is behind, errs or diverges, or a caught-up fetch
  below the LEO a dropped event told (it would have been judged behind).

The decision is made at release time (streaming/collect/reorder.py), inside the hold that
already orders the events, so it adds no latency. Between sent events the monitor's view of a
partition's LEOs and HW is up to one `resolution` old: docs/real-cluster.md lists the fields
that are approximate. Pure: time is in the events, nothing reads a clock.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

RESOLUTION_CAP_MS = 1000  # well inside alerts.stuck_after_ms (3 s): a partition never looks silent
INF = float("inf")


def resolution_ms(replica_lag_time_max_ms: int, requested_ms: int | None = None) -> int:
    """The compaction interval for a partition with this L: the requested one, else L/8 capped
    at RESOLUTION_CAP_MS; never more than L/4 (isr-expiration runs every L/2)."""
    wanted = requested_ms if requested_ms else min(replica_lag_time_max_ms // 8, RESOLUTION_CAP_MS)
    return max(1, min(wanted, replica_lag_time_max_ms // 4))


def is_caught_up_fetch(ev: dict[str, Any]) -> bool:
    """A fetch at the leader LEO at its read (docs/events.md: then leader_leo is the fetch offset)."""
    return (
        ev["type"] == "fetch"
        and "error" not in ev
        and "diverging_epoch" not in ev
        and ev["fetch_offset"] >= ev["leader_leo"]
    )


def _partition(ev: dict) -> tuple:
    return ev["cluster"], ev["topic"], ev["partition"]


def _marks(ev: dict) -> tuple:
    """What a later caught-up fetch must repeat to supersede this one."""
    return ev.get("leader_epoch"), ev.get("broker_epoch"), ev.get("log_start_offset")


def superseded(seq: list[dict], upto: int) -> set[int]:
    """Indices i < upto of the caught-up fetches and appends in `seq` (event-time order) that a
    later event of the same replica (or partition, for appends) supersedes, nothing in between
    changing what the dropped one would have told."""
    out: set[int] = set()
    # partition -> replica -> (marks, lowest caught-up offset of the partition's other replicas since)
    fetches: dict[tuple, dict[int, list]] = {}
    # partition -> [the next append's LEO, the lowest caught-up offset of the partition since]
    appends: dict[tuple, list] = {}
    for i in range(len(seq) - 1, -1, -1):
        ev = seq[i]
        kind = ev["type"]
        if kind == "heartbeat":
            continue
        if kind == "broker":  # fences and shutdowns change ISR eligibility everywhere
            fetches.clear()
            appends.clear()
            continue
        pk = _partition(ev)
        if kind == "append":
            later = appends.get(pk)
            if i < upto and later is not None and min(later) >= ev["leader_leo"]:
                out.add(i)
            appends[pk] = [ev["leader_leo"], INF]
        elif kind == "fetch" and is_caught_up_fetch(ev):
            offset, replica = ev["fetch_offset"], ev["replica"]
            nxt = fetches.setdefault(pk, {})
            for r, later in nxt.items():
                if r != replica and offset < later[1]:
                    later[1] = offset
            if pk in appends and offset < appends[pk][1]:
                appends[pk][1] = offset
            later = nxt.get(replica)
            if i < upto and later is not None and later[0] == _marks(ev) and later[1] >= ev["leader_leo"]:
                out.add(i)
            nxt[replica] = [_marks(ev), INF]
        else:  # metadata, or a fetch that is behind, errs or diverges
            fetches.pop(pk, None)
            appends.pop(pk, None)
    return out


class Compactor:
    """Decides, event by event at release, what is sent (`release`). `default_lag_ms` is L for
    a partition whose metadata has not said it; `requested_ms` overrides the resolution."""

    def __init__(self, default_lag_ms: int = 30_000, requested_ms: int | None = None) -> None:
        self.default_lag_ms, self.requested_ms = default_lag_ms, requested_ms
        self._lag: dict[tuple, int] = {}  # partition -> replica.lag.time.max.ms its metadata said
        self._isr: dict[tuple, frozenset] = {}  # partition -> the ISR its metadata said
        # partition -> replica (None: its appends) -> (ts, marks) of the last one sent in the run
        self._sent: dict[tuple, dict[int | None, tuple[int, tuple]]] = {}
        self.dropped: Counter = Counter()

    def release(self, released: list[dict], held: list[dict]) -> list[dict]:
        """The events of `released` (event-time order) to send, knowing the `held` ones that
        follow (event-time order)."""
        droppable = superseded(released + held, len(released))
        out = []
        for i, ev in enumerate(released):
            kind = ev["type"]
            if kind == "heartbeat":
                out.append(ev)
                continue
            if kind == "broker":
                self._sent.clear()
                out.append(ev)
                continue
            pk = _partition(ev)
            if kind == "metadata":
                if ev.get("replica_lag_time_max_ms"):
                    self._lag[pk] = ev["replica_lag_time_max_ms"]
                self._isr[pk] = frozenset(ev.get("isr") or ())
            if kind == "append":
                key = None
            elif kind == "fetch" and is_caught_up_fetch(ev):
                key = ev["replica"]
            else:
                self._sent.pop(pk, None)
                out.append(ev)
                continue
            marks = _marks(ev) if kind == "fetch" else ()
            if i in droppable and self._recent(key, pk, ev, marks):
                self.dropped[kind] += 1
                continue
            self._sent.setdefault(pk, {})[key] = (ev["ts"], marks)
            out.append(ev)
        return out

    def _recent(self, key: int | None, pk: tuple, ev: dict, marks: tuple) -> bool:
        """One like it went out less than the partition's resolution ago (and, for a fetch, the
        replica is in the reported ISR: a follower rejoining is judged on every fetch)."""
        if ev["type"] == "fetch" and ev["replica"] not in self._isr.get(pk, ()):
            return False
        sent = self._sent.get(pk, {}).get(key)
        window = resolution_ms(self._lag.get(pk, self.default_lag_ms), self.requested_ms)
        return sent is not None and sent[1] == marks and ev["ts"] - sent[0] < window
