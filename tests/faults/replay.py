"""Drive the engine as the streaming query does, with the input cut into micro-batches any way
a test likes (no Spark): each batch is checked by the contract checks' Python reference
(streaming/validate.py; the query runs the same checks on the JVM) and goes through the real
adapter (`events_from_frames`: quarantine, then event-time order) into the buckets, then the
end-of-batch `advance`."""

from __future__ import annotations

import zlib

import pandas as pd

from replmon.state.bucket import Bucket
from replmon.state.cluster import ClusterStep, cluster_config
from replmon.state.events import BROADCAST, EVENT_FIELDS, FIELDS
from replmon.state.monitor import MonitorConfig
from replmon.streaming.contract import pack_extra
from replmon.streaming.simulator.events import encode
from replmon.streaming.validate import invalid_reasons

INT_FIELDS = [name for name, f in FIELDS.items() if f.kind == "int" and name in EVENT_FIELDS]
NOW_MS = 1 << 52  # wall clock for the future check: far after any test event


def _frame(events: list[dict], seqs: list[int]) -> pd.DataFrame:
    rows = []
    for e, seq in zip(events, seqs, strict=True):
        row = {f: e.get(f) for f in EVENT_FIELDS}
        row.update(raw=encode(e), seq=seq, malformed=False)
        rows.append(row)
    frame = pd.DataFrame(rows, columns=[*EVENT_FIELDS, "seq", "malformed"])
    for name in INT_FIELDS:  # as Arrow hands them to pandas: float with NaN where null
        frame[name] = pd.to_numeric(frame[name]).astype("float64")
    frame["reason"] = invalid_reasons(frame, NOW_MS, 3_600_000)
    frame["extra"] = [pack_extra(e) for e in events]  # as parse.monitor_input packs them
    return frame


def bucket_of(event: dict, buckets: int, valid: bool) -> list[int]:
    """As parse.monitor_input routes: a valid cluster-wide event to every bucket, anything else
    to one."""
    if valid and event["type"] in BROADCAST:
        return list(range(buckets))
    key = f"{event.get('cluster')}/{event.get('topic')}/{event.get('partition')}".encode()
    return [zlib.crc32(key) % buckets]


def run_batches(batches: list[list[dict]], cfg: MonitorConfig, buckets: int = 4):
    """(alerts, quarantine) after feeding every batch in turn."""
    from replmon.streaming.stateful import events_from_frames

    state = {b: Bucket(b, buckets) for b in range(buckets)}
    alerts: list = []
    quarantine: list = []
    seq = 0
    cluster = ClusterStep(cluster_config(cfg))  # as the bridge runs it on the driver
    for batch in batches:
        bucket_alerts: list = []
        per_bucket: dict[int, tuple[list, list]] = {}
        reasons = _frame(batch, list(range(len(batch))))["reason"].tolist() if batch else []
        for e, reason in zip(batch, reasons, strict=True):
            for b in bucket_of(e, buckets, reason is None):
                evs, seqs = per_bucket.setdefault(b, ([], []))
                evs.append(e)
                seqs.append(seq)
            seq += 1
        for b, bucket in state.items():
            if b in per_bucket:
                evs, seqs = per_bucket[b]
                events = events_from_frames([_frame(evs, seqs)], quarantine)
                bucket.process(events, cfg, bucket_alerts, quarantine)
            bucket.advance(cfg, bucket_alerts)
        activity = [r for bucket in state.values() for r in bucket.activity_reports()]
        alerts += cluster.step(bucket_alerts, activity)
    alerts += cluster.step([], [], flush=True)
    return alerts, quarantine
