"""The real streaming query (Spark local mode) over JSON-lines input."""

from __future__ import annotations

from operator import itemgetter

import pytest

from tests.streaming.helpers import run_once, write_events

pytestmark = pytest.mark.spark

T0 = 1_767_225_600_000
L = 10_000


def scenario(stop_ms=5000, end_ms=40_000):
    """orders-0 (RF 3, L = 10 s): appends every 100 ms; replica 2 keeps up, replica 3 stops
    fetching at +stop_ms. orders-1: healthy throughout. Heartbeats every second."""
    ev = []
    for p in (0, 1):
        ev.append(
            dict(
                type="metadata",
                ts=T0,
                cluster="c1",
                topic="orders",
                partition=p,
                leader=1,
                leader_epoch=3,
                replicas=[1, 2, 3],
                isr=[1, 2, 3],
                leader_leo=0,
                hw=0,
                replica_lag_time_max_ms=L,
            )
        )
    leo = 0
    for t in range(T0 + 100, T0 + end_ms, 100):
        leo += 10
        for p in (0, 1):
            ev.append(dict(type="append", ts=t, cluster="c1", topic="orders", partition=p, leader_leo=leo))
            ev.append(
                dict(
                    type="fetch",
                    ts=t + 1,
                    cluster="c1",
                    topic="orders",
                    partition=p,
                    replica=2,
                    fetch_offset=leo,
                    leader_leo=leo,
                )
            )
            if p == 1 or t < T0 + stop_ms:
                ev.append(
                    dict(
                        type="fetch",
                        ts=t + 2,
                        cluster="c1",
                        topic="orders",
                        partition=p,
                        replica=3,
                        fetch_offset=leo,
                        leader_leo=leo,
                    )
                )
        if (t - T0) % 1000 == 0:
            ev.append(dict(type="heartbeat", ts=t, cluster="c1"))
    return ev


BAD = [
    ("not json at all", "not a JSON object"),
    (
        '{"type":"fetch","ts":1,"cluster":"c1","topic":"t","partition":0,"replica":2,"leader_leo":5}',
        "missing field for fetch: fetch_offset",
    ),
    (
        (
            '{"type":"fetch","ts":1,"cluster":"c1","topic":"t","partition":0,"replica":2,'
            '"fetch_offset":"abc","leader_leo":5}'
        ),
        "mistyped field: fetch_offset is not an integer",
    ),
    (
        '{"type":"append","ts":1,"cluster":"c1","topic":"t","partition":-4,"leader_leo":5}',
        "negative partition",
    ),
    ('{"type":"teleport","ts":1,"cluster":"c1"}', "unknown type: teleport"),
    ('{"type":"heartbeat","ts":99999999999999,"cluster":"c1"}', "ahead of the wall clock"),
    ('{"type":"broker","ts":1,"cluster":"c1","broker":3,"state":"sleepy"}', "unknown broker state"),
]


def test_stuck_follower_alerts_at_rule_times_and_bad_records_quarantined(spark, tmp_path):
    inp = write_events(tmp_path / "in", scenario(), raw_lines=[b for b, _ in BAD])
    out = run_once(spark, inp, tmp_path / "out", stream={"buckets": 4})
    alerts = [(a["status"], a["name"], a["subject"], a["ts"] - T0) for a in out["alerts"]]
    # Replica 3's last fetch at the LEO is at +4902 (step +4900, offset 2): out of sync at
    # lcu + L + 1 = +14903, imminent at lcu + L/2 + 1 = +9903, removed by the isr-expiration
    # run at +15000 (runs every L/2).
    assert ("firing", "IsrExitImminent", "c1/orders-0/3", 9903) in alerts
    assert ("firing", "ReplicaOutOfSync", "c1/orders-0/3", 14903) in alerts
    assert ("firing", "UnderReplicated", "c1/orders-0", 15000) in alerts
    assert not [a for a in alerts if "orders-1" in a[2]]
    reasons = sorted(q["reason"] for q in out["quarantine"])
    assert len(reasons) == len(BAD)
    for _, expected in BAD:
        assert any(expected in r for r in reasons), expected
    assert {q["raw"] for q in out["quarantine"]} == {b for b, _ in BAD}
    final = {(r["partition"], r["replica"]): r for r in out["replica_status"]}
    assert final[(0, 3)]["state"] == "stuck" and final[(0, 3)]["in_isr"] is False
    assert final[(1, 3)]["state"] == "caught_up" and final[(1, 3)]["in_isr"] is True


def test_same_input_same_outputs_and_alert_ids(spark, tmp_path):
    inp = write_events(tmp_path / "in", scenario(end_ms=25_000))
    first = run_once(spark, inp, tmp_path / "out1", stream={"buckets": 4})
    second = run_once(spark, inp, tmp_path / "out2", stream={"buckets": 4})
    assert first["alerts"] and first == second


def test_records_split_across_files_and_batches_give_the_same_alerts(spark, tmp_path):
    events = scenario(end_ms=25_000)
    whole = run_once(spark, write_events(tmp_path / "a", events), tmp_path / "o1", stream={"buckets": 4})
    folder = tmp_path / "b"
    half = len(events) // 2
    write_events(folder, events[:half], name="part-00000.jsonl")
    write_events(folder, events[half:], name="part-00001.jsonl")
    split = run_once(
        spark, folder, tmp_path / "o2", stream={"buckets": 4}, spark={"max_files_per_trigger": 1}
    )
    key = itemgetter("alert_id", "status", "ts")
    assert sorted(map(key, whole["alerts"])) == sorted(map(key, split["alerts"]))
