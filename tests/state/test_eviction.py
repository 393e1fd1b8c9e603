"""Bounded state: a partition no longer reported leaves the state, and its open alerts resolve
with that reason. Two ways to stop being reported: no event for `evict_after_ms` of event time
(its cluster's clock, less the lateness, moves on without it), or a `metadata` event with no
replicas (the cluster no longer lists it: the topic was deleted)."""

from __future__ import annotations

from replmon.state.bucket import Bucket
from replmon.streaming.settings import monitor_config
from tests.state.test_monitor import T0, L, ev, meta, steady

EVICT = 120_000
CFG = monitor_config(
    replica_lag_time_max_ms=L, telemetry_gap_ms=30_000, lateness_ms=10_000, evict_after_ms=EVICT
)


def heartbeats(start, end, every=1000):
    return [ev("heartbeat", t) for t in range(start, end, every)]


def run(batches, cfg=CFG):
    """Each batch processed then advanced, as the stateful step does per micro-batch."""
    bucket, alerts, quarantine = Bucket(0, 1), [], []
    for events in batches:
        bucket.process(sorted(events, key=lambda e: e[1]), cfg, alerts, quarantine)
        bucket.advance(cfg, alerts)
    return bucket, alerts


def names(alerts, status):
    return sorted((a["name"], a["subject"]) for a in alerts if a["status"] == status)


def test_a_partition_silent_for_evict_after_ms_is_evicted_and_its_alerts_resolve_with_that_reason():
    # t-1 stops at +20 s (last event: the append at +19,900 and fetches up to +19,902); the
    # cluster keeps beating. TelemetryMissing for t-1 fires at last + gap + 1 = +49,903; the
    # partition is evicted at last + 120 s = +139,902, once the cluster's clock less the
    # lateness has passed it (a heartbeat at +150 s does). t-0 keeps reporting and stays.
    last = T0 + 19_902
    other = [(*e[:4], 0, *e[5:]) for e in [meta(T0), *steady(T0 + 100, T0 + 200_000, step=1000)]]
    gone = [(*e[:4], 1, *e[5:]) for e in [meta(T0), *steady(T0 + 100, T0 + 20_000)]]
    bucket, alerts = run(
        [other[:40] + gone + heartbeats(T0, T0 + 40_000), other[40:] + heartbeats(T0 + 40_000, T0 + 200_000)]
    )
    assert ("c1", "t", 1) not in bucket.partitions
    assert ("c1", "t", 0) in bucket.partitions
    fired = [a for a in alerts if a["subject"] == "c1/t-1" and a["status"] == "firing"]
    resolved = [a for a in alerts if a["subject"] == "c1/t-1" and a["status"] == "resolved"]
    assert [(a["name"], a["ts"] - T0) for a in fired] == [("TelemetryMissing", 49_903)]
    assert [(a["name"], a["ts"] - T0) for a in resolved] == [("TelemetryMissing", 139_902)]
    assert resolved[0]["reason"] == (
        "t-1 is no longer reported: no event since 00:00:19 "
        "(stream.evict_after_ms 120 s): no longer monitored"
    )
    assert resolved[0]["alert_id"] == fired[0]["alert_id"]
    assert last + EVICT == resolved[0]["ts"]


def test_eviction_waits_for_the_clock_less_the_lateness():
    # The cluster's clock reaches last + evict but not last + evict + lateness: not yet.
    gone = [meta(T0), *steady(T0 + 100, T0 + 20_000)]
    bucket, _ = run([gone + heartbeats(T0, T0 + 19_902 + EVICT + 10_000)])
    assert ("c1", "t", 0) in bucket.partitions
    bucket.process([ev("heartbeat", T0 + 19_902 + EVICT + 10_000)], CFG, [], [])
    bucket.advance(CFG, [])
    assert ("c1", "t", 0) not in bucket.partitions


def test_a_partition_the_metadata_no_longer_lists_is_evicted_at_once_with_that_reason():
    # Replica 3 stops at +5 s: out of sync and out of the ISR by +15 s. The topic is deleted at
    # +30 s (metadata with no replicas): every open alert resolves then, with that reason.
    events = [meta(T0), *steady(T0 + 100, T0 + 30_000, stop=T0 + 5000)]
    events.append(ev("metadata", T0 + 30_000, leader=-1, leader_epoch=2, replicas=(), isr=()))
    bucket, alerts = run([events])
    assert bucket.partitions == {}
    at_deletion = [a for a in alerts if a["ts"] == T0 + 30_000]
    before = [a for a in alerts if a["ts"] < T0 + 30_000]
    still_open = sorted(set(names(before, "firing")) - set(names(before, "resolved")))
    assert ("ReplicaOutOfSync", "c1/t-0/3") in still_open and ("UnderReplicated", "c1/t-0") in still_open
    assert names(at_deletion, "resolved") == still_open and names(at_deletion, "firing") == []
    assert {a["reason"] for a in at_deletion} == {
        "t-0 is gone from the cluster metadata (no replicas): no longer monitored"
    }


def test_an_evicted_partition_that_reports_again_starts_afresh():
    events = [meta(T0), *steady(T0 + 100, T0 + 5_000)]
    events.append(ev("metadata", T0 + 6_000, leader=-1, leader_epoch=2, replicas=(), isr=()))
    bucket, _ = run([events, [meta(T0 + 10_000, epoch=5), *steady(T0 + 10_100, T0 + 12_000)]])
    watch = bucket.partitions[("c1", "t", 0)]
    assert watch.leader.leader_epoch == 5 and watch.leader.election_ms == T0 + 10_000


def test_metadata_with_no_replicas_for_an_unknown_partition_starts_nothing():
    bucket, alerts = run([[ev("metadata", T0, leader=-1, leader_epoch=0, replicas=(), isr=())]])
    assert bucket.partitions == {} and alerts == []
