"""Events leave the collector in event-time order.

A request is logged when its response has been sent, so lines are in completion order: a
fetch parked 500 ms is logged after appends that arrived later. Events wait here until the
release watermark (the collector's clock minus `hold_ms`) passes their time. The held events
are also indexed by partition (and the broker events apart), in event-time order, for
compaction (compact.py) to read ahead of a released event in its own partition only.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from typing import Any


class ReorderBuffer:
    def __init__(self, hold_ms: int, max_events: int, indexed: bool = False) -> None:
        """`indexed`: keep the index by partition (held_of, first_broker) that compaction reads."""
        self.hold_ms, self.max_events, self.indexed = hold_ms, max_events, indexed
        self._heap: list = []
        self._seq = itertools.count()
        self.watermark_ms = 0  # every event released so far has ts <= this (or came late)
        self._partitions: dict[tuple, list] = {}  # (cluster, topic, partition) -> its held entries
        self._brokers: list = []  # the held broker events' entries

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, event: dict[str, Any]) -> None:
        if len(self._heap) >= self.max_events:
            raise OverflowError(
                f"{len(self._heap)} events wait for release (the bound is "
                f"{self.max_events}); the metrics topic is not taking them"
            )
        entry = (event["ts"], next(self._seq), event)
        heapq.heappush(self._heap, entry)
        if self.indexed:  # entries are unique by (ts, seq): sorting never compares the events
            if "partition" in event:
                bisect.insort(self._partitions.setdefault(_partition(event), []), entry)
            elif event["type"] == "broker":
                bisect.insort(self._brokers, entry)

    def release(self, now_ms: int) -> list[dict]:
        """Events with ts <= now_ms - hold_ms, oldest first; moves the watermark (never back)."""
        self.watermark_ms = max(self.watermark_ms, now_ms - self.hold_ms)
        out = []
        while self._heap and self._heap[0][0] <= self.watermark_ms:
            event = heapq.heappop(self._heap)[2]
            if self.indexed:  # the oldest held entry is the oldest of its partition too
                if "partition" in event:
                    pk = _partition(event)
                    mine = self._partitions[pk]
                    del mine[0]
                    if not mine:
                        del self._partitions[pk]
                elif event["type"] == "broker":
                    del self._brokers[0]
            out.append(event)
        return out

    def held(self) -> list[dict]:
        return [e for _, _, e in sorted(self._heap)]

    def held_of(self, partition: tuple) -> list:
        """The partition's held entries (ts, seq, event), in event-time order."""
        if not self.indexed:
            raise ValueError("this ReorderBuffer keeps no index by partition (indexed=False)")
        return self._partitions.get(partition, [])

    def first_broker(self) -> tuple | None:
        """(ts, seq) of the first held broker event, if any."""
        return self._brokers[0][:2] if self._brokers else None


def _partition(ev: dict) -> tuple:
    return ev["cluster"], ev["topic"], ev["partition"]
