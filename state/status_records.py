"""The status records of a bucket's partitions (docs/outputs.md): which go out, and when a
healthy partition's go out as series points instead."""

from __future__ import annotations

import zlib
from typing import Any

from replmon.state import sessions
from replmon.state.explain import CAUGHT_UP
from replmon.state.monitor import MonitorConfig, PartitionWatch

# What a series point carries (docs/outputs.md, `series_point`): the values of a status that move
# while a partition stays healthy; a partition's point also has `isr_size`.
PARTITION_POINT_FIELDS = ("hw", "leader_leo", "hw_stalled_ms")
REPLICA_POINT_FIELDS = ("lag_ms", "lag_messages", "leo")


def emit_statuses(
    bucket: Any,
    cfg: MonitorConfig,
    partitions: list[dict[str, Any]],
    replicas: list[dict[str, Any]],
    force: bool = False,
    points: list[dict[str, Any]] | None = None,
) -> None:
    """Append the status of each partition that changed, at most once per status interval
    unless something significant (ISR, alerts, metadata) changed. A healthy partition whose
    status would say what its last one said but for its times and offsets (_steady_digest)
    goes out again once per status_refresh_ms, at its own phase in that period (_refresh_phase);
    meanwhile, when its offsets moved, its series points go to `points` instead
    (docs/outputs.md)."""
    for key, watch in bucket.partitions.items():
        if not watch.dirty:
            continue
        if not (force or watch.significant or watch.time_ms - watch.last_status_ms >= cfg.status_interval_ms):
            continue
        watch = bucket.warm(key)  # (loaded first if the bucket was loaded without it)
        table = bucket.clusters[key[0]].sessions
        if table.reads:
            sessions.sync(table, watch, watch.time_ms)
        status = watch.partition_status()
        rows = watch.replica_statuses(bucket.clusters[key[0]].config(cfg))
        bucket.touched.add((watch.cluster, watch.topic, watch.partition))
        digest = _steady_digest(watch, status, rows) if cfg.status_refresh_ms else None
        sent = watch.status_sent
        repeat = (
            not (force or watch.significant)
            and digest is not None
            and sent is not None
            and sent[0] == digest
            and _same_refresh_period(watch, sent[1], cfg.status_refresh_ms)
        )
        watch.dirty = watch.significant = False
        watch.last_status_ms = watch.time_ms
        if repeat:  # healthy, and it would say what it said last: no news, perhaps points
            assert sent is not None
            offsets = _offsets(status, rows)
            if points is not None and sent[2:] != (offsets,):
                points.extend(_series_points(status, rows))
                watch.status_sent = (sent[0], sent[1], offsets)
            continue
        partitions.append(status)
        replicas.extend(rows)
        watch.status_sent = None if digest is None else (digest, watch.time_ms, _offsets(status, rows))


def _refresh_phase(cluster: str, topic: str, partition: int, refresh_ms: int) -> int:
    """Where in each refresh period a partition's repeat falls: fixed per partition (the same in
    every process) and spread evenly over the period, so that partitions first seen together
    (a monitor's start) do not all repeat in the same micro-batch, period after period."""
    return zlib.crc32(f"{cluster}/{topic}/{partition}".encode()) % refresh_ms


def _same_refresh_period(watch: PartitionWatch, sent_ms: int, refresh_ms: int) -> bool:
    """Whether the partition's event time is still in the refresh period of its last status:
    periods of refresh_ms, shifted by the partition's phase. A healthy partition repeats its
    status once a period: at most refresh_ms apart (plus a batch), and a monitor's partitions
    spread over the period instead of coming due together."""
    phase = _refresh_phase(watch.cluster, watch.topic, watch.partition, refresh_ms)
    return (watch.time_ms + phase) // refresh_ms == (sent_ms + phase) // refresh_ms


def _steady_digest(watch: PartitionWatch, status: dict[str, Any], rows: list[dict[str, Any]]) -> int | None:
    """What a healthy partition's status says but for its times and offsets, as a number (equal
    numbers: the same health); None when the partition is not healthy (its statuses all go
    out): an ISR short of its replicas or not the one reported, a follower not caught up (Kafka's
    isCaughtUp, and at the leader's LEO within alerts.caught_up_grace_ms) or not fetching, an
    open alert (a stalled HW is one). A busy partition whose followers keep up is healthy: its
    moving HW, LEOs and lags are series points, not news."""
    if (
        watch.book.open
        or status["under_replicated"]
        or len(status["isr"]) != len(status["replicas"])
        or status["reported_isr"] not in (None, status["isr"])
    ):
        return None
    said: list[Any] = [
        status["leader"],
        status["leader_epoch"],
        status["replicas"],
        status["isr"],
        status["min_insync_replicas"],
        status["replica_lag_time_max_ms"],
    ]
    for r in rows:
        if not (r["in_isr"] and r["caught_up"] and r["state"] == CAUGHT_UP):
            return None  # (a follower silent at the LEO is caught up by Kafka's rule, but stuck)
        said.append((r["replica"], r["in_reported_isr"]))
    return zlib.crc32(repr(said).encode())


def _offsets(status: dict[str, Any], rows: list[dict[str, Any]]) -> int:
    """The offsets a status gives (the HW, the leader's LEO, each follower's LEO), as one number
    (a hash of ints: the same in every process; should two differ alike, one point is left out)."""
    return hash((status["hw"], status["leader_leo"], *(r["leo"] for r in rows)))


def _series_points(status: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The partition's and its followers' series points, from their statuses."""
    key = {f: status[f] for f in ("cluster", "topic", "partition")}
    points = [
        {
            **key,
            "replica": None,
            "ts": status["ts"],
            **{f: status[f] for f in PARTITION_POINT_FIELDS},
            "isr_size": len(status["isr"]),
        }
    ]
    for r in rows:
        points.append(
            {**key, "replica": r["replica"], "ts": r["ts"], **{f: r[f] for f in REPLICA_POINT_FIELDS}}
        )
    return points
