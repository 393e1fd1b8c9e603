"""The cluster step's timeline (state/cluster.py): what happens in one run, in event-time order.

Each run of the step applies everything that happens in (the last horizon, the new horizon]:
broker silences and returns, controller states, root releases, alert releases and counts
updates. They are typed entries on one heap; on one event time they apply in the order of
`RANK` (a broker heard before one found silent, a controller state before the release of a
root, a root before the alerts it may claim, counts last), then by broker, then (releases) a
firing before its resolve and by alert id, then in the order they were scheduled.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from replmon.state.alert_rules import REPLICA_ALERTS
from replmon.state.alerts import AlertRecord
from replmon.state.root_cause import FETCHER_STALLED


@dataclass(frozen=True, slots=True)
class Heard:
    broker: int  # heard of again after a silence


@dataclass(frozen=True, slots=True)
class Silent:
    broker: int  # no activity anywhere for longer than the silence limit
    last_ms: int  # its last activity


@dataclass(frozen=True, slots=True)
class StateSeen:
    broker: int
    state: str  # the controller's word: running, fenced or shutting_down


@dataclass(frozen=True, slots=True)
class ReleaseRoot:
    broker: int  # the group_wait of its open episode is over


@dataclass(frozen=True, slots=True)
class Release:
    rec: AlertRecord  # a held alert's release is due


@dataclass(frozen=True, slots=True)
class CountsDue:
    broker: int  # an update of its open episode's counts is due


Entry = Heard | Silent | StateSeen | ReleaseRoot | Release | CountsDue
RANK: dict[type[Entry], int] = {Heard: 0, Silent: 1, StateSeen: 2, ReleaseRoot: 3, Release: 4, CountsDue: 5}
NO_ORDER = (False, False, "")
HeapItem = tuple[int, int, int, tuple[bool, bool, str], int, Entry]


def release_order(rec: AlertRecord) -> tuple[bool, bool, str]:
    """Ties on one event time: replica and fetcher alerts first, a firing before its resolve,
    then by id (deterministic)."""
    return (
        rec["name"] not in REPLICA_ALERTS and rec["name"] != FETCHER_STALLED,
        rec["status"] != "firing",
        rec["alert_id"],
    )


@dataclass(slots=True)
class Run:
    """One run of the step over one cluster's timeline: its bounds and what it collects."""

    cluster: str
    start: int  # decided up to here before this run
    horizon: int  # decided up to here after it
    flush: bool  # the input has ended: everything is due now
    out: list[AlertRecord]  # the records released, in order
    held_firing: set[str]  # firing alerts held when the run began and not yet released
    waiting: list[AlertRecord] = field(default_factory=list)  # held alerts not due in this run
    scheduled: set[int] = field(default_factory=set)  # brokers with a counts update on the heap
    heap: list[HeapItem] = field(default_factory=list)
    seq: itertools.count[int] = field(default_factory=itertools.count)

    def due(self, ts: int) -> bool:
        return self.flush or ts <= self.horizon

    def push(self, ts: int, entry: Entry) -> None:
        ts = max(ts, self.start + 1)  # news of a time already decided is taken now
        broker = -1 if isinstance(entry, Release) else entry.broker
        order = release_order(entry.rec) if isinstance(entry, Release) else NO_ORDER
        heapq.heappush(self.heap, (ts, RANK[type(entry)], broker, order, next(self.seq), entry))

    def pop(self) -> tuple[int, Entry]:
        ts, *_, entry = heapq.heappop(self.heap)
        return ts, entry
