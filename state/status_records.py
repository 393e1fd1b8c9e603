"""The status records of a bucket's partitions (docs/outputs.md): which go out, and when a
healthy partition's go out as series points instead."""

from __future__ import annotations

import zlib
from typing import Any

from replmon.state import sessions
from replmon.state.deadlines import refresh_phase
from replmon.state.explain import CAUGHT_UP, classify_replica, lag_messages
from replmon.state.monitor import MonitorConfig, PartitionWatch, caught_up_grace_ms, quiet_after_ms
from replmon.state.partition_status import hw_stalled_ms, status_followers

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
        view = bucket.clusters[key[0]]
        if view.sessions.reads:
            sessions.sync(view.sessions, watch, watch.time_ms)
        bucket.touched.add((watch.cluster, watch.topic, watch.partition))
        conf = view.config(cfg)
        # read from the partition's state, so that a repeat (the common case) builds no record
        digest = _steady_digest(watch, conf) if cfg.status_refresh_ms else None
        sent = watch.status_sent
        repeat = (
            not (force or watch.significant)
            and digest is not None
            and sent is not None
            and sent[0] == digest
            and _same_refresh_period(watch, sent[1], cfg.status_refresh_ms)
        )
        if repeat:  # healthy, and it would say what it said last: no news, perhaps points
            assert sent is not None
            if points is None or _points(watch, sent, view.clock_ms, cfg.series_interval_ms, points):
                watch.dirty = watch.significant = False
                watch.last_status_ms = watch.time_ms
            continue
        watch.dirty = watch.significant = False
        watch.last_status_ms = watch.time_ms
        partitions.append(watch.partition_status())
        replicas.extend(watch.replica_statuses(conf))
        if digest is None:
            watch.status_sent = None
            continue
        watch.status_sent = (digest, watch.time_ms, _offsets(watch))
        # a partition its sessions carry has no other date to wake at for its next repeat
        due = watch.refresh_due_ms(conf)
        if due < watch.deadline_ms:
            watch.deadline_ms = due


def _points(
    watch: PartitionWatch, sent: tuple[int, ...], clock_ms: int, every_ms: int, points: list[dict[str, Any]]
) -> bool:
    """A healthy partition's series points, when its offsets moved since its last status or point
    and its cluster's clock is in another period of `every_ms` (stream.series_interval_ms, at the
    partition's phase) than that one's time. False when they wait for the next period: the
    partition stays due, so that its last offsets go out even if nothing else happens to it."""
    offsets = _offsets(watch)
    if sent[2] == offsets:
        return True
    last_ms = sent[3] if len(sent) > 3 else sent[1]  # (a state stored before points had a time)
    if every_ms and _same_refresh_period(watch, last_ms, every_ms, clock_ms):
        return False
    points.extend(series_points(watch))
    watch.status_sent = (sent[0], sent[1], offsets, watch.time_ms)
    return True


def _same_refresh_period(
    watch: PartitionWatch, sent_ms: int, refresh_ms: int, now_ms: int | None = None
) -> bool:
    """Whether `now_ms` (default: the partition's event time) is still in the refresh period of
    its last status: periods of refresh_ms, shifted by the partition's phase. A healthy partition
    repeats its status once a period: at most refresh_ms apart (plus a batch), and a monitor's
    partitions spread over the period instead of coming due together."""
    phase = refresh_phase(watch.cluster, watch.topic, watch.partition, refresh_ms)
    now = watch.time_ms if now_ms is None else now_ms
    return (now + phase) // refresh_ms == (sent_ms + phase) // refresh_ms


def _steady_digest(watch: PartitionWatch, cfg: MonitorConfig) -> int | None:
    """What a healthy partition's status would say but for its times and offsets, as a number
    (equal numbers: the same health), read from its state without building the records; None
    when the partition is not healthy (its statuses all go out): an ISR short of its replicas
    or not the one reported, a follower not caught up (Kafka's isCaughtUp, and at the leader's
    LEO within alerts.caught_up_grace_ms and the resolution's allowance: state/monitor.py
    caught_up_grace_ms) or not fetching, an open alert (a stalled HW is one).
    A busy partition whose followers keep up is healthy: its moving HW, LEOs and lags are
    series points, not news. The fields are the records' (state/partition_status.py)."""
    p = watch.leader
    reported = watch.reported_isr
    if (
        watch.book.open
        or p.under_replicated
        or len(p.isr) != len(p.replicas)
        or (reported is not None and list(reported) != list(p.isr))
    ):
        return None
    said: list[Any] = [
        p.leader,
        p.leader_epoch,
        list(p.replicas),
        list(p.isr),
        p.config.min_insync_replicas,
        p.config.replica_lag_time_max_ms,
    ]
    now = watch.time_ms
    stuck_after_ms = quiet_after_ms(cfg, p.config.replica_lag_time_max_ms)
    grace_ms = caught_up_grace_ms(cfg, p.config.replica_lag_time_max_ms)
    for r in status_followers(watch.leader):
        if not (r in p.isr and p.is_caught_up(r, now)):
            return None  # (a follower silent at the LEO is caught up by Kafka's rule, but stuck)
        state = classify_replica(
            p,
            r,
            now,
            ever_in_isr=r in watch.ever_in_isr,
            stuck_after_ms=stuck_after_ms,
            caught_up_grace_ms=grace_ms,
        )
        if state != CAUGHT_UP:
            return None
        said.append((r, (r in reported) if reported is not None else None))
    return zlib.crc32(repr(said).encode())


def _offsets(watch: PartitionWatch) -> int:
    """The offsets a status gives (the HW, the leader's LEO, each follower's LEO), as one number
    (a hash of ints: the same in every process; should two differ alike, one point is left out)."""
    p = watch.leader
    return hash((p.hw, p.leader_leo, *(p.followers[r].leo for r in status_followers(watch.leader))))


def series_points(watch: PartitionWatch) -> list[dict[str, Any]]:
    """The partition's and its followers' series points (docs/outputs.md, `series_point`): the
    values its partition_status and replica_status records give, read from its state."""
    p, now = watch.leader, watch.time_ms
    key = {"cluster": watch.cluster, "topic": watch.topic, "partition": watch.partition}
    points = [
        {
            **key,
            "replica": None,
            "ts": now,
            "hw": p.hw,
            "leader_leo": p.leader_leo,
            "hw_stalled_ms": hw_stalled_ms(watch),
            "isr_size": len(p.isr),
        }
    ]
    for r in status_followers(watch.leader):
        st = p.followers[r]
        points.append(
            {
                **key,
                "replica": r,
                "ts": now,
                "lag_ms": now - st.last_caught_up_ms,
                "lag_messages": lag_messages(p.leader_leo, st.leo),
                "leo": st.leo,
            }
        )
    return points
