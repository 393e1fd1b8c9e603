"""The bridge from foreachBatch to the outputs: JSON-lines files and the Redis sink.

foreachBatch is at-least-once: a replayed batch rewrites the same file names (atomically) and
the Redis sink skips what it already wrote, so a replay duplicates nothing.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from replmon.sinks.silences import apply_silences
from replmon.streaming.cluster_state import ClusterStepRunner
from replmon.streaming.settings import monitor_config
from replmon.streaming.stateful import collector_paused

log = logging.getLogger(__name__)
KINDS = ("alerts", "partition_status", "replica_status", "series_point", "quarantine")
# what the stateful step says of each broker's activity: for the cluster step only, not an output
ACTIVITY = "activity"


def split_batch(rows) -> dict[str, list[tuple[str, dict]]]:
    """(kind, payload) rows -> (payload, decoded record) per kind, in a deterministic order
    (event time, then the text). Each payload is decoded once, for both outputs."""
    out: dict[str, list[tuple[str, dict]]] = {k: [] for k in (*KINDS, ACTIVITY)}
    for kind, payload in rows:
        out[kind].append((payload, json.loads(payload)))
    for records in out.values():
        records.sort(key=lambda pr: (pr[1].get("ts") or 0, pr[0]))
    return out


def decide_alerts(
    records: dict[str, list[tuple[str, dict]]], cluster_step, batch_id: int, flush: bool = False
) -> dict[str, int]:
    """The buckets' alert records through the cluster step (state/cluster.py): roots, claims,
    what pages, held alerts released in event-time order. Replaces records["alerts"]. Returns
    each cluster's newest activity in the batch (event time): where the cluster's clock stands
    even when no status changed (a healthy cluster's repeats wait for stream.status_refresh_ms)."""
    activity = [r for _, r in records.pop(ACTIVITY, [])]
    statuses = ([r for _, r in records["partition_status"]], [r for _, r in records["replica_status"]])
    decided = cluster_step.run(
        batch_id, [r for _, r in records["alerts"]], activity, flush=flush, statuses=statuses
    )
    records["alerts"] = [(json.dumps(r, separators=(",", ":")), r) for r in decided]
    return newest_activity(activity)


def newest_activity(activity: list[dict]) -> dict[str, int]:
    """The newest end of any broker's activity run, per cluster, in the buckets' reports."""
    newest: dict[str, int] = {}
    for report in activity:
        cluster = report.get("cluster")
        ends = [end for info in (report.get("brokers") or {}).values() for _, end in info.get("segments", ())]
        if cluster is not None and ends:
            top = int(max(ends))
            newest[cluster] = max(top, newest.get(cluster, top))
    return newest


def write_files(output_dir: str, batch_id: int, records: dict[str, list[tuple[str, dict]]]) -> None:
    for kind, pairs in records.items():
        if not pairs:
            continue
        lines = [payload for payload, _ in pairs]
        folder = Path(output_dir) / kind
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"part-{batch_id:08d}.jsonl"
        tmp = folder / f".part-{batch_id:08d}.jsonl.tmp"
        tmp.write_text("".join(line + "\n" for line in lines))
        os.replace(tmp, final)


def silence(records: dict[str, list[tuple[str, dict]]], store, now_ms: int) -> int:
    """Replace the alerts the active silences match by marked ones (sinks/silences.py),
    encoded anew."""
    alerts: list[tuple[str, Any]] = records["alerts"]  # decoded alert records (state/alerts.py)
    if not alerts:
        return 0
    active = store.active(now_ms)
    if not active:
        return 0
    marked, held = apply_silences([r for _, r in alerts], active, now_ms)
    silenced: list[tuple[str, Any]] = [
        (p if new is old else json.dumps(new, separators=(",", ":")), new)
        for (p, old), new in zip(alerts, marked, strict=True)
    ]
    records["alerts"] = silenced
    return held


class OutputRouter:
    """Callable handed to foreachBatch: files, Redis, Alertmanager, in that order."""

    def __init__(
        self,
        output_dir: str | None = None,
        redis_sink=None,
        alertmanager=None,
        silences=None,
        clock=time.time,
        cluster_step: ClusterStepRunner | None = None,
    ) -> None:
        """`cluster_step`: the cluster-wide step with its state (streaming/cluster_state.py);
        by default one with the default settings, its state in memory."""
        self.cluster_step = cluster_step or ClusterStepRunner(monitor_config(), None)
        self.output_dir = output_dir
        self.redis_sink = redis_sink
        self.alertmanager = alertmanager
        self.silences = silences
        self.clock = clock
        self.totals: Counter = Counter()

    def __call__(self, batch_df, batch_id: int) -> None:
        # A batch decodes and encodes every output record (at a monitor's start, three status
        # records per partition); the collector's passes, triggered by those allocations, walked
        # the records, the cluster step's state and the sink's index again and again. Replaying
        # 40,000 partitions' outputs of bench/realtime.py through the cluster step and the Redis
        # sink (2 runs each): a steady batch's driver work 236-256 ms instead of 334-343, the
        # batch of the first statuses of 29,000 partitions 9.2-10.6 s instead of 11.3-14.1.
        with collector_paused():
            table = batch_df.toArrow()
            rows = zip(table.column("kind").to_pylist(), table.column("payload").to_pylist(), strict=True)
            records = split_batch(rows)
            clocks = decide_alerts(records, self.cluster_step, batch_id)
            self._output(batch_id, records, clocks)

    def flush(self) -> None:
        """The input has ended (a bounded run): release the alerts the cluster step still holds,
        as one more batch."""
        batch_id = self.cluster_step.next_batch()
        records = split_batch([])
        decide_alerts(records, self.cluster_step, batch_id, flush=True)
        if records["alerts"]:
            self._output(batch_id, records)

    def _output(
        self, batch_id: int, records: dict[str, list[tuple[str, dict]]], clocks: dict[str, int] | None = None
    ) -> None:
        if self.silences is not None:
            held = silence(records, self.silences, int(self.clock() * 1000))
            if held:
                log.info("batch %d: %d notifications held back by silences", batch_id, held)
        counts = {k: len(v) for k, v in records.items()}
        self.totals.update(counts)
        if self.output_dir:
            write_files(self.output_dir, batch_id, records)
        if self.redis_sink is not None and (any(counts.values()) or clocks or self.cluster_step.verdicts):
            decoded = {k: [record for _, record in v] for k, v in records.items()}
            self.redis_sink.write_batch(
                batch_id,
                decoded["alerts"],
                decoded["partition_status"],
                decoded["replica_status"],
                decoded["quarantine"],
                clocks=clocks,
                series_points=decoded.get("series_point"),
                verdicts=self.cluster_step.verdicts,
            )
        if self.alertmanager is not None:
            self.alertmanager.send([record for _, record in records["alerts"]])
        if counts["quarantine"]:
            log.warning("batch %d: %d records quarantined", batch_id, counts["quarantine"])
        log.info("batch %d: %s", batch_id, counts)
