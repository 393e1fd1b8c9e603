"""The same alerts however the input is cut into micro-batches, with cluster-wide events read
up to the allowed lateness ahead of the partitions' events (as they are when they sit on
another partition of the metrics topic). Engine only; tests/faults/test_kafka_faults.py does
the same through the real Kafka source."""

from __future__ import annotations

import pytest

from replmon.streaming.settings import monitor_config
from replmon.streaming.simulator import scenarios
from replmon.streaming.simulator.model import simulate
from tests.faults.replay import run_batches

CFG = monitor_config(replica_lag_time_max_ms=10_000)


@pytest.fixture(scope="module")
def demo_events() -> list[dict]:
    events, _ = simulate(scenarios.get("demo"), seed=0)
    return events


@pytest.fixture(scope="module")
def whole(demo_events):
    """The reference: everything in one batch."""
    alerts, quarantined = run_batches([demo_events], CFG)
    assert quarantined == []
    assert len(alerts) > 10, "the demo scenario raises alerts"
    return transitions(alerts)


def skewed_batches(events: list[dict], batch_ms: int, ahead_ms: int) -> list[list[dict]]:
    """Batch i holds partition events with ts in [i*batch_ms, (i+1)*batch_ms) from the start,
    and cluster-wide events (broker, heartbeat) `ahead_ms` further on."""
    t0 = events[0]["ts"]
    batches: dict[int, list[dict]] = {}
    for e in events:
        cluster_wide = e["type"] in ("broker", "heartbeat")
        i = max(0, (e["ts"] - t0 - (ahead_ms if cluster_wide else 0)) // batch_ms)
        batches.setdefault(i, []).append(e)
    return [batches.get(i, []) for i in range(max(batches) + 1)]


def transitions(alerts: list[dict]) -> list[tuple]:
    return sorted((a["alert_id"], a["status"], a["ts"], a["reason"]) for a in alerts)


@pytest.mark.parametrize(
    "batch_ms,ahead_ms,why",
    [
        (1_000, 9_999, "cluster-wide events just under the 10 s lateness ahead, small batches"),
        (30_000, 6_000, "few large batches with skew"),
    ],
)
def test_same_alerts_however_cut(demo_events, whole, batch_ms, ahead_ms, why):
    cut, quarantined = run_batches(skewed_batches(demo_events, batch_ms, ahead_ms), CFG)
    assert quarantined == [], why
    assert transitions(cut) == whole, why


def test_beyond_the_lateness_events_are_quarantined_and_counted(demo_events):
    """Cluster-wide events 25 s ahead: partitions are moved to the cluster clock less 10 s at
    each batch end, so partition events more than the reorder tolerance behind that are late."""
    _cut, quarantined = run_batches(skewed_batches(demo_events, 2_000, 25_000), CFG)
    late = [q for q in quarantined if q["reason"].startswith("late:")]
    assert late, "events beyond the allowed lateness are quarantined"
    assert all(q["stage"] == "state" and q["raw"] for q in late)


def test_duplicated_events_lose_or_repeat_no_alert_transition(demo_events, whole):
    """An at-least-once producer may send an event twice; a resend is read later (here: the
    next batch). Every fifth fetch or append duplicated, in 2 s batches with cluster-wide events 5 s ahead.
    A resent fetch is older than its replica's last fetch and quarantined as stale (a resend
    more than stream.reorder_tolerance_ms behind its partition as late); a resent append
    changes nothing. (A resent metadata event of the current leader epoch is not recognised
    as one: the contract carries no partition epoch.)"""
    batches = skewed_batches(demo_events, 2_000, 5_000)
    resent = [
        [*batch, *(e for e in (batches[i - 1] if i else [])[::5] if e["type"] in ("fetch", "append"))]
        for i, batch in enumerate(batches)
    ]
    cut, quarantined = run_batches(resent, CFG)
    assert quarantined and all(q["reason"].startswith(("late", "stale fetch")) for q in quarantined)
    assert transitions(cut) == whole
