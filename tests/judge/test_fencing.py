"""The judge on a cluster with Kafka's default broker.session.timeout.ms (9 s): the controller
fences a broker that stops heartbeating and moves its leaderships and ISR memberships before
any leader's lag rule acts (replica.lag.time.max.ms here is 20 s, clearly above the fencing
delay). replmon must name the fence as the cause, never a lag no broker saw, and follow the
leader moves; its own cluster (startup settings), started after the other module's is down.

Event times, not wall clocks: the controller logs `Fencing broker B because its session has
timed out` at the fence; the collector's Admin poll (every 1 s, 5 s request timeout, events
stamped when the answer came: streaming/collect/admin.py) turns it into a `broker` event
(fenced) and `metadata` events at one event time, which replmon applies broker first.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.judge.cluster import wait_for
from tests.judge.conftest import RUNS, TOPIC
from tests.judge.pipeline import Producer, controller, describe, wait_full_isr
from tests.judge.verdicts import (
    describe_pages,
    firing,
    firing_now,
    last_counts,
    leaders_as_described,
    notified_since,
    pause_in_request_log,
    report,
)

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.judge]

LAG_MS = 20000  # replica.lag.time.max.ms: above the fencing delay, so the fence comes first
SESSION_TIMEOUT_MS = None  # broker.session.timeout.ms: Kafka's default, 9 s
KAFKA_SESSION_MS = 9000
# How late the collector may see what the controller decided: a poll every 1 s whose request
# may go to the stopped broker and wait out the 5 s request timeout, once per Admin call.
ADMIN_SEEN_WITHIN_MS = 1000 + 2 * 5000 + 1000
REPLICATION = ("ReplicaOutOfSync", "UnderReplicated", "UnderMinIsr", "BrokerUnavailable")


def _fenced_and_moved(admin, victim: int):
    """describe_topics once the victim leads nothing and is in no ISR; else None."""
    try:
        d = describe(admin, TOPIC)
    except Exception:  # noqa: BLE001 - the Admin API asked the stopped broker: ask again
        return None
    return d if all(v["leader"] not in (victim, -1) and victim not in v["isr"] for v in d.values()) else None


def _victim(before: dict, active_controller: int) -> int:
    """A broker that leads a partition and follows another, and is not the active controller
    (a stopped active controller is a controller election, another fault)."""
    return next(
        b
        for b in (3, 2, 1)
        if b != active_controller
        and any(v["leader"] == b for v in before.values())
        and any(v["leader"] != b for v in before.values())
    )


UNAVAILABLE = ("broker_fenced", "broker_silent", "broker_shutting_down")


def _fenced_at(pipeline, root: dict) -> int | None:
    """The event time replmon said the controller fenced the root's broker (its firing, or the
    update of the same alert that moved its cause to broker_fenced)."""
    for a in pipeline.alerts():
        if a["alert_id"] == root["alert_id"] and a.get("cause") == "broker_fenced":
            return int(a["cause_ms"])  # the fence may come before the first notification
    return None


def _one_page_for(
    pipeline, am, victim: int, before: dict, since_ms: int, run: int, what: str, severity: str = "critical"
) -> None:
    """Exactly one notification, the victim's BrokerUnavailable, at replmon's on-call stream and
    at the real Alertmanager; its counts say the partitions it took out of their ISR."""
    redis, at_am = notified_since(pipeline, am, since_ms - 1000, since_ms - 1000)
    counts = last_counts(pipeline, redis[0]["alert_id"]) if redis else {}
    expected = sum(1 for v in before.values() if victim in v["isr"])
    report(
        f"run {run}: on-call for the {what} of broker {victim}",
        [describe_pages(redis, at_am), f"root's counts {counts}; partitions it was in the ISR of {expected}"],
    )
    assert [(r["name"], int(r["broker"]), r["severity"]) for r in redis] == [
        ("BrokerUnavailable", victim, severity)
    ], redis
    assert [sorted(a["alertname"] for a in n["alerts"]) for n in at_am] == [["BrokerUnavailable"]], at_am
    assert counts.get("under_replicated") == expected, (counts, before)


def _broker_root(pipeline, victim: int, since_ms: int):
    return [
        a
        for a in firing(pipeline.alerts(), "BrokerUnavailable", None)
        if a.get("broker") == victim and a["started_ms"] >= since_ms
    ]


@pytest.mark.parametrize("run", RUNS)
def test_paused_broker_fenced_by_the_controller_before_any_lag_rule(
    judge_cluster, judge_admin, pipeline, judge_alertmanager, run
):
    """A broker SIGSTOPped for 1.5 x L (past lcu + L + L/2, when a running leader's isr-expiration
    would surely have removed it) with the default session timeout: the controller fences it,
    its leaderships move and no running leader logs a `Shrinking ISR` for it. replmon reports
    BrokerUnavailable (broker_fenced) no earlier than the controller's fence, and every
    ReplicaOutOfSync in the window has the fence as cause, never `lag`; after the broker is
    back, replmon's leaders, epochs and ISRs are describe_topics' and the alerts resolve."""
    before = wait_full_isr(judge_admin, TOPIC, 60)
    victim = _victim(before, controller(judge_admin))
    led = sorted(p for p, v in before.items() if v["leader"] == victim)
    pause_ms = 3 * LAG_MS // 2
    producer = Producer(judge_cluster.bootstrap, TOPIC, len(before)).start()
    try:
        time.sleep(2)  # appends flowing, followers caught up, before the fault
        paused_ms = int(time.time() * 1000)
        os.kill(judge_cluster.pid(victim), signal.SIGSTOP)
        try:
            moved = wait_for(
                f"the controller to fence broker {victim} and move its leaders",
                lambda: _fenced_and_moved(judge_admin, victim),
                pause_ms / 1000,
                1.0,
            )
            time.sleep(max(0.0, (paused_ms + pause_ms) / 1000 - time.time()))
        finally:
            os.kill(judge_cluster.pid(victim), signal.SIGCONT)
        resumed_ms = int(time.time() * 1000)
        wait_full_isr(judge_admin, TOPIC, 120)
    finally:
        producer.stop()
    # The brokers' verdicts: the controller fenced it; no running leader shrank it for lag.
    fences = [t for t, b in judge_cluster.fences(paused_ms) if b == victim]
    assert fences, f"the controller never logged fencing broker {victim}"
    fenced_ms = fences[0]
    shrinks = judge_cluster.shrinks(TOPIC, paused_ms)
    assert [s for s in shrinks if s.replica == victim and s.leader != victim] == [], (
        f"a running leader shrank broker {victim} for lag: the fence did not come first ({shrinks})"
    )
    stale = [s for s in shrinks if s.leader == victim]  # its own, with a stale epoch, on resume
    # replmon: the fence as the root cause, seen after the controller decided it.
    roots = wait_for(
        f"replmon's BrokerUnavailable for broker {victim}",
        lambda: _broker_root(pipeline, victim, paused_ms) or None,
        60,
        1.0,
    )
    root = roots[0]
    window = [
        a
        for a in firing(pipeline.alerts(), "ReplicaOutOfSync", TOPIC)
        if paused_ms <= a["started_ms"] <= resumed_ms + LAG_MS
    ]
    final = wait_for(
        "replmon's leaders, epochs and ISRs to be describe_topics' after the return",
        lambda: leaders_as_described(pipeline, judge_admin, TOPIC),
        90,
        1.0,
    )
    still = (
        wait_for(
            "replmon's replication alerts to resolve",
            lambda: not firing_now(pipeline, REPLICATION, TOPIC) or None,
            60,
            1.0,
        )
        and []
    )
    report(
        f"pause of broker {victim} for {resumed_ms - paused_ms} ms, default session timeout "
        f"(L = {LAG_MS} ms)",
        [
            (
                f"controller fenced it at +{fenced_ms - paused_ms} ms; replmon's BrokerUnavailable "
                f"({root.get('cause')}) at +{root['started_ms'] - paused_ms} ms in event time "
                f"({root['started_ms'] - fenced_ms} ms after the controller); a lag rule could act at "
                f"+{LAG_MS} ms at the earliest"
            ),
            (
                f"leaders moved {[(p, before[p]['leader'], moved[p]['leader']) for p in led]} "
                f"(partition, from, to); (leader, epoch) at the end "
                f"{ {p: (v['leader'], v['leader_epoch']) for p, v in final.items()} }"
            ),
            f"running leaders' shrinks of {victim}: 0; its own stale shrinks on resume: {len(stale)}",
            "replmon ReplicaOutOfSync in the window: "
            + (
                ", ".join(
                    f"{a['topic']}-{a['partition']}/{a['replica']} cause {a.get('cause')}" for a in window
                )
                or "none"
            ),
            f"still firing after the return: {still}; BrokerUnavailable episodes {len(roots)}",
        ],
    )
    # One episode: silent first (nothing more from the broker, cluster-wide), then the
    # controller's fence updates the same alert; the fence is seen after the controller decided
    # it, and before any lag rule could act.
    assert len(roots) == 1, roots
    fenced_at = _fenced_at(pipeline, root)
    assert fenced_at is not None, f"replmon never said the controller fenced broker {victim}: {root}"
    assert fenced_at >= fenced_ms and fenced_at - fenced_ms <= ADMIN_SEEN_WITHIN_MS, (root, fenced_ms)
    assert root["started_ms"] < paused_ms + LAG_MS, (
        f"replmon saw the outage after L: the case does not show what it should ({root})"
    )
    assert [a for a in window if a.get("cause") == "lag"] == [], window
    for a in window:
        if a["replica"] == victim:
            assert a.get("cause") in UNAVAILABLE and a.get("caused_by") == root["alert_id"], a
    # The pause, as the stopped broker's request log shows it, and what the live monitor
    # quarantined as late through it (its parked fetches, logged when it runs again). Requests
    # held across it are not required here: the pause (30 s) reaches the followers' and the
    # producer's request timeouts, and a request whose connection closed may never be logged.
    late = pause_in_request_log(
        pipeline, judge_cluster.request_log(victim), paused_ms, resumed_ms, fenced=True
    )
    report(f"run {run}: the pause of broker {victim} in its request log", [late])
    _one_page_for(pipeline, judge_alertmanager, victim, before, paused_ms, run, "pause, default session")


@pytest.mark.parametrize("run", RUNS)
def test_killed_leader_fenced_leaders_move_and_return(
    judge_cluster, judge_admin, pipeline, judge_alertmanager, run
):
    """SIGKILL a broker that leads a partition: the controller fences it after the session
    timeout and moves its leaderships (required: the fault happened). replmon's leaders,
    leader epochs and ISRs are describe_topics' after the move and again after the broker is
    restarted and every ISR is full, and then no replication alert is still firing."""
    before = wait_full_isr(judge_admin, TOPIC, 60)
    victim = _victim(before, controller(judge_admin))
    led = sorted(p for p, v in before.items() if v["leader"] == victim)
    producer = Producer(judge_cluster.bootstrap, TOPIC, len(before)).start()
    try:
        time.sleep(2)
        killed_ms = int(time.time() * 1000)
        os.kill(judge_cluster.pid(victim), signal.SIGKILL)
        moved = wait_for(
            f"the controller to fence broker {victim} and move its leaders",
            lambda: _fenced_and_moved(judge_admin, victim),
            3 * KAFKA_SESSION_MS / 1000,
            1.0,
        )
        moved_ms = int(time.time() * 1000)
        # The killed broker stays down until the restart below: nothing changes `moved`
        # (and an Admin request may wait on the dead broker's address).
        at_move = wait_for(
            "replmon's leaders, epochs and ISRs to be describe_topics' after the move",
            lambda: leaders_as_described(pipeline, judge_admin, TOPIC, moved),
            60,
            1.0,
        )
        judge_cluster.services("up", "--brokers", "3")  # starts the one that is not running
        restarted_ms = int(time.time() * 1000)
        wait_full_isr(judge_admin, TOPIC, 120)
    finally:
        producer.stop()
    final = wait_for(
        "replmon's leaders, epochs and ISRs to be describe_topics' after the restart",
        lambda: leaders_as_described(pipeline, judge_admin, TOPIC),
        90,
        1.0,
    )
    wait_for(
        "replmon's replication alerts to resolve",
        lambda: not firing_now(pipeline, REPLICATION, TOPIC) or None,
        60,
        1.0,
    )
    fences = [t for t, b in judge_cluster.fences(killed_ms) if b == victim]
    roots = _broker_root(pipeline, victim, killed_ms)
    seen = [a for a in pipeline.alerts() if a["ts"] >= killed_ms and a.get("cluster")]
    moves = [(p, before[p]["leader"], moved[p]["leader"]) for p in led]
    causes = [(a.get("cause"), a["started_ms"] - killed_ms) for a in roots]
    leaders_at_move = {p: (v["leader"], v["leader_epoch"]) for p, v in at_move.items()}
    leaders_at_end = {p: (v["leader"], v["leader_epoch"]) for p, v in final.items()}
    report(
        f"SIGKILL of leader {victim}, default session timeout, restarted once its leaders moved",
        [
            (
                f"controller fenced it at +{fences[0] - killed_ms if fences else None} ms; leaders moved by "
                f"+{moved_ms - killed_ms} ms (wall): {moves}"
            ),
            (
                f"replmon's BrokerUnavailable {causes} "
                f"(cause, event time after the kill); restarted at +{restarted_ms - killed_ms} ms"
            ),
            (
                f"(leader, epoch) after the move {leaders_at_move}, at the end {leaders_at_end}; "
                f"alert transitions since the kill {len(seen)}"
            ),
        ],
    )
    assert all(moved[p]["leader"] != victim for p in led) and led
    assert fences, f"the controller never logged fencing broker {victim}"
    assert len(roots) == 1 and _fenced_at(pipeline, roots[0]) is not None, roots
    assert any(a["name"] == "ReplicaOutOfSync" and a.get("replica") == victim for a in seen), (
        "replmon never saw the killed broker leave the ISRs"
    )
    _one_page_for(pipeline, judge_alertmanager, victim, before, killed_ms, run, "SIGKILL")


@pytest.mark.parametrize("run", RUNS)
def test_controlled_shutdown_reported_not_paged(
    judge_cluster, judge_admin, pipeline, judge_alertmanager, run
):
    """SIGTERM a broker that leads a partition: Kafka's controlled shutdown moves its leaderships
    and takes it out of every ISR before the process exits, so no partition goes under min ISR
    (2 of 3) or offline. replmon reports it once, as a warning (no page), and nothing else."""
    before = wait_full_isr(judge_admin, TOPIC, 60)
    victim = _victim(before, controller(judge_admin))
    producer = Producer(judge_cluster.bootstrap, TOPIC, len(before)).start()
    try:
        time.sleep(2)
        stopped_ms = int(time.time() * 1000)
        pid = judge_cluster.pid(victim)
        os.kill(pid, signal.SIGTERM)
        wait_for("the broker to shut down", lambda: not os.path.exists(f"/proc/{pid}") or None, 60)
        moved = wait_for(
            f"broker {victim}'s leaders to move", lambda: _fenced_and_moved(judge_admin, victim), 30, 1.0
        )
        time.sleep(LAG_MS / 1000)  # down for a while: every consequence has had its time
        judge_cluster.services("up", "--brokers", "3")
        wait_full_isr(judge_admin, TOPIC, 120)
    finally:
        producer.stop()
    wait_for(
        "replmon's replication alerts to resolve",
        lambda: not firing_now(pipeline, REPLICATION, TOPIC) or None,
        90,
        1.0,
    )
    roots = _broker_root(pipeline, victim, stopped_ms)
    seen = [(a.get("cause"), a["severity"], a["started_ms"] - stopped_ms) for a in roots]
    report(
        f"run {run}: SIGTERM (controlled shutdown) of broker {victim}",
        [
            f"leaders moved {[(p, before[p]['leader'], moved[p]['leader']) for p in before]}",
            f"replmon's BrokerUnavailable (cause, severity, event time after SIGTERM): {seen}",
        ],
    )
    assert len(roots) == 1, roots
    _one_page_for(
        pipeline,
        judge_alertmanager,
        victim,
        before,
        stopped_ms,
        run,
        "controlled shutdown",
        severity="warning",
    )
