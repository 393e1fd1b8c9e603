"""The status records of one watched partition (docs/outputs.md, `partition_status` and
`replica_status`): what its leader's state says at the watch's time, by the same definitions the
alert texts use (state/explain.py). Which of them go out, and when, is state/status_records.py's."""

from __future__ import annotations

from typing import Any, Protocol

from replmon.state.explain import ReplicaView, hw_holders, out_of_isr_cause
from replmon.state.monitor_config import MonitorConfig
from replmon.state.partition import PartitionLeader


class Watched(Protocol):
    """What the status records read of a partition's watch (state/monitor.py PartitionWatch)."""

    cluster: str
    topic: str
    partition: int
    leader: PartitionLeader
    time_ms: int
    reported_isr: tuple[int, ...] | None
    ever_in_isr: set[int]
    hw_last_advanced_ms: int
    hw_waiting_since_ms: int | None

    def explain(self, r: int, now: int, cfg: MonitorConfig) -> ReplicaView: ...


def status_followers(p: PartitionLeader) -> list[int]:
    """The followers that have status records, in assignment order: those the leader has state of."""
    return [r for r in p.replicas if r != p.leader and r in p.followers]


def hw_stalled_ms(watch: Watched) -> int:
    """How long the HW has waited below the leader's LEO (0: it is not waiting)."""
    waiting = watch.hw_waiting_since_ms
    return watch.time_ms - waiting if waiting is not None else 0


def partition_status(watch: Watched) -> dict[str, Any]:
    p = watch.leader
    now = watch.time_ms
    holders = list(hw_holders(p, now))
    return {
        "cluster": watch.cluster,
        "topic": watch.topic,
        "partition": watch.partition,
        "ts": now,
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "maximal_isr": list(p.maximal_isr),
        "reported_isr": list(watch.reported_isr) if watch.reported_isr is not None else None,
        "hw": p.hw,
        "leader_leo": p.leader_leo,
        "under_replicated": p.under_replicated,
        "under_min_isr": p.under_min_isr,
        "at_min_isr": p.at_min_isr,
        "min_insync_replicas": p.config.min_insync_replicas,
        "replica_lag_time_max_ms": p.config.replica_lag_time_max_ms,
        "hw_last_advanced_ms": watch.hw_last_advanced_ms,
        "hw_stalled_ms": hw_stalled_ms(watch),
        "hw_holders": holders,
    }


def replica_statuses(watch: Watched, cfg: MonitorConfig) -> list[dict[str, Any]]:
    """One record per follower the leader has state of, in assignment order."""
    p = watch.leader
    now = watch.time_ms
    reported = watch.reported_isr
    rows: list[dict[str, Any]] = []
    for r in status_followers(p):
        v = watch.explain(r, now, cfg)
        rows.append(
            {
                "cluster": watch.cluster,
                "topic": watch.topic,
                "partition": watch.partition,
                "replica": r,
                "ts": now,
                "leo": v.leo,
                "leader_leo": v.leader_leo,
                "lag_messages": v.lag_messages,
                "last_caught_up_ms": v.last_caught_up_ms,
                "lag_ms": v.lag_ms,
                "last_fetch_ms": v.last_fetch_ms,
                "in_isr": v.in_isr,
                "in_reported_isr": (r in reported) if reported is not None else None,
                "caught_up": v.caught_up,
                "state": v.state,
                "out_of_sync_at_ms": v.out_of_sync_at_ms,
                "removable_by_ms": v.removable_by_ms,
                "holds_hw": v.holds_hw,
                # the one definition the alert texts use too (explain.out_of_isr_cause)
                "out_of_isr_cause": (
                    None
                    if v.in_isr and v.caught_up
                    else out_of_isr_cause(p, r, now, ever_in_isr=r in watch.ever_in_isr)
                ),
            }
        )
    return rows
