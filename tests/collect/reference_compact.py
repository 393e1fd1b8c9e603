"""The compaction rule as first written (streaming/collect/compact.py before its index of held
events): at every release it judges all released and held events forward and finds the
superseded ones backward, re-reading the whole hold. Kept as the reference the indexed
Compactor must agree with exactly (tests/collect/test_compact.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from replmon.streaming.collect.compact import resolution_ms


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
    """What the fetches after this one must repeat to supersede it."""
    return ev.get("leader_epoch"), ev.get("broker_epoch"), ev.get("log_start_offset")


CAUGHT, CREDITED, BEHIND = "caught", "credited", "behind"


def judged(
    seq: list[dict], told: dict[tuple, int], lflo: dict[tuple, tuple[int, int]], fresh_ms
) -> tuple[list[str | None], list[int]]:
    """For each event of `seq` (event-time order), as the engine would judge it
    (docs/kafka-rules.md §1.2): a fetch is CAUGHT (at its read, at or above the largest leader
    LEO any event of its partition told so far, whatever its own `leader_leo` says), CREDITED
    (behind, but at or above the LEO known at the replica's previous fetch: lcu moves to that
    fetch's time, if that was at most `fresh_ms(partition)` before: a credit to an old fetch
    leaves lcu old) or BEHIND; None for anything else. And the largest LEO told after it.
    `told` (partition -> LEO) and `lflo` (partition + replica -> (LEO, time) at its last fetch)
    say what came before; not changed."""
    since: dict[tuple, int] = {}
    last: dict[tuple, tuple[int, int]] = {}
    status: list[str | None] = []
    told_at: list[int] = []
    for ev in seq:
        kind = ev["type"]
        if kind not in ("fetch", "append"):
            status.append(None)
            told_at.append(0)
            continue
        pk = _partition(ev)
        leo = max(since.get(pk, told.get(pk, 0)), ev["leader_leo"])
        since[pk] = leo
        told_at.append(leo)
        if not is_accepted_fetch(ev):
            status.append(None)
            continue
        rk = (*pk, ev["replica"])
        offset = ev["fetch_offset"]
        if is_caught_up_fetch(ev) and offset >= leo:
            status.append(CAUGHT)
        else:
            prev_leo, prev_ms = last.get(rk) or lflo.get(rk) or (1 << 62, 0)
            fresh = offset >= prev_leo and ev["ts"] - prev_ms <= fresh_ms(pk)
            status.append(CREDITED if fresh else BEHIND)
        last[rk] = (leo, ev["ts"])
    return status, told_at


def is_accepted_fetch(ev: dict) -> bool:
    return ev["type"] == "fetch" and "error" not in ev and "diverging_epoch" not in ev


def superseded(
    seq: list[dict],
    upto: int,
    status: list[str | None],
    told_at: list[int],
    isr: dict[tuple, frozenset],
    told: dict[tuple, int] | None = None,
) -> set[int]:
    """Indices i < upto of the fetches and appends in `seq` (event-time order) whose effect the
    events after them restore (`status`, `told_at`: judged):

    - a CAUGHT or CREDITED fetch of an ISR replica, when its next fetch (same epochs and log
      start) is CAUGHT, or is CREDITED and the one after is CAUGHT or CREDITED too, the LEO known
      at the dropped one known before it (`told`: partition -> LEO before `seq`) or told again
      by the first fetch after it or an event before that, and nothing in between reads the
      dropped state (a `metadata` or `broker` event, an error, a fetch of
      a replica outside the ISR). Then the follower's LEO, last fetch time, leader LEO at its
      last fetch and lastCaughtUpTimeMs are the same there whether the dropped one was seen or
      not (in between, lcu is older by less than the time from the last one sent);
    - an append whose LEO was known before it, or is told again by the first fetch after it or
      an event before that, with nothing in between that reads the state (dropped whatever
      went out before it)."""
    out: set[int] = set()
    before: list[int] = []  # the LEO known before each event
    known = dict(told or {})
    for i, ev in enumerate(seq):
        pk = _partition(ev) if "partition" in ev else None
        before.append(known.get(pk, 0) if pk else 0)
        if ev["type"] in ("fetch", "append"):
            known[pk] = told_at[i]
    # partition -> the largest LEO told from the next event up to the first fetch after it
    # (or to the end, when no fetch follows)
    ahead: dict[tuple, int] = {}
    # partition -> replica -> its next fetches (nearest first): [marks, status]
    nxt: dict[tuple, dict[int, list]] = {}
    for i in range(len(seq) - 1, -1, -1):
        ev = seq[i]
        kind = ev["type"]
        if kind == "heartbeat":
            continue
        if kind == "broker":  # fences and shutdowns change ISR eligibility everywhere
            nxt.clear()
            ahead.clear()
            continue
        pk = _partition(ev)
        if (
            kind == "metadata"
            or (status[i] is None and kind == "fetch")
            or (kind == "fetch" and ev["replica"] not in isr.get(pk, ()))
        ):
            nxt.pop(pk, None)
            ahead.pop(pk, None)
            continue
        leo = ev["leader_leo"]
        restored = before[i] >= told_at[i] or ahead.get(pk, -1) >= told_at[i]
        if kind == "append" and i < upto and (before[i] >= leo or ahead.get(pk, -1) >= leo):
            out.add(i)
        ahead[pk] = leo if kind == "fetch" else max(ahead.get(pk, -1), leo)
        chains = nxt.setdefault(pk, {})
        if kind != "fetch":
            continue
        marks, chain = _marks(ev), chains.get(ev["replica"], [])
        if (
            i < upto
            and status[i] in (CAUGHT, CREDITED)
            and chain
            and chain[0][0] == marks
            and restored
            and (
                chain[0][1] == CAUGHT
                or (
                    chain[0][1] == CREDITED
                    and len(chain) == 2
                    and chain[1][0] == marks
                    and chain[1][1] in (CAUGHT, CREDITED)
                )
            )
        ):
            out.add(i)
        chains[ev["replica"]] = [[marks, status[i]], *chain[:1]]
    return out


class ReferenceCompactor:
    """streaming/collect/compact.py's Compactor as first written: `judged` forward and
    `superseded` backward over all the released and held events at every release."""

    def __init__(self, default_lag_ms: int = 30_000, requested_ms: int | None = None) -> None:
        self.default_lag_ms, self.requested_ms = default_lag_ms, requested_ms
        self._lag: dict[tuple, int] = {}  # partition -> replica.lag.time.max.ms its metadata said
        self._isr: dict[tuple, frozenset] = {}  # partition -> the ISR its metadata said
        # partition -> replica (None: its appends) -> (ts, marks) of the last one sent in the run
        self._sent: dict[tuple, dict[int | None, tuple[int, tuple]]] = {}
        self._told: dict[tuple, int] = {}  # partition -> the largest leader LEO events told
        self._lflo: dict[
            tuple, tuple[int, int]
        ] = {}  # partition + replica -> (that LEO, time) at its last fetch
        self.dropped: Counter = Counter()

    def release(self, released: list[dict], held) -> list[dict]:
        """The events of `released` (event-time order) to send, knowing the `held` ones that
        follow (event-time order; or the ReorderBuffer holding them)."""
        seq = released + (held if isinstance(held, list) else held.held())
        status, told_at = judged(seq, self._told, self._lflo, self._resolution)
        droppable = superseded(seq, len(released), status, told_at, self._isr, self._told)
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
            if kind in ("fetch", "append"):
                self._told[pk] = told_at[i]
            if kind == "append":
                key = None
            elif status[i] is not None:
                key = ev["replica"]
                self._lflo[(*pk, key)] = (told_at[i], ev["ts"])
            else:
                self._sent.pop(pk, None)
                out.append(ev)
                continue
            marks = (*_marks(ev), status[i] == BEHIND) if kind == "fetch" else ()  # in sync or not
            if i in droppable and (kind == "append" or self._recent(key, pk, ev, marks)):
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
        window = self._resolution(pk)
        return sent is not None and sent[1] == marks and ev["ts"] - sent[0] < window

    def _resolution(self, pk: tuple) -> int:
        return resolution_ms(self._lag.get(pk, self.default_lag_ms), self.requested_ms)
