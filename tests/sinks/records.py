"""Sample engine output records, shaped exactly as docs/outputs.md describes them."""

from __future__ import annotations


def partition_status(cluster="c1", topic="orders", partition=0, ts=1_000, **overrides) -> dict:
    record = dict(
        cluster=cluster,
        topic=topic,
        partition=partition,
        ts=ts,
        leader=1,
        leader_epoch=3,
        replicas=[1, 2, 3],
        isr=[1, 2],
        maximal_isr=[1, 2],
        reported_isr=None,
        hw=10,
        leader_leo=12,
        under_replicated=True,
        under_min_isr=False,
        at_min_isr=True,
        min_insync_replicas=2,
        replica_lag_time_max_ms=30_000,
        hw_last_advanced_ms=ts - 100,
        hw_stalled_ms=100,
        hw_holders=[2],
    )
    record.update(overrides)
    return record


def replica_status(cluster="c1", topic="orders", partition=0, replica=3, ts=1_000, **overrides) -> dict:
    record = dict(
        cluster=cluster,
        topic=topic,
        partition=partition,
        replica=replica,
        ts=ts,
        leo=5,
        leader_leo=12,
        lag_messages=7,
        last_caught_up_ms=ts - 31_200,
        lag_ms=31_200,
        last_fetch_ms=0,
        in_isr=False,
        in_reported_isr=None,
        caught_up=False,
        state="stuck",
        out_of_sync_at_ms=None,
        removable_by_ms=None,
        holds_hw=False,
    )
    record.update(overrides)
    return record


def alert(alert_id="a1", status="firing", cluster="c1", ts=1_000, started_ms=1_000, **overrides) -> dict:
    record = dict(
        alert_id=alert_id,
        name="ReplicaOutOfSync",
        status=status,
        severity="warning",
        cluster=cluster,
        topic="orders",
        partition=0,
        replica=3,
        subject=f"{cluster}/orders/0/3",
        started_ms=started_ms,
        ts=ts,
        reason="replica 3 of orders-0 has not caught up for 31.2 s (limit 30 s): stuck",
    )
    record.update(overrides)
    return record


def quarantined(raw="{not json", reason="not a JSON object", stage="parse", cluster=None, ts=None) -> dict:
    return dict(raw=raw, reason=reason, stage=stage, cluster=cluster, ts=ts)


def full_batch(ts=1_000) -> dict:
    """One of each kind, with something firing, under-replicated and out of sync."""
    return dict(
        alerts=[alert(ts=ts, started_ms=ts)],
        partition_status=[partition_status(ts=ts, under_min_isr=True)],
        replica_status=[replica_status(ts=ts), replica_status(replica=2, ts=ts, in_isr=True, lag_ms=0)],
        quarantine=[quarantined()],
    )


def verdict(cluster="c1", broker=3, clock_ms=1_000, answer="not_safe") -> dict:
    """One broker's restart-gate verdict, as the cluster step gives it (state/restart_gate.py)."""
    return dict(
        cluster=cluster,
        broker=broker,
        verdict=answer,
        clock_ms=clock_ms,
        summary=f"broker {broker}: not safe to stop (under_min_isr)",
        reasons={"under_min_isr": {"count": 1, "blocks": True, "examples": ["orders-0"]}},
    )
