"""The cluster step (state/cluster.py) on hand-made bucket outputs: each case says why the
expected decision is right. Times are offsets from T; silence after 3 s, group_wait 5 s,
decisions wait 1 s of activity past them (slack)."""

from __future__ import annotations

import json

import pytest

from replmon.state.alerts import alert_id
from replmon.state.cluster import ClusterConfig, ClusterStep

T = 1_000_000
CFG = ClusterConfig(silent_after_ms=3000, group_wait_ms=5000, slack_ms=1000, lag_share=0.5)


def act(bucket, runs, cluster="c"):
    """One bucket's activity report: broker -> [(start, end), ...] (offsets from T)."""
    return {
        "cluster": cluster,
        "bucket": bucket,
        "brokers": {
            str(b): {"segments": [[T + s, T + e] for s, e in r], "led": 1, "replicas": 3}
            for b, r in runs.items()
        },
    }


def alert(
    name,
    at,
    *,
    status="firing",
    topic="t",
    partition=0,
    replica=None,
    leader=1,
    cause="lag",
    caused_by=None,
    started=None,
    brokers=None,
    severity="warning",
    aid=None,
):
    subject = f"c/{topic}-{partition}" + (f"/{replica}" if replica is not None else "")
    started = T + (at if started is None else started)
    return {
        "alert_id": aid or alert_id(name, subject, started),
        "name": name,
        "status": status,
        "severity": severity,
        "cluster": "c",
        "topic": topic,
        "partition": partition,
        "replica": replica,
        "broker": replica,
        "subject": subject,
        "started_ms": started,
        "ts": T + at,
        "reason": f"{name} {subject}",
        "cause": cause,
        "caused_by": caused_by,
        "root_cause": caused_by is None,
        "notify": True,
        "silenced_by": [],
        "leader": leader,
        "brokers": brokers if brokers is not None else ([replica] if replica is not None else []),
    }


def steady(brokers, until, bucket=0):
    return act(bucket, {b: [(0, until)] for b in brokers})


def test_silence_is_the_gap_in_every_buckets_activity_together():
    """Broker 3 is active in bucket 0 until +10 s and in bucket 1 until +12 s: the cluster last
    heard of it at +12 s, so it is silent from +12 s + 3 s + 1 ms, whatever bucket 0 alone says;
    it is heard again at +25 s (bucket 1), which resolves the one episode."""
    step = ClusterStep(CFG)
    out = step.step(
        [], [act(0, {1: [(0, 40_000)], 3: [(0, 10_000)]}), act(1, {3: [(0, 12_000), (25_000, 40_000)]})]
    )
    roots = [(a["status"], a["broker"], a["started_ms"] - T, a["ts"] - T, a["cause"]) for a in out]
    assert roots == [
        (
            "firing",
            3,
            15_001,
            15_001,
            "broker_silent",
        ),  # released at +20,001 (group_wait), stamped with its start
        ("resolved", 3, 15_001, 25_000, "broker_silent"),
    ]
    assert out[0]["notify"] and out[1]["notify"] and out[0]["severity"] == "critical"


def test_a_gap_shorter_than_the_limit_is_no_silence():
    step = ClusterStep(CFG)
    out = step.step([], [act(0, {3: [(0, 10_000)]}), act(1, {3: [(12_500, 40_000)]}), steady([1], 40_000, 2)])
    assert out == [], "2.5 s apart in different buckets: the broker never went quiet for 3 s"


def test_followers_of_a_silent_leader_are_its_consequences_and_do_not_page():
    """Leader 3 goes silent at +10 s (episode from +13,001). Its follower 2 looks out of sync at
    +20 s on a partition it leads: that is the leader's doing (cause leader_unavailable), and
    the UnderReplicated that names it follows it."""
    step = ClusterStep(CFG)
    ros = alert("ReplicaOutOfSync", 20_000, replica=2, leader=3)
    urp = alert("UnderReplicated", 20_000, leader=3, caused_by=ros["alert_id"], brokers=[2], cause="replicas")
    out = step.step([ros, urp], [steady([1, 2], 40_000), act(1, {3: [(0, 10_000)]})])
    by_name = {a["name"]: a for a in out if a["status"] == "firing"}
    root = by_name["BrokerUnavailable"]
    assert (by_name["ReplicaOutOfSync"]["cause"], by_name["ReplicaOutOfSync"]["caused_by"]) == (
        "leader_unavailable",
        root["alert_id"],
    )
    assert by_name["UnderReplicated"]["caused_by"] == root["alert_id"]
    assert [a["name"] for a in out if a["notify"]] == ["BrokerUnavailable"]


def test_an_alert_that_starts_before_its_root_is_found_waits_group_wait_and_is_claimed():
    """Broker 3's replica is out of sync at +12 s, and broker 3 is decided silent at +13,001
    (3 s after its last activity at +10 s): within group_wait of the alert, so the root claims
    it; nothing about the replica is notified."""
    step = ClusterStep(CFG)
    ros = alert("ReplicaOutOfSync", 12_000, replica=3, leader=1)
    out = step.step([ros], [steady([1, 2], 40_000), act(1, {3: [(0, 10_000)]})])
    fired = {a["name"]: a for a in out if a["status"] == "firing"}
    assert fired["ReplicaOutOfSync"]["caused_by"] == fired["BrokerUnavailable"]["alert_id"]
    assert fired["ReplicaOutOfSync"]["cause"] == "broker_silent"
    assert not fired["ReplicaOutOfSync"]["notify"]


def test_a_lag_of_its_own_still_pages_after_group_wait():
    step = ClusterStep(CFG)
    ros = alert("ReplicaOutOfSync", 12_000, replica=3, leader=1)
    out = step.step([ros], [steady([1, 2, 3], 40_000)])
    assert [(a["name"], a["caused_by"], a["notify"]) for a in out] == [("ReplicaOutOfSync", None, True)]


def test_silent_then_fenced_is_one_episode_updated_not_paged_twice():
    """The controller fences broker 3 at +20 s, after replmon found it silent at +13,001 (and
    notified it at +18,001): the same alert (same id) moves to cause broker_fenced on an update,
    which is not notified. (A fence within group_wait would be the cause of the first notification.)"""
    step = ClusterStep(CFG)
    share = alert(
        "BrokerUnavailable", 20_000, topic=None, replica=None, cause="broker_fenced", severity="critical"
    )
    share.update(subject="c/broker/3", broker=3, partition=None, topic=None, aid="bucket-share")
    out = step.step([share], [steady([1, 2], 40_000), act(1, {3: [(0, 10_000)]})])
    assert [(a["status"], a["cause"], a["notify"]) for a in out] == [
        ("firing", "broker_silent", True),
        ("updated", "broker_fenced", False),
    ]
    assert len({a["alert_id"] for a in out}) == 1


def test_a_controlled_shutdown_is_a_warning_but_what_it_takes_below_min_isr_pages():
    step = ClusterStep(CFG)
    share = alert("BrokerUnavailable", 10_000, cause="broker_shutting_down", severity="critical")
    share.update(subject="c/broker/3", broker=3, partition=None, topic=None, replica=None, aid="share")
    under = alert(
        "UnderMinIsr", 11_000, leader=1, brokers=[3], cause="min_isr", severity="critical", caused_by="share"
    )
    out = step.step([share, under], [steady([1, 2, 3], 40_000)])
    notified = [(a["name"], a["severity"]) for a in out if a["notify"]]
    assert notified == [("BrokerUnavailable", "warning"), ("UnderMinIsr", "critical")]


def test_a_broker_lagging_on_several_partitions_is_one_notification():
    step = ClusterStep(CFG)
    a = alert("ReplicaOutOfSync", 12_000, partition=0, replica=3, leader=1)
    b = alert("ReplicaOutOfSync", 12_500, partition=1, replica=3, leader=2)
    c = alert("ReplicaOutOfSync", 12_600, partition=2, replica=2, leader=1)
    out = step.step([a, b, c], [steady([1, 2, 3], 40_000)])
    assert [(x["partition"], x["notify"], x["caused_by"]) for x in out] == [
        (0, True, None),
        (1, False, a["alert_id"]),  # the same follower broker: the first one stands for it
        (2, True, None),  # another broker: its own notification
    ]


def test_an_alert_over_within_group_wait_is_recorded_not_notified():
    step = ClusterStep(CFG)
    fired = alert("ReplicaOutOfSync", 12_000, replica=3)
    over = alert(
        "ReplicaOutOfSync", 12_050, replica=3, status="resolved", started=12_000, aid=fired["alert_id"]
    )
    out = step.step([fired, over], [steady([1, 2, 3], 40_000)])
    assert [(x["status"], x["notify"]) for x in out] == [("firing", False), ("resolved", False)]


@pytest.mark.parametrize("cut", [False, True])
def test_an_alert_just_after_an_outage_ended_is_claimed_however_the_batches_are_cut(cut):
    """Leader 3 silent from +13,001 ms, heard again at +25 s. Its follower 2 goes out of sync at
    +29 s, within group_wait of the end (a resumed leader shrinks its followers): the outage's
    doing, released at +34 s. One batch, or a first one whose time (+32 s) is past the end +
    group_wait but before the release: the same decision (seen in the judge: the ended outage
    was forgotten at +30 s, so such an alert was its own root)."""
    ros = alert("ReplicaOutOfSync", 29_000, replica=2, leader=3, cause="controller")
    three = {3: [(0, 10_000), (25_000, 60_000)]}
    step = ClusterStep(CFG)
    if cut:
        out = step.step([ros], [steady([1, 2], 33_000), act(1, {3: [(0, 10_000), (25_000, 33_000)]})])
        out += step.step([], [steady([1, 2], 60_000), act(1, three)])
    else:
        out = step.step([ros], [steady([1, 2], 60_000), act(1, three)])
    root = next(a for a in out if a["name"] == "BrokerUnavailable")
    got = next(a for a in out if a["name"] == "ReplicaOutOfSync")
    assert (got["caused_by"], got["notify"]) == (root["alert_id"], False)
    assert [a["name"] for a in out if a["notify"]] == ["BrokerUnavailable", "BrokerUnavailable"]


def test_a_lag_recorded_not_notified_does_not_stand_for_the_brokers_next_lag():
    """Replica 3 out of sync at +12 s and back 50 ms later: recorded, not notified. At +60 s
    (within REGROUP_MS of that) broker 3 falls behind for real on two partitions: on-call hears
    of it once, from the first of them; the quiet one explains nothing (seen in CI: the judge's
    slow follower, 2 minutes after a 0.2 s controller removal of the same replica, notified
    nothing)."""
    step = ClusterStep(CFG)
    blip = alert("ReplicaOutOfSync", 12_000, replica=3, cause="controller")
    back = alert(
        "ReplicaOutOfSync", 12_050, replica=3, status="resolved", started=12_000, aid=blip["alert_id"]
    )
    a = alert("ReplicaOutOfSync", 60_000, partition=1, replica=3, leader=2)
    b = alert("ReplicaOutOfSync", 60_100, partition=2, replica=3, leader=1)
    out = step.step([blip, back], [steady([1, 2, 3], 40_000)])
    out += step.step([a, b], [steady([1, 2, 3], 90_000)])
    assert [(x["partition"], x["status"], x["notify"], x["caused_by"]) for x in out] == [
        (0, "firing", False, None),
        (0, "resolved", False, None),
        (1, "firing", True, None),
        (2, "firing", False, a["alert_id"]),
    ]


def test_a_notified_lag_still_stands_for_the_brokers_next_lag_within_regroup():
    """The policy the quiet case must not break: a notified lag of broker 3 that resolved at +20 s
    stands for its next lag at +60 s (Alertmanager's group_interval, REGROUP_MS)."""
    step = ClusterStep(CFG)
    first = alert("ReplicaOutOfSync", 12_000, replica=3)
    over = alert(
        "ReplicaOutOfSync", 20_000, replica=3, status="resolved", started=12_000, aid=first["alert_id"]
    )
    again = alert("ReplicaOutOfSync", 60_000, partition=1, replica=3, leader=2)
    out = step.step([first, over], [steady([1, 2, 3], 40_000)])
    out += step.step([again], [steady([1, 2, 3], 90_000)])
    assert [(x["partition"], x["status"], x["notify"], x["caused_by"]) for x in out] == [
        (0, "firing", True, None),
        (0, "resolved", True, None),
        (1, "firing", False, first["alert_id"]),
    ]


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_state_saved_and_restored_between_batches_decides_the_same(cut):
    ros = alert("ReplicaOutOfSync", 20_000, replica=2, leader=3)
    batches = [
        ([], [steady([1, 2], 14_000), act(1, {3: [(0, 10_000)]})]),
        ([ros], [steady([1, 2], 22_000)]),
        ([], [act(0, {1: [(22_000, 40_000)], 2: [(22_000, 40_000)]}), act(1, {3: [(30_000, 40_000)]})]),
    ]
    whole = ClusterStep(CFG)
    expected = [r for alerts, activity in batches for r in whole.step(list(alerts), activity)]
    step, got = ClusterStep(CFG), []
    for i, (alerts, activity) in enumerate(batches):
        if i == cut - 1:
            step = ClusterStep.from_doc(CFG, step.to_doc())
        got += step.step([dict(a) for a in alerts], activity)
    assert got == expected and any(r["name"] == "BrokerUnavailable" for r in got)


def test_the_state_document_is_the_same_for_the_same_facts():
    """The step's state names an outage by its alert's id, so two steps fed the same batches
    write the same document (a replayed batch's state file equals the first one's)."""

    def run():
        step = ClusterStep(CFG)
        step.step([], [steady([1, 2, 3], 10_000)])
        step.step([], [act(0, {1: [(10_000, 20_000)], 2: [(10_000, 20_000)]})])
        return step

    doc = run().to_doc()
    assert [b for b, _ in doc["clusters"]["c"]["outages"]["open"]] == [3], "broker 3's outage is open"
    assert run().to_doc() == doc


@pytest.mark.parametrize("together", [True, False])
def test_a_resolve_after_group_wait_notifies_however_the_batches_are_cut(together):
    """Out of sync at +12 s, back at +17.4 s: 0.4 s past its group_wait (+17 s), so on-call hears of
    both. The resolve may reach the step in the same batch as the firing, while the step's time
    is still before +17.4 s (activity to +18 s, slack 1 s), or in the next batch: the same
    decision either way (it was quiet when in the same batch, whatever its time)."""
    fired = alert("ReplicaOutOfSync", 12_000, replica=3)
    over = alert(
        "ReplicaOutOfSync", 17_400, replica=3, status="resolved", started=12_000, aid=fired["alert_id"]
    )
    step = ClusterStep(CFG)
    if together:
        out = step.step([fired, over], [steady([1, 2, 3], 18_000)])
    else:
        out = step.step([fired], [steady([1, 2, 3], 18_000)])
    out += step.step([] if together else [over], [steady([1, 2, 3], 40_000)])
    assert [(x["status"], x["notify"]) for x in out] == [("firing", True), ("resolved", True)]


def test_the_records_passed_in_are_not_changed():
    """What the step adds to a record (its cause, caused_by, notify, a leader's outage in its
    reason) is on a new record: the bucket's records stay as they were emitted."""
    from tests.state.cluster_history import FIRST, LATER

    alerts = json.loads(json.dumps(FIRST[0] + LATER[0]))
    before = json.loads(json.dumps(alerts))
    step = ClusterStep(CFG)
    out = step.step(alerts, FIRST[1] + LATER[1], flush=True)
    assert alerts == before
    claimed = next(r for r in out if r["name"] == "ReplicaOutOfSync" and r["replica"] == 3)
    assert (claimed["cause"], claimed["notify"]) == ("broker_silent", False)
    assert not any(r is a for r in out for a in alerts)
