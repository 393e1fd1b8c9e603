"""Root cause first (state/root_cause.py): the demo's broker crash gives one BrokerUnavailable
alert that the partition and replica alerts name in `caused_by`; the texts say the broker was
fenced; the decision is the same however the partitions are spread over buckets."""

from __future__ import annotations

import zlib
from functools import cache
from operator import itemgetter

from replmon.state.bucket import Bucket
from replmon.state.cluster import fold_batches
from replmon.streaming.settings import monitor_config
from replmon.streaming.simulator import scenarios
from replmon.streaming.simulator.model import simulate

from .test_monitor import T0, ev, meta, run
from .test_monitor_vs_truth import TYPE_RANK, as_tuple, run_monitor

CRASH_AT, RESTART_AT = 100_000, 130_000  # scenarios.demo: broker 3


@cache
def demo_events():
    spec = scenarios.get("demo")
    events, _ = simulate(spec, seed=0)
    return events, spec.replica_lag_time_max_ms


@cache
def demo_alerts(buckets: int = 1) -> tuple:
    events, lag_ms = demo_events()
    if buckets == 1:
        m = run_monitor(events, lag_ms)
        return tuple(fold_batches([(m.alerts, m.activity)], monitor_config(replica_lag_time_max_ms=lag_ms)))
    return tuple(run_buckets(events, lag_ms, buckets))


def run_buckets(events, lag_ms, n):
    """Like the streaming job: partitions hashed into n buckets, broker and heartbeat events to
    every bucket, one micro-batch per second of event time, shares merged per batch."""
    cfg = monitor_config(replica_lag_time_max_ms=lag_ms)
    buckets = [Bucket(i, n) for i in range(n)]
    order = sorted(events, key=lambda e: (e["ts"], TYPE_RANK[e["type"]]))
    batch_end, batch = None, [[] for _ in range(n)]
    batches = []

    def flush():
        alerts = []
        for b, evs in zip(buckets, batch, strict=True):
            b.process(evs, cfg, alerts, [])
        batches.append((alerts, [r for b in buckets for r in b.activity_reports()]))

    for e in order:
        if batch_end is not None and e["ts"] >= batch_end:
            flush()
            batch = [[] for _ in range(n)]
        if batch_end is None or e["ts"] >= batch_end:
            batch_end = (e["ts"] // 1000 + 1) * 1000
        if e["type"] in ("broker", "heartbeat"):
            for evs in batch:
                evs.append(as_tuple(e))
        else:
            key = f"{e['cluster']}/{e['topic']}/{e['partition']}".encode()
            batch[zlib.crc32(key) % n].append(as_tuple(e))
    flush()
    return fold_batches(batches, cfg)


def during_crash(alerts):
    start = T0 + CRASH_AT
    return [a for a in alerts if start <= a["ts"] < T0 + RESTART_AT and a["status"] == "firing"]


def test_the_crash_notifies_one_root_cause_alert():
    fired = during_crash(demo_alerts())
    notified = [a for a in fired if a["notify"]]
    assert [(a["name"], a["subject"], a["severity"]) for a in notified] == [
        ("BrokerUnavailable", "sim/broker/3", "critical")
    ], "one page for one dead broker"
    root = notified[0]
    assert root["broker"] == 3 and root["replica"] is None and root["caused_by"] is None
    # Nothing more is heard from broker 3 from the crash at +100 s: silent at its last activity
    # + stuck_after_ms (3 s); the controller fences it at +109 s, which updates the same alert
    # (no second page); the outage's counts grow on updates and are whole when it resolves.
    assert root["cause"] == "broker_silent" and root["started_ms"] == T0 + 102_983  # last fetch + 3 s + 1
    assert "broker 3 of sim went silent" in root["reason"]
    episode = [a for a in demo_alerts() if a["alert_id"] == root["alert_id"]]
    assert [a["status"] for a in episode if a["status"] != "updated"] == ["firing", "resolved"]
    assert {a["cause"] for a in episode if a["status"] != "firing"} == {"broker_fenced"}
    assert not any(a["notify"] for a in episode if a["status"] == "updated")
    last = episode[-1]
    assert last["counts"] == {"under_replicated": 8, "under_min_isr": 0, "offline": 0, "leaders_lost": 2}
    assert last["status"] == "resolved" and "running again" in last["reason"]


def test_partition_and_replica_alerts_name_the_broker_and_say_why():
    fired = during_crash(demo_alerts())
    root_id = next(a["alert_id"] for a in fired if a["name"] == "BrokerUnavailable")
    consequences = [a for a in fired if a["name"] in ("ReplicaOutOfSync", "UnderReplicated", "AtMinIsr")]
    assert len(consequences) == 24, "8 partitions x (replica out, under-replicated, at min ISR)"
    assert all(a["caused_by"] == root_id and not a["notify"] for a in consequences)
    for a in consequences:
        if a["name"] == "ReplicaOutOfSync":
            assert a["replica"] == 3 and a["cause"] == "broker_fenced"
            assert "broker 3 was fenced" in a["reason"] and "not caught up" not in a["reason"]


def test_a_replica_lagging_for_its_own_reason_is_not_hidden():
    # orders-0/2 (paused fetcher) and orders-1/3 (slow) are not about any broker: they notify.
    fired = [a for a in demo_alerts() if a["status"] == "firing" and a["ts"] < T0 + CRASH_AT]
    own = [(a["subject"], a["cause"]) for a in fired if a["notify"]]
    assert own == [("sim/orders-0/2", "lag"), ("sim/orders-1/3", "lag")]
    under = [a for a in fired if a["name"] == "UnderReplicated"]
    ids = {a["subject"]: a["alert_id"] for a in fired if a["name"] == "ReplicaOutOfSync"}
    assert [a["caused_by"] for a in under] == [ids["sim/orders-0/2"], ids["sim/orders-1/3"]], (
        "the partition alert points at the one replica that explains it"
    )


def test_imminent_exit_says_it_escalated_not_that_it_caught_up():
    resolved = {
        a["subject"]: a["reason"]
        for a in demo_alerts()
        if a["name"] == "IsrExitImminent" and a["status"] == "resolved"
    }
    assert resolved["sim/orders-0/2"] == "replica 2 of orders-0 is now out of sync (ReplicaOutOfSync)"
    assert (
        resolved["sim/orders-2/2"] == "replica 2 of orders-2 follows a new leader (broker 1) and starts over"
    )


def test_same_ids_and_counts_however_partitions_are_bucketed():
    def roots(alerts):
        return [
            (a["alert_id"], a["status"], a["ts"], a.get("counts"), a["reason"])
            for a in alerts
            if a["name"] == "BrokerUnavailable"
        ]

    one, four = demo_alerts(1), demo_alerts(4)
    assert roots(one) == roots(four)
    assert [r[1] for r in roots(one) if r[1] != "updated"] == ["firing", "resolved"]
    key = itemgetter("alert_id", "status", "caused_by")
    assert sorted(map(key, one)) == sorted(map(key, four))


def test_hw_frozen_under_min_isr_is_not_called_a_stall_on_a_replica():
    # min ISR 2, replica 3 crashes out of the ISR {1,3}... modelled with metadata: ISR {1} only.
    cfg = monitor_config(replica_lag_time_max_ms=10_000, min_insync_replicas=2, hw_stall_ms=5_000)
    events = [
        meta(T0, isr=(1, 2)),
        ev("append", T0 + 10, leader_leo=100),
        ev("fetch", T0 + 20, replica=2, fetch_offset=50, leader_leo=100),
        meta(T0 + 30, isr=(1,)),
    ]
    events += [ev("heartbeat", T0 + 1000 * s) for s in range(1, 30)]
    bucket, alerts, _ = run(events, cfg)
    names = {a["name"] for a in alerts if a["status"] == "firing"}
    assert "UnderMinIsr" in names and "HighWatermarkStalled" not in names
    under = next(a for a in alerts if a["name"] == "UnderMinIsr")
    assert "acks=all produce is rejected" in under["reason"]
    watch = next(iter(bucket.partitions.values()))
    status = watch.partition_status()
    holders = {r["replica"] for r in watch.replica_statuses(cfg) if r["holds_hw"]}
    assert status["hw_holders"] == sorted(holders) == [], "nobody holds an HW the min ISR rule froze"


def test_an_ongoing_outage_survives_the_state_format():
    from replmon.state.codec import decode, encode

    cfg = monitor_config(replica_lag_time_max_ms=10_000)
    events = [meta(T0), ev("broker", T0 + 100, broker=3, state="fenced", broker_epoch=7)]
    bucket, alerts, _ = run(events, cfg, advance=False)
    back = decode(encode(bucket), bucket_id=0, buckets=1, cfg=cfg)
    root = back.clusters["c1"].roots[3]
    assert root == bucket.clusters["c1"].roots[3]
    assert root.alert_id == next(a["alert_id"] for a in alerts if a["name"] == "BrokerUnavailable")
    assert back.partitions[("c1", "t", 0)].book.open == bucket.partitions[("c1", "t", 0)].book.open, (
        "caused_by and cause of open episodes are kept"
    )


def test_shutdown_then_fences_then_offline_each_counted_under_the_outage_that_caused_it():
    # t-0 on 1,2,3 (leader 1), min ISR 2: broker 3 shuts down (+6 s), broker 2 is fenced (+12 s:
    # under min ISR), broker 1 is fenced (+15 s: no leader).
    from .test_monitor import steady

    cfg = monitor_config(replica_lag_time_max_ms=10_000, min_insync_replicas=2)
    events = [
        meta(T0),
        *steady(T0 + 100, T0 + 20000, stop=T0 + 5000),
        ev("broker", T0 + 6000, broker=3, state="shutting_down", broker_epoch=5),
        meta(T0 + 6000, isr=(1, 2)),
        ev("broker", T0 + 12000, broker=2, state="fenced", broker_epoch=5),
        meta(T0 + 12000, isr=(1,)),
        ev("broker", T0 + 15000, broker=1, state="fenced", broker_epoch=5),
        meta(T0 + 15000, isr=(1,), epoch=2, leader=-1),
    ]
    events.sort(key=lambda e: e[1])
    bucket, alerts, _ = run(events, cfg)
    alerts = fold_batches([(alerts, bucket.activity_reports())], cfg)
    roots = {a["broker"]: a for a in alerts if a["name"] == "BrokerUnavailable"}
    assert {b: (a["cause"], a["counts"]) for b, a in roots.items()} == {
        3: (
            "broker_shutting_down",
            {"under_replicated": 1, "under_min_isr": 0, "offline": 0, "leaders_lost": 0},
        ),
        2: ("broker_fenced", {"under_replicated": 0, "under_min_isr": 1, "offline": 0, "leaders_lost": 0}),
        1: ("broker_fenced", {"under_replicated": 0, "under_min_isr": 0, "offline": 1, "leaders_lost": 1}),
    }
    by_name = {a["name"]: a for a in alerts if a["status"] == "firing"}
    assert by_name["UnderMinIsr"]["caused_by"] == roots[2]["alert_id"], "the outage that crossed min ISR"
    assert by_name["OfflinePartition"]["caused_by"] == roots[1]["alert_id"]
    # One notification per outage: the shutdown's is a warning; the partitions the fences took
    # below min ISR and offline are in the counts of the outages that page (critical) already.
    assert [(a["name"], a["broker"], a["severity"]) for a in alerts if a["notify"]] == [
        ("BrokerUnavailable", 3, "warning"),
        ("BrokerUnavailable", 2, "critical"),
        ("BrokerUnavailable", 1, "critical"),
    ]
    out3 = next(a for a in alerts if a["subject"] == "c1/t-0/3")
    assert "controlled shutdown" in out3["reason"] and out3["cause"] == "broker_shutting_down"


def stopped_broker_events(stop_ms=5000, resume_ms=40_000, end_ms=50_000):
    """Brokers 1-3, partitions a-0/a-1/a-2 led by 1/2/3, all on {1,2,3}. Broker 3 is stopped
    (SIGSTOP) from stop_ms to resume_ms and the controller never fences it (a long session
    timeout): no fetch from 3, nothing from the partition it leads."""
    events = [ev("broker", T0, broker=b, state="running", broker_epoch=10 + b) for b in (1, 2, 3)]
    for p in range(3):
        leader = p + 1
        events.append(
            ev(
                "metadata",
                T0,
                topic="a",
                partition=p,
                leader=leader,
                leader_epoch=1,
                replicas=(1, 2, 3),
                isr=(1, 2, 3),
                leader_leo=0,
                hw=0,
                replica_lag_time_max_ms=10_000,
            )
        )
    leo = 0
    for t in range(T0 + 100, T0 + end_ms, 200):
        leo += 10
        stopped = T0 + stop_ms <= t < T0 + resume_ms
        for p in range(3):
            leader = p + 1
            if leader == 3 and stopped:
                continue
            events.append(ev("append", t, topic="a", partition=p, leader_leo=leo))
            for r in (1, 2, 3):
                if r != leader and not (r == 3 and stopped):
                    events.append(
                        ev(
                            "fetch",
                            t + 2,
                            topic="a",
                            partition=p,
                            replica=r,
                            fetch_offset=leo,
                            leader_leo=leo,
                        )
                    )
    return sorted(events, key=lambda e: (e[1], e[0] != "broker"))


def test_a_stopped_broker_the_controller_has_not_fenced_is_one_silent_root():
    cfg = monitor_config(replica_lag_time_max_ms=10_000)
    bucket, alerts, _ = run(stopped_broker_events(), cfg)
    alerts = fold_batches([(alerts, bucket.activity_reports())], cfg)
    roots = [a for a in alerts if a["name"] == "BrokerUnavailable" and a["status"] != "updated"]
    assert [(a["status"], a["broker"], a["cause"]) for a in roots] == [
        ("firing", 3, "broker_silent"),
        ("resolved", 3, "broker_silent"),
    ]
    root = roots[0]
    assert "went silent" in root["reason"] and "still registered" in root["reason"]
    assert roots[1]["ts"] == T0 + 40_102, (
        "the first fetch from (and logged by) broker 3 again (+100 ms, +2 ms)"
    )
    caused = [
        a
        for a in alerts
        if a["status"] == "firing" and a["name"] != "BrokerUnavailable" and a["severity"] != "info"
    ]
    assert {a["subject"] for a in caused} >= {"c1/a-0/3", "c1/a-1/3", "c1/a-2"}
    assert all(a["caused_by"] == root["alert_id"] and not a["notify"] for a in caused), [
        (a["name"], a["subject"], a["caused_by"]) for a in caused if a["caused_by"] != root["alert_id"]
    ]
    assert [a["name"] for a in alerts if a["notify"]] == ["BrokerUnavailable", "BrokerUnavailable"]
    assert not any(a["name"] == "ReplicaFetcherStalled" for a in alerts), "not one thread: the broker"


def test_statuses_say_the_same_cause_as_the_texts():
    events, lag_ms = demo_events()
    statuses = run_monitor(events, lag_ms).replica_status
    during = [
        r
        for r in statuses
        if r["replica"] == 3 and not r["in_isr"] and T0 + 109_034 <= r["ts"] < T0 + RESTART_AT
    ]
    assert during, "broker 3's replicas are reported while it is fenced"
    assert {(r["state"], r["out_of_isr_cause"]) for r in during} == {("fenced", "broker_fenced")}
    paused = [
        r
        for r in statuses
        if (r["topic"], r["partition"], r["replica"]) == ("orders", 0, 2)
        and not r["in_isr"]
        and r["ts"] < T0 + CRASH_AT
    ]
    assert paused and {r["out_of_isr_cause"] for r in paused} == {"lag"}
