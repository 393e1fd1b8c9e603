"""Request-log observations -> replmon's `fetch` and `append` events (docs/events.md).

The request log does not carry the leader LEO just before a fetch's read (Kafka's
initialLogEndOffset), which the observation rule compares the fetch offset with. What it
does carry settles the comparison itself:

- caught up at the read (fetch offset == leader LEO): the fetch waited in purgatory (a
  follower fetch is parked only when the first read found no bytes in any partition,
  replica.fetch.min.bytes = 1), or the partition came back with no records and the response
  was not cut short by the request's maxBytes. Then `leader_leo` = the fetch offset, exactly.
- behind at the read: records came back at once. Then the leader LEO is above the fetch
  offset, and `leader_leo` is a lower bound: the largest of fetch offset + 1, the response's
  high watermark, and what this leader's PRODUCE lines (baseOffset + 1) and other followers'
  caught-up fetches proved before the read.

One definition each: `is_caught_up_at_read` and `leader_leo_lower_bound`.
"""

from __future__ import annotations

import bisect
from collections import defaultdict

from replmon.state.events import event
from replmon.streaming.collect.requestlog import Request
from replmon.streaming.collect.sessions import PartitionFetch

PARKED_MS = 1.0  # remoteTimeMs at or above this: the fetch waited in purgatory
ERROR_NAMES = {  # Kafka's Errors enum, the codes a follower fetch or a produce can get
    1: "OFFSET_OUT_OF_RANGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT",
    19: "NOT_ENOUGH_REPLICAS",
    20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    56: "KAFKA_STORAGE_ERROR",
    74: "FENCED_LEADER_EPOCH",
    75: "UNKNOWN_LEADER_EPOCH",
    100: "UNKNOWN_TOPIC_ID",
    107: "INELIGIBLE_REPLICA",
}


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"ERROR_CODE_{code}")


def response_cut_short(req: Request, fetches: list[PartitionFetch]) -> bool:
    """Did the response reach the request's maxBytes? Then partitions after the cut came back
    empty without having been read up to the leader LEO (ReplicaManager.readFromLog)."""
    max_bytes = int((req.body.get("request") or {}).get("maxBytes", 0) or 0)
    if max_bytes <= 0:
        return False
    largest = max((f.partition_max_bytes for f in fetches), default=0)
    return sum(f.records_bytes for f in fetches) >= max_bytes - largest


def is_caught_up_at_read(req: Request, f: PartitionFetch, cut_short: bool) -> bool | None:
    """True: the fetch offset equalled the leader LEO when the leader read it; False: the
    leader had more; None: this line cannot tell (an empty partition after a cut)."""
    if req.parked_ms >= PARKED_MS:
        return True
    if f.records_bytes > 0:
        return False
    return None if cut_short else True


class LeoBounds:
    """What this leader's log proved about each partition's LEO, by time: (t, leo) pairs."""

    KEEP = 256

    def __init__(self) -> None:
        self._times: dict = defaultdict(list)
        self._leos: dict = defaultdict(list)

    def prove(self, tp, t_ms: int, leo: int) -> None:
        times, leos = self._times[tp], self._leos[tp]
        i = bisect.bisect_right(times, t_ms)
        times.insert(i, t_ms)
        leos.insert(i, leo)
        if len(times) > self.KEEP:
            del times[0], leos[0]

    def at(self, tp, t_ms: int) -> int:
        """The largest LEO proved at or before t_ms (0 when none)."""
        times = self._times.get(tp)
        if not times:
            return 0
        i = bisect.bisect_right(times, t_ms)
        return max(self._leos[tp][:i], default=0)

    def snapshot(self) -> list:
        """For the collector's checkpoint (plain JSON): [topic, partition, times, leos] rows."""
        return [[tp[0], tp[1], list(times), list(self._leos[tp])] for tp, times in self._times.items()]

    def restore(self, rows: list) -> None:
        self._times.clear()
        self._leos.clear()
        for topic, partition, times, leos in rows:
            self._times[(topic, partition)] = list(times)
            self._leos[(topic, partition)] = list(leos)


def leader_leo_lower_bound(f: PartitionFetch, proved: int) -> int:
    """A leader LEO for a fetch that found the follower behind: strictly above its offset."""
    return max(f.fetch_offset + 1, f.high_watermark or 0, proved)


def fetch_event(
    cluster: str, topic: str, req: Request, follower: int, f: PartitionFetch, caught_up: bool, proved: int
) -> dict:
    if f.error_code or f.diverging_epoch is not None:
        # Not an observation (docs/kafka-rules.md §11): the read failed, so it proves nothing about the LEO.
        leader_leo = max(f.fetch_offset, proved)
    else:
        leader_leo = f.fetch_offset if caught_up else leader_leo_lower_bound(f, proved)
    epoch = ((req.body.get("request") or {}).get("replicaState") or {}).get("replicaEpoch")
    return event(
        "fetch",
        req.read_ms,
        cluster,
        topic=topic,
        partition=f.partition,
        replica=follower,
        fetch_offset=f.fetch_offset,
        leader_leo=leader_leo,
        leader_epoch=_known(f.current_leader_epoch),
        broker_epoch=_known(epoch if isinstance(epoch, int) else None),
        log_start_offset=_known(f.log_start_offset),
        leader_hw=_known(f.high_watermark),
        error=error_name(f.error_code) if f.error_code else None,
        diverging_epoch=f.diverging_epoch,
    )


def _known(value: int | None) -> int | None:
    """A value the request log gives, None where it says -1 (unknown) or nothing."""
    return value if value is not None and value >= 0 else None


def produced(req: Request) -> list[tuple[str | None, str | None, int, int]]:
    """(topic id, topic name, partition, baseOffset) of every partition a PRODUCE appended."""
    out = []
    for t in (req.body.get("response") or {}).get("responses") or []:
        tid, name = t.get("topicId"), t.get("name", t.get("topic"))
        for p in t.get("partitionResponses") or t.get("partitions") or []:
            base = p.get("baseOffset", -1)
            if int(p.get("errorCode", 0)) == 0 and isinstance(base, int) and base >= 0:
                out.append((tid, name, int(p.get("index", p.get("partition", -1))), base))
    return out


def append_event(cluster: str, topic: str, partition: int, req: Request, base_offset: int) -> dict:
    """The leader appended at base_offset: its LEO is at least base_offset + 1 after it."""
    return event(
        "append", req.local_done_ms, cluster, topic=topic, partition=partition, leader_leo=base_offset + 1
    )
