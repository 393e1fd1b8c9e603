"""ReplicaFetcherStalled (state/fetcher.py): Kafka's fetcher id, and one alert when one follower
broker's fetcher for one leader stops all its partitions at once."""

import zlib

import pytest

from replmon.state.bucket import Bucket
from replmon.state.events import PARTITION, TOPIC, TYPE
from replmon.state.fetcher import Member, fetcher_id, java_string_hash, stalled_since
from replmon.state.root_cause import merge_root_alerts
from replmon.streaming.settings import monitor_config

from .test_monitor import T0, ev, run


# Expected values printed by Java 17 itself (String.hashCode, and Kafka's getFetcherId formula
# with Utils.abs) on this machine; see the commit that added this file.
@pytest.mark.parametrize(
    "s, expected",
    [
        ("", 0),  # the empty string
        ("a", 97),  # one char: its code
        ("orders", -1008770331),  # wraps past 2^31
        ("__consumer_offsets", -970371369),
        ("payments", 1382682413),  # positive after wrapping
    ],
)
def test_java_string_hash(s, expected):
    assert java_string_hash(s) == expected


@pytest.mark.parametrize(
    "topic, partition, fetchers, expected",
    [
        ("orders", 0, 1, 0),  # one fetcher: always 0
        ("orders", 0, 4, 1),
        ("orders", 1, 4, 0),  # +1 before abs of a negative: the id goes down
        ("orders", 7, 3, 1),
        ("__consumer_offsets", 0, 4, 3),
        ("__consumer_offsets", 49, 4, 2),
        ("payments", 7, 4, 2),
    ],
)
def test_fetcher_id(topic, partition, fetchers, expected):
    assert fetcher_id(topic, partition, fetchers) == expected


def test_fetcher_id_of_integer_min_is_zero():
    # Utils.abs(Integer.MIN_VALUE) is 0: pick a partition that makes 31*h + p == -2^31.
    h = java_string_hash("orders")
    wrapped = (31 * h) & 0xFFFFFFFF
    wrapped = wrapped - (1 << 32) if wrapped >= 1 << 31 else wrapped
    partition = -(1 << 31) - wrapped
    if partition >= 0:
        assert fetcher_id("orders", partition, 7) == 0


M = Member


@pytest.mark.parametrize(
    "members, now, registered, expected",
    [
        ([M("t-0", 1000, 9000), M("t-1", 1000, 9000)], 9000, True, 1000 + 3000 + 1),  # both stopped together
        ([M("t-0", 1000, 9000), M("t-1", 8000, 9000)], 9000, True, None),  # one still fetches: not the thread
        ([M("t-0", 1000, 9000)], 9000, True, None),  # one partition alone: a partition fault
        (
            [M("t-0", 1000, 9000), M("t-1", 1000, 9000)],
            9000,
            False,
            None,
        ),  # follower fenced: BrokerUnavailable instead
        (
            [M("t-0", 1000, 1000), M("t-1", 1000, 9000)],
            9000,
            True,
            None,
        ),  # t-0's leader silent: not the follower
        ([M("t-0", 1000, 9000), M("t-1", 1000, 9000)], 4000, True, None),  # exactly the stuck time: not yet
    ],
)
def test_stalled_since(members, now, registered, expected):
    assert stalled_since(members, now, 3000, registered) == expected


def stalled_fetcher_events(stop_ms=5000, resume_ms=30_000, end_ms=40_000):
    """Partitions t-0, t-1 led by 1 and t-2 led by 3, replicas {1,2,3}. Broker 2's fetcher for
    leader 1 (both partitions, one FETCH request) stops at stop_ms and resumes at resume_ms;
    its fetcher for leader 3 goes on."""
    events = []
    for p, leader in ((0, 1), (1, 1), (2, 3)):
        events.append(
            ev(
                "metadata",
                T0,
                topic="t",
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
        for p, leader in ((0, 1), (1, 1), (2, 3)):
            events.append(ev("append", t, topic="t", partition=p, leader_leo=leo))
            other = 3 if leader == 1 else 1
            events.append(
                ev("fetch", t + 1, topic="t", partition=p, replica=other, fetch_offset=leo, leader_leo=leo)
            )
            if leader == 3 or not (T0 + stop_ms <= t < T0 + resume_ms):
                events.append(
                    ev("fetch", t + 2, topic="t", partition=p, replica=2, fetch_offset=leo, leader_leo=leo)
                )
    return sorted(events, key=lambda e: e[1])


def test_one_alert_for_the_thread_and_its_partitions_point_at_it():
    cfg = monitor_config(replica_lag_time_max_ms=10_000, min_insync_replicas=2)
    _, alerts, _ = run(stalled_fetcher_events(), cfg)
    alerts = merge_root_alerts(alerts)
    roots = [a for a in alerts if a["name"] == "ReplicaFetcherStalled"]
    assert [(a["status"], a["broker"], a["leader"], a["fetcher_id"]) for a in roots] == [
        ("firing", 2, 1, 0),
        ("resolved", 2, 1, 0),
    ]
    firing = roots[0]
    assert firing["partitions"] == ["t-0", "t-1"] and firing["notify"]
    assert firing["started_ms"] == T0 + 4902 + 3000 + 1, "last fetch of the group + stuck time + 1"
    assert "broker 2's fetcher 0 for leader 1 is stalled: by 00:00:07," in firing["reason"]
    consequences = [
        a
        for a in alerts
        if a["status"] == "firing" and a["name"] in ("ReplicaOutOfSync", "UnderReplicated", "AtMinIsr")
    ]
    assert {a["subject"] for a in consequences} >= {"c1/t-0/2", "c1/t-1/2", "c1/t-0", "c1/t-1"}
    assert all(a["caused_by"] == firing["alert_id"] and not a["notify"] for a in consequences)
    assert not any(a["subject"].startswith("c1/t-2") for a in consequences), "the other fetcher is fine"
    assert [a["name"] for a in alerts if a["notify"]] == ["ReplicaFetcherStalled", "ReplicaFetcherStalled"]
    assert roots[1]["ts"] == T0 + 30_102, "resolved by the first fetch of the group again"


def test_buckets_each_holding_part_of_the_group_agree_on_one_alert():
    # 6 partitions led by 1; with 2 buckets each holds some of broker 2's fetcher for leader 1,
    # and one partition (u-0 or v-0) where broker 2 is seen fetching from leader 3.
    # One FETCH request serves the whole group, so every bucket sees the same last fetch time,
    # derives the same id, and the merged record lists every partition.
    events = []
    for p in range(6):
        events.append(
            ev(
                "metadata",
                T0,
                topic="t",
                partition=p,
                leader=1,
                leader_epoch=1,
                replicas=(1, 2, 3),
                isr=(1, 2, 3),
                leader_leo=0,
                hw=0,
                replica_lag_time_max_ms=10_000,
            )
        )
    for topic in ("u", "v"):  # broker 2 keeps fetching these from leader 3 (one per bucket)
        events.append(
            ev(
                "metadata",
                T0,
                topic=topic,
                partition=0,
                leader=3,
                leader_epoch=1,
                replicas=(3, 2, 1),
                isr=(3, 2, 1),
                leader_leo=0,
                hw=0,
                replica_lag_time_max_ms=10_000,
            )
        )
    leo = 0
    for t in range(T0 + 100, T0 + 20_000, 200):
        leo += 10
        for topic, parts, leader in (("t", range(6), 1), ("u", range(1), 3), ("v", range(1), 3)):
            for p in parts:
                events.append(ev("append", t, topic=topic, partition=p, leader_leo=leo))
                for r in (2, 3) if leader == 1 else (1, 2):
                    if r == 2 and leader == 1 and t >= T0 + 5000:
                        continue  # broker 2's fetcher for leader 1 stops
                    events.append(
                        ev(
                            "fetch",
                            t + 2,
                            topic=topic,
                            partition=p,
                            replica=r,
                            fetch_offset=leo,
                            leader_leo=leo,
                        )
                    )
    events.sort(key=lambda e: e[1])
    cfg = monitor_config(replica_lag_time_max_ms=10_000)

    def stalls(n):
        buckets = [Bucket(i, n) for i in range(n)]
        alerts = []
        for b in buckets:
            mine = [
                e
                for e in events
                if e[TYPE] in ("broker", "heartbeat")
                or zlib.crc32(f"{e[TOPIC]}/{e[PARTITION]}".encode()) % n == b.bucket_id
            ]
            b.process(mine, cfg, alerts, [])
            b.advance(cfg, alerts)
        merged = merge_root_alerts(alerts)
        return [
            (a["alert_id"], a["status"], a["partitions"])
            for a in merged
            if a["name"] == "ReplicaFetcherStalled"
        ]

    one, two = stalls(1), stalls(2)
    assert one == [(one[0][0], "firing", [f"t-{p}" for p in range(6)])]
    assert two == one, "same id and partitions however the group is spread over buckets"


def test_an_ongoing_stall_survives_the_state_format():
    from replmon.state.codec import decode, encode

    cfg = monitor_config(replica_lag_time_max_ms=10_000)
    bucket, alerts, _ = run([e for e in stalled_fetcher_events() if e[1] < T0 + 20_000], cfg)
    root = bucket.clusters["c1"].fetcher_roots[("fetcher", 2, 1, 0)]
    back = decode(encode(bucket), bucket_id=0, buckets=1, cfg=cfg)
    assert back.clusters["c1"].fetcher_roots == bucket.clusters["c1"].fetcher_roots
    assert root.alert_id == next(a["alert_id"] for a in alerts if a["name"] == "ReplicaFetcherStalled")


def test_records_are_never_changed_once_emitted_and_adopted_ones_are_replaced():
    # Fed in micro-batches of 1 s into one list (as a replay does), the stall is found after
    # an IsrExitImminent of its group fired in an earlier call: that record must name it in the
    # list, as a new record; every object emitted stays as it was.
    import json

    cfg = monitor_config(replica_lag_time_max_ms=10_000, min_insync_replicas=2)
    events = stalled_fetcher_events()
    bucket, alerts = Bucket(0, 1), []
    emitted = []  # every record object as it left a call, with its JSON then
    start = 0
    for end in range(T0 + 1000, T0 + 41_000, 1000):
        batch = [e for e in events if start <= e[1] < end]
        start = end
        n = len(alerts)
        bucket.process(batch, cfg, alerts, [])
        bucket.advance(cfg, alerts)
        emitted += [(a, json.dumps(a, sort_keys=True)) for a in alerts[n:]]
    changed = [(a["name"], a["subject"]) for a, then in emitted if json.dumps(a, sort_keys=True) != then]
    assert changed == [], "a record was changed after it was emitted"
    root = next(a for a in alerts if a["name"] == "ReplicaFetcherStalled")
    replaced = [a for (old, _), a in zip(emitted, alerts, strict=True) if a is not old]
    # t-1's warning fired before the stall was found (t-0's went with its own ReplicaOutOfSync,
    # in the call that found it)
    assert [(a["name"], a["subject"]) for a in replaced] == [("IsrExitImminent", "c1/t-1/2")]
    assert all(a["caused_by"] == root["alert_id"] and not a["root_cause"] for a in replaced)
