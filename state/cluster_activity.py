"""The cluster step's view of broker activity (state/cluster.py): merged activity runs per
broker over every bucket, and which brokers hold replicas at all.

Each bucket reports, per broker, maximal runs of activity in which no two consecutive moments
are more than the silence limit apart. Merged over all buckets with the same rule they give
exactly the cluster-wide gaps, whatever the number of buckets: a gap longer than the limit is
a silence of the broker.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

NEVER = 1 << 62


@dataclass(slots=True)
class Activity:
    """What the buckets reported of each broker's activity in one cluster."""

    newest_activity_ms: int = -NEVER
    segments: dict[int, list[list[int]]] = field(default_factory=dict)  # broker -> merged [start, end] runs
    replicas: dict[int, dict[int, tuple[int, int]]] = field(
        default_factory=dict
    )  # broker -> {bucket: (partitions it leads, partitions it holds a replica of)}

    def add_report(self, report: dict[str, Any], limit: int) -> None:
        """Fold one bucket's activity report (state/bucket.py activity_reports)."""
        bucket = report["bucket"]
        for key, info in report["brokers"].items():
            broker = int(key)
            segs = self.segments.setdefault(broker, [])
            for start, end in info.get("segments", ()):
                insert_run(segs, start, end, limit)
                if end > self.newest_activity_ms:
                    self.newest_activity_ms = end
            if "led" in info:
                self.replicas.setdefault(broker, {})[bucket] = (info["led"], info["replicas"])

    def has_replicas(self, broker: int) -> bool:
        """A broker that holds no replica (as the buckets last reported) is expected to be quiet."""
        per_bucket = self.replicas.get(broker)
        return per_bucket is None or any(r for _, r in per_bucket.values())

    def changes(self, start: int, horizon: int, limit: int) -> Iterator[tuple[int, int, int | None]]:
        """The silences and returns in (start, horizon], as (time, broker, last activity) for a
        broker gone silent and (time, broker, None) for one heard again, broker by broker."""
        for broker, segs in self.segments.items():
            if not self.has_replicas(broker):
                continue
            for i, (_, end) in enumerate(segs):
                quiet_from = end + limit + 1
                nxt = segs[i + 1][0] if i + 1 < len(segs) else None
                if nxt is not None and nxt - end <= limit:
                    continue
                if start < quiet_from <= horizon:
                    yield quiet_from, broker, end
                if nxt is not None and start < nxt <= horizon and nxt >= quiet_from:
                    yield nxt, broker, None

    def forget(self, horizon_ms: int, limit: int) -> None:
        """Drop the runs no decision after `horizon_ms` can need."""
        cut = horizon_ms - 2 * limit
        for segs in self.segments.values():
            while len(segs) > 1 and segs[1][1] < cut:
                segs.pop(0)

    def to_doc(self) -> dict[str, Any]:
        return {
            "newest_activity_ms": self.newest_activity_ms,
            "segments": [[b, [list(run) for run in s]] for b, s in self.segments.items()],
            "replicas": [[b, [[k, list(v)] for k, v in per.items()]] for b, per in self.replicas.items()],
        }

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> Activity:
        return cls(
            newest_activity_ms=d["newest_activity_ms"],
            segments={int(b): [list(x) for x in s] for b, s in d["segments"]},
            replicas={int(b): {int(k): (v[0], v[1]) for k, v in per} for b, per in d["replicas"]},
        )


def insert_run(segs: list[list[int]], start: int, end: int, limit: int) -> None:
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
