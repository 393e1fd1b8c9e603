"""The monitor layer without Spark: alert times follow from Kafka's rules, each episode fires
once and resolves once, and ids are stable. Expected times are derived in each row's reason."""

from __future__ import annotations

import pytest

from replmon.state.bucket import Bucket
from replmon.state.events import EVENT_FIELDS
from replmon.streaming.settings import monitor_config

T0 = 1_767_225_600_000
L = 10_000


def ev(type, ts, **fields):
    row = dict.fromkeys(EVENT_FIELDS)
    row.update(type=type, ts=ts, cluster="c1", raw="{}", **fields)
    if type in ("fetch", "append", "metadata"):
        row.setdefault("topic", "t")
        row["topic"] = row["topic"] or "t"
        row["partition"] = row["partition"] or 0
    return tuple(row[f] for f in EVENT_FIELDS)


def meta(ts, isr=(1, 2, 3), epoch=1, leader=1, **kw):
    return ev(
        "metadata",
        ts,
        leader=leader,
        leader_epoch=epoch,
        replicas=(1, 2, 3),
        isr=isr,
        leader_leo=0,
        hw=0,
        replica_lag_time_max_ms=L,
        **kw,
    )


def steady(start, end, stop=None, leo0=0, step=100, per_step=10, slow=None):
    """Appends every `step` ms; followers 2 and 3 fetch right after at the LEO. Follower 3 stops
    fetching at `stop`; with `slow`, follower 3 fetches `slow` messages behind the LEO."""
    events, leo = [], leo0
    for t in range(start, end, step):
        leo += per_step
        events.append(ev("append", t, leader_leo=leo))
        events.append(ev("fetch", t + 1, replica=2, fetch_offset=leo, leader_leo=leo))
        if stop is None or t < stop:
            off = leo - slow if slow else leo
            events.append(ev("fetch", t + 2, replica=3, fetch_offset=off, leader_leo=leo))
    return events


def run(events, cfg=None, advance=True):
    cfg = cfg or monitor_config(replica_lag_time_max_ms=L)
    bucket, alerts, quarantine = Bucket(0, 1), [], []
    bucket.process(events, cfg, alerts, quarantine)
    if advance:
        bucket.advance(cfg, alerts)
    return bucket, alerts, quarantine


def transitions(alerts, name):
    return [(a["status"], a["ts"] - T0, a["subject"]) for a in alerts if a["name"] == name]


def test_stuck_follower_out_of_sync_exactly_after_the_limit():
    # Last caught-up fetch of replica 3 is at +4902 (step 4900, offset 2), so isCaughtUp fails
    # at lcu + L + 1 = +14903; the first isr-expiration run after that (every L/2 = 5 s from
    # the epoch) is +15000, which shrinks the ISR: UnderReplicated at +15000.
    events = [meta(T0), *steady(T0 + 100, T0 + 40_000, stop=T0 + 5000)]
    _, alerts, _ = run(events)
    assert transitions(alerts, "ReplicaOutOfSync") == [("firing", 14903, "c1/t-0/3")]
    assert transitions(alerts, "IsrExitImminent") == [
        ("firing", 9903, "c1/t-0/3"),
        ("resolved", 14903, "c1/t-0/3"),
    ]
    assert transitions(alerts, "UnderReplicated") == [("firing", 15000, "c1/t-0")]


def test_bursty_producer_does_not_churn_the_isr():
    # Bursts of 50,000 messages (far above 0.8's 4000-message rule), followers reach the LEO
    # within a second each time: the time rule never fires.
    events = [meta(T0)]
    leo = 0
    for k in range(20):
        t = T0 + 1000 + k * 3000
        leo += 50_000
        events.append(ev("append", t, leader_leo=leo))
        for r in (2, 3):
            events.append(ev("fetch", t + 5, replica=r, fetch_offset=leo - 50_000, leader_leo=leo))
            events.append(ev("fetch", t + 800, replica=r, fetch_offset=leo, leader_leo=leo))
    _, alerts, _ = run(events)
    assert [a for a in alerts if a["name"] != "TelemetryMissing"] == []


def test_slow_follower_in_isr_stalls_the_high_watermark():
    # Replica 3 fetches 5 messages behind, so the HW (min LEO over the ISR) trails the LEO;
    # each fetch raises the HW though, so it is not stalled.  Then replica 3 stops: the HW stays
    # at its last LEO while appends continue, and after hw_stall_ms (10 s) of no HW movement
    # the HighWatermarkStalled alert fires, before the follower is dropped (L = 30 s here).
    cfg = monitor_config(replica_lag_time_max_ms=30_000, hw_stall_ms=10_000)
    events = [
        ev(
            "metadata",
            T0,
            leader=1,
            leader_epoch=1,
            replicas=(1, 2, 3),
            isr=(1, 2, 3),
            leader_leo=0,
            hw=0,
            replica_lag_time_max_ms=30_000,
        )
    ]
    events += steady(T0 + 100, T0 + 30_000, stop=T0 + 5000)
    _, alerts, _ = run(events, cfg)
    stalled = transitions(alerts, "HighWatermarkStalled")
    # replica 3's last fetch at +4902 moved the HW to its LEO; the next append at +5000 puts the
    # HW behind the LEO; stalled strictly after 10 s of that: +15001.
    assert stalled == [("firing", 15001, "c1/t-0")]
    fired = next(a for a in alerts if a["name"] == "HighWatermarkStalled")
    assert "[3]" in fired["reason"]


def test_each_episode_fires_once_and_resolves_once_with_stable_ids():
    # Replica 3 stops for 20 s then resumes at the LEO: one out-of-sync episode, then it
    # rejoins the ISR (LEO >= HW on its first fetch back) and everything resolves.
    events = [meta(T0), *steady(T0 + 100, T0 + 5000), *steady(T0 + 5000, T0 + 25_000, stop=T0)]
    events += steady(T0 + 25_000, T0 + 40_000, leo0=2500)
    _, alerts, _ = run(events)
    _, again, _ = run(events)
    assert alerts == again  # same events, same transitions, same ids
    for name in {a["name"] for a in alerts}:
        rows = [a for a in alerts if a["name"] == name]
        ids = {a["alert_id"] for a in rows}
        for aid in ids:
            states = [a["status"] for a in rows if a["alert_id"] == aid]
            assert states == ["firing", "resolved"], (name, states)


@pytest.mark.parametrize(
    "rule_set, isr_after_report, under_replicated",
    [
        # Today's rule is time only: replica 3 was caught up at the election (T0) and L = 10 s
        # has not passed by +8 s, so it is caught up and never leaves the ISR.
        ("current", (1, 2, 3), []),
        # 0.8's rule also counts messages: 600 > 500 behind, so the first isr-expiration run
        # (+5 s, every L/2 from the epoch) shrinks the ISR. Replica 3 has stopped fetching by
        # then (no fetch can bring it back). The same-epoch report at +6 s predates the shrink,
        # and replica 3 still lags by 0.8's rule: it stays out, one UnderReplicated episode
        # (re-admitted by today's caught-up test instead, it resolved at +6 s).
        ("v0_8", (1, 2), [("firing", 5000, "c1/t-0")]),
    ],
)
def test_a_cluster_report_keeps_out_whom_the_rule_set_says_is_out_of_sync(
    rule_set, isr_after_report, under_replicated
):
    cfg = monitor_config(replica_lag_time_max_ms=L, rule_set=rule_set, replica_lag_max_messages=500)
    events = [meta(T0), *steady(T0 + 100, T0 + 8000, leo0=1000, slow=600, stop=T0 + 5000)]
    events.append(meta(T0 + 6000, isr=(1, 2, 3)))
    events.sort(key=lambda e: e[EVENT_FIELDS.index("ts")])
    bucket, alerts, _ = run(events, cfg)
    assert bucket.partitions[("c1", "t", 0)].leader.isr == isr_after_report
    assert transitions(alerts, "UnderReplicated") == under_replicated


def test_isr_flapping_reported_once():
    # Replica 3 goes silent for 12 s (> L) three times: it leaves the ISR three times within
    # the 10-minute window, which is reported once, not per flap.
    events, leo, t = [meta(T0)], 0, T0 + 100
    for _cycle in range(3):
        part = steady(t, t + 5000, leo0=leo)
        leo += 500
        gap = steady(t + 5000, t + 20_000, stop=t + 5000, leo0=leo)
        leo += 1500
        events += part + gap
        t += 20_000
    events += steady(t, t + 5000, leo0=leo)
    _, alerts, _ = run(events)
    flaps = transitions(alerts, "IsrFlapping")
    assert [s for s, _, _ in flaps] == ["firing"]
    assert len(transitions(alerts, "ReplicaOutOfSync")) == 6


def test_caught_up_replica_taken_out_by_reports_is_not_flapping():
    # The cluster's reports take replica 3 out of the ISR three times (+5 s, +25 s, +45 s)
    # while it fetches at the leader's LEO all along: each report predates the rejoin replmon
    # derives from its next fetch (the metadata poll lags the leader). Replica 3 never lagged:
    # it left the ISR on no lag rule, so no IsrFlapping, although replmon's ISR changed 3 times.
    events = [meta(T0)]
    for cycle in range(3):
        start = T0 + 100 + cycle * 20_000
        events += steady(start, start + 20_000, leo0=cycle * 2000)
        events.append(meta(start + 4_950, isr=(1, 2)))
    events.sort(key=lambda e: e[EVENT_FIELDS.index("ts")])
    bucket, alerts, _ = run(events)
    watch = bucket.partitions[("c1", "t", 0)]
    assert watch.leader.isr == (1, 2, 3)  # rejoined each time
    assert transitions(alerts, "IsrFlapping") == []


def test_lagging_exits_still_count_when_reports_also_take_the_replica_out():
    # Replica 3 really lags three times (silent 15 s > L each cycle) and the cluster's reports
    # say so too: three lag exits within the window, one IsrFlapping.
    events = [meta(T0)]
    t, leo = T0 + 100, 0
    for _cycle in range(3):
        events += steady(t, t + 5000, leo0=leo)
        leo += 500
        events += steady(t + 5000, t + 20_000, stop=t + 5000, leo0=leo)
        leo += 1500
        events.append(meta(t + 16_000, isr=(1, 2)))
        t += 20_000
    events += steady(t, t + 5000, leo0=leo)
    events.sort(key=lambda e: e[EVENT_FIELDS.index("ts")])
    _, alerts, _ = run(events)
    assert [s for s, _, _ in transitions(alerts, "IsrFlapping")] == ["firing"]


def test_silent_partition_found_out_of_sync_from_the_cluster_clock():
    # Replica 3 stops fetching at +3 s while appends go on to +5 s; then the partition gets no
    # events at all, but cluster heartbeats continue. Replica 3's last caught-up time is +2902
    # and its LEO is behind, so it is out of sync at +12903 although no event of the partition
    # comes after +5 s. Replica 2 is at the leader LEO: exempt (KAFKA-7152), never out of sync.
    # The partition's last event is at +4901: TelemetryMissing after 30 s of silence, +34902.
    events = [meta(T0), *steady(T0 + 100, T0 + 5000, stop=T0 + 3000)]
    events += [ev("heartbeat", T0 + s * 1000) for s in range(5, 60)]
    _, alerts, _ = run(events)
    assert transitions(alerts, "ReplicaOutOfSync") == [("firing", 12903, "c1/t-0/3")]
    assert ("firing", 34902, "c1/t-0") in transitions(alerts, "TelemetryMissing")


def test_unassigned_replica_fetch_is_quarantined_and_changes_nothing():
    events = [meta(T0), ev("fetch", T0 + 10, replica=9, fetch_offset=0, leader_leo=0)]
    bucket, _, quarantine = run(events)
    assert len(quarantine) == 1 and "unassigned" in quarantine[0]["reason"]
    assert 9 not in bucket.partitions[("c1", "t", 0)].leader.followers


def test_late_event_is_quarantined_not_applied():
    events = [meta(T0), *steady(T0 + 100, T0 + 5000)]
    events.append(ev("fetch", T0 + 1000, replica=2, fetch_offset=0, leader_leo=0))
    _, _, quarantine = run(events)
    assert len(quarantine) == 1 and quarantine[0]["reason"].startswith("late")


def test_a_replaced_leaders_held_fetch_is_not_late():
    # Leader 1 stops at +5 s holding follower 2's fetch read at +4.9 s (epoch 1); the controller
    # moves the leadership to 2 (epoch 2) and 2's follower 3 fetches on. When 1 runs again at
    # +20 s it logs the held fetch, 15 s behind its partition: a replaced leader's view, which
    # the new leader never had. Neither applied nor late. A held append that does not grow the
    # LEO changes nothing either; a fetch of the current epoch that far behind is still late.
    events = [meta(T0), *steady(T0 + 100, T0 + 5000)]
    events.append(meta(T0 + 6000, isr=(2, 3), epoch=2, leader=2))
    events += [
        ev("fetch", t, replica=3, fetch_offset=490, leader_leo=490, leader_epoch=2)
        for t in range(T0 + 6100, T0 + 20_000, 500)
    ]
    held = ev("fetch", T0 + 4900, replica=2, fetch_offset=490, leader_leo=490, leader_epoch=1)
    bucket, _, quarantine = run([*events, held, ev("append", T0 + 4950, leader_leo=480)])
    assert quarantine == []
    watch = bucket.partitions[("c1", "t", 0)]
    assert watch.leader.leader == 2 and 2 not in watch.leader.followers  # nothing of 1's view
    current = ev("fetch", T0 + 6000, replica=3, fetch_offset=490, leader_leo=490, leader_epoch=2)
    _, _, quarantine = run([*events, current])
    assert [q["reason"][:5] for q in quarantine] == ["late:"]


@pytest.mark.parametrize(
    "silence_s, fires",
    [
        (29, False),  # 29 s without events: under the 30 s telemetry gap
        (45, True),  # 45 s: over it
    ],
    ids=["under the gap", "over the gap"],
)
def test_cluster_telemetry_missing(silence_s, fires):
    # Cluster c1 goes silent at +1 s; cluster c2 keeps the global clock moving.
    events = [ev("heartbeat", T0), ev("heartbeat", T0 + 1000)]
    events += [
        (*ev("heartbeat", T0 + 1000 + s * 1000)[:2], "c2", *ev("heartbeat", 0)[3:])
        for s in range(1, silence_s + 1)
    ]
    _, alerts, _ = run(events)
    got = [a for a in alerts if a["name"] == "TelemetryMissing" and a["subject"] == "c1"]
    assert bool(got) == fires
    if fires:
        assert got[0]["ts"] == T0 + 1000 + 30_000 + 1


def test_cluster_telemetry_missing_says_when_events_come_back():
    # c1 is silent from +1 s to +46 s (c2 keeps the global clock moving), then beats again, in a
    # later micro-batch. The resolution says that events came back (the close template), not the
    # opening text again.
    def c2(s):
        return (*ev("heartbeat", T0 + s * 1000)[:2], "c2", *ev("heartbeat", 0)[3:])

    cfg = monitor_config(replica_lag_time_max_ms=L)
    bucket, alerts = Bucket(0, 1), []
    silent = [ev("heartbeat", T0), ev("heartbeat", T0 + 1000), *(c2(s) for s in range(2, 46))]
    back = [ev("heartbeat", T0 + 46_000), *(c2(s) for s in range(47, 60))]
    for batch in (silent, back):
        bucket.process(batch, cfg, alerts, [])
        bucket.advance(cfg, alerts)
    got = [
        (a["status"], a["reason"]) for a in alerts if a["name"] == "TelemetryMissing" and a["subject"] == "c1"
    ]
    assert got == [
        ("firing", "no events from cluster c1 since 00:00:01 (more than 30 s)"),
        ("resolved", "events from cluster c1 again"),
    ]


def test_alerts_of_a_follower_that_becomes_leader_or_leaves_are_resolved():
    # Replica 3 falls behind (imminent fires at +9903, see the first test); at +12000 a
    # same-epoch metadata event drops it from the assignment: its episodes end then.
    events = [meta(T0), *steady(T0 + 100, T0 + 12_000, stop=T0 + 5000)]
    events.append(
        ev(
            "metadata",
            T0 + 12_000,
            leader=1,
            leader_epoch=1,
            replicas=(1, 2),
            isr=(1, 2),
            leader_leo=None,
            hw=None,
        )
    )
    _, alerts, _ = run(events)
    mine = transitions(alerts, "IsrExitImminent")
    assert mine == [("firing", 9903, "c1/t-0/3"), ("resolved", 12000, "c1/t-0/3")]


def test_reason_of_a_follower_that_never_caught_up_has_no_epoch_sized_lag():
    # Broker 2 becomes leader (epoch 2) with ISR {1, 2}: replica 3 was in the ISR before, and
    # the new leader sets its lcu to 0 ("never", docs/kafka-rules.md §1.4). Its ReplicaOutOfSync reason must
    # say so, not report a lag measured from 1970.
    events = [meta(T0), *steady(T0 + 100, T0 + 2000)]
    events.append(
        ev(
            "metadata",
            T0 + 2000,
            leader=2,
            leader_epoch=2,
            replicas=(1, 2, 3),
            isr=(1, 2),
            leader_leo=200,
            hw=200,
            replica_lag_time_max_ms=L,
        )
    )
    _, alerts, _ = run(events)
    fired = [a for a in alerts if a["subject"] == "c1/t-0/3" and a["status"] == "firing"]
    assert [a["name"] for a in fired] == ["ReplicaOutOfSync"]
    assert "never caught up since the election" in fired[0]["reason"]
    assert "1767" not in fired[0]["reason"]


def _statuses_per_second(events, cfg, seconds):
    """Feed `events` a second at a time, as micro-batches do; the partition statuses each gives."""
    bucket, alerts, quarantine, out = Bucket(0, 1), [], [], []
    for s in range(seconds):
        lo, hi = T0 + s * 1000, T0 + (s + 1) * 1000
        bucket.process([e for e in events if lo <= e[1] < hi], cfg, alerts, quarantine)
        bucket.advance(cfg, alerts)
        partitions: list = []
        bucket.statuses(cfg, partitions, [])
        out.append(partitions)
    return out


def test_a_healthy_unchanged_partition_repeats_its_status_only_every_refresh():
    # No appends, both followers fetching at the LEO: every status would say the same but for
    # its times. With status_refresh_ms 10 s: the first one, then one each 10 s of event time.
    events = [meta(T0), *steady(T0 + 100, T0 + 40_000, per_step=0)]
    cfg = monitor_config(replica_lag_time_max_ms=L, status_refresh_ms=10_000)
    sent = [s for s, batch in enumerate(_statuses_per_second(events, cfg, 40)) if batch]
    assert sent == [0, 10, 20, 30], sent
    every = monitor_config(replica_lag_time_max_ms=L, status_refresh_ms=0)
    assert all(_statuses_per_second(events, every, 40)[1:])  # off: one each status_interval (1 s)


def test_news_and_any_unhealthy_partition_still_go_out_each_interval():
    # Appends every 100 ms, both followers at the LEO right after each: busy but healthy, its
    # moving offsets are no news (series points: tests/state/test_status_points.py), so its
    # status waits for the refresh (+0, +10 s). Replica 3 stops fetching at +20 s: from +21 s it
    # is not healthy (not fetching), and a status goes out each second, as with the refresh off.
    events = [meta(T0), *steady(T0 + 100, T0 + 40_000, stop=T0 + 20_000)]
    cfg = monitor_config(replica_lag_time_max_ms=L, status_refresh_ms=10_000)
    off = monitor_config(replica_lag_time_max_ms=L, status_refresh_ms=0)

    def sent(evs, c):
        return [s for s, batch in enumerate(_statuses_per_second(evs, c, 40)) if batch]

    assert [s for s in sent(events, cfg) if s < 21] == [0, 10]
    assert [s for s in sent(events, cfg) if s >= 21] == list(range(21, 40))
    assert len(sent(events, off)) >= 35  # off: one each status_interval (1 s), as ever
    idle = [meta(T0), *steady(T0 + 100, T0 + 20_000, per_step=0, stop=T0 + 12_000)]
    idle += [
        ev("fetch", t + 1, replica=2, fetch_offset=0, leader_leo=0)
        for t in range(T0 + 20_000, T0 + 40_000, 100)
    ]
    # idle, replica 3 silent from +12 s: caught up at the LEO still (KAFKA-7152), but stuck:
    # not healthy, so a status each interval again once it is (as with the refresh off)
    late = sent(idle, cfg)
    assert [s for s in late if s < 10] == [0]
    assert [s for s in late if s >= 25] == [s for s in sent(idle, off) if s >= 25]
