"""Events leave the collector in event-time order.

A request is logged when its response has been sent, so lines are in completion order: a
fetch parked 500 ms is logged after appends that arrived later. Events wait here until the
release watermark (the collector's clock minus `hold_ms`) passes their time.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any


class ReorderBuffer:
    def __init__(self, hold_ms: int, max_events: int) -> None:
        self.hold_ms, self.max_events = hold_ms, max_events
        self._heap: list = []
        self._seq = itertools.count()
        self.watermark_ms = 0  # every event released so far has ts <= this (or came late)

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, event: dict[str, Any]) -> None:
        if len(self._heap) >= self.max_events:
            raise OverflowError(
                f"{len(self._heap)} events wait for release (the bound is "
                f"{self.max_events}); the metrics topic is not taking them"
            )
        heapq.heappush(self._heap, (event["ts"], next(self._seq), event))

    def release(self, now_ms: int) -> list[dict]:
        """Events with ts <= now_ms - hold_ms, oldest first; moves the watermark (never back)."""
        self.watermark_ms = max(self.watermark_ms, now_ms - self.hold_ms)
        out = []
        while self._heap and self._heap[0][0] <= self.watermark_ms:
            out.append(heapq.heappop(self._heap)[2])
        return out

    def held(self) -> list[dict]:
        return [e for _, _, e in sorted(self._heap)]
