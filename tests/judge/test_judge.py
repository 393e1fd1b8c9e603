"""The judge: replmon's verdicts on a real 3-broker Kafka cluster against the brokers' own.

brokers -> request logs -> `replmon collect` -> metrics topic -> `replmon run` -> Redis. The
brokers' verdicts come from their server.log (`Shrinking ISR ... lastCaughtUpTimeMs`) and the
Admin API (describe_topics). Event times are compared, not wall clocks: replmon's
ReplicaOutOfSync fires at lcu + L + 1 (its firing time is that event time), the leader's
isr-expiration runs every L/2, so the broker shrinks in (lcu + L, lcu + 1.5 L] plus the
AlterPartition round trip. Figures are printed (run pytest with -s to see them).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import pytest

from replmon.state.cluster import REGROUP_MS
from tests.judge.cluster import wait_for
from tests.judge.conftest import LAG_MS, PARTITIONS, RUNS, TOPIC
from tests.judge.pipeline import JavaProducer, Producer, controller, describe, wait_full_isr
from tests.judge.verdicts import (
    describe_pages,
    firing,
    last_counts,
    notified_since,
    pause_in_request_log,
    report,
)

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.judge]

LCU_TOLERANCE_MS = 1000  # the bound on replmon's last caught-up time vs the broker's
# replmon's read time is the log time - totalTimeMs + requestQueueTimeMs: a few ms off the
# broker's fetchTimeMs; its firing may be that much after a shrink that came at once.
FIRING_TOLERANCE_MS = 50


@pytest.mark.parametrize("run", RUNS)
def test_paused_follower_long_session_timeout(judge_cluster, judge_admin, pipeline, judge_alertmanager, run):
    """A broker SIGSTOPped for 3 x L, with broker.session.timeout.ms above the pause: every
    shrink the leaders log is matched by replmon's ReplicaOutOfSync for that replica, no later
    in event time, with its lcu within 1 s of the broker's; replmon calls no replica out of
    sync that no leader shrank; after the broker rejoins, replmon's ISR is describe_topics'."""
    before = describe(judge_admin, TOPIC)
    active_controller = controller(judge_admin)
    # Pause a broker that follows at least one partition and is not the active controller
    # (a paused controller would delay the AlterPartition answers, not the verdicts).
    victim = next(
        b for b in (3, 2, 1) if b != active_controller and any(v["leader"] != b for v in before.values())
    )
    led_by_victim = [p for p, v in before.items() if v["leader"] == victim]
    producer = Producer(judge_cluster.bootstrap, TOPIC, PARTITIONS).start()
    try:
        time.sleep(2)  # appends flowing before the fault
        paused_ms = int(time.time() * 1000)
        os.kill(judge_cluster.pid(victim), signal.SIGSTOP)
        try:
            time.sleep(3 * LAG_MS / 1000)
        finally:
            os.kill(judge_cluster.pid(victim), signal.SIGCONT)
        resumed_ms = int(time.time() * 1000)
        after = wait_full_isr(judge_admin, TOPIC, 90)
    finally:
        producer.stop()
    # Every shrink since the pause: of the paused follower by the running leaders, and (when
    # the paused broker leads a partition that had appends its followers had not fetched yet)
    # of its followers by the paused leader itself once it runs again.
    shrinks = judge_cluster.shrinks(TOPIC, paused_ms)
    assert {s.partition for s in shrinks if s.replica == victim} == {
        p for p in before if p not in led_by_victim
    }, shrinks

    def matched():
        alerts = pipeline.alerts()
        got = {}
        for s in shrinks:
            fired = [
                a
                for a in firing(alerts, "ReplicaOutOfSync", TOPIC, s.partition, s.replica)
                if a["started_ms"] >= paused_ms - LAG_MS
            ]
            if not fired:
                return None
            got[s] = fired[0]
        return got

    fired = wait_for("replmon's ReplicaOutOfSync for every shrink", matched, 60, 1.0)
    rows = []
    for s, a in fired.items():
        replmon_lcu = a["started_ms"] - LAG_MS - 1
        lead = s.log_ms - a["started_ms"]
        rows.append(
            f"{TOPIC}-{s.partition} replica {s.replica} (leader {s.leader}): "
            f"broker shrank at +{s.log_ms - s.last_caught_up_ms} ms "
            f"after its lcu, replmon fired at +{a['started_ms'] - s.last_caught_up_ms} ms "
            f"(detection lead {lead} ms in event time); lcu error {replmon_lcu - s.last_caught_up_ms} ms; "
            f"in Redis {a['written_ms'] - s.log_ms} ms after the broker's shrink (wall clock)"
        )
    report(
        f"pause of broker {victim} for {resumed_ms - paused_ms} ms (L = {LAG_MS} ms, long session timeout)",
        rows,
    )
    for s, a in fired.items():
        assert a["started_ms"] <= s.log_ms + FIRING_TOLERANCE_MS, (s, a)
        assert abs(a["started_ms"] - LAG_MS - 1 - s.last_caught_up_ms) <= LCU_TOLERANCE_MS, (s, a)
    # Never a lag the brokers did not see: on the partitions whose leader ran throughout, every
    # replica replmon called out of sync is one the leader shrank. (A paused leader's own
    # verdict is a race after it resumes: it may shrink followers that were really behind
    # for longer than L, or see them catch up first.)
    shrunk = {(s.partition, s.replica) for s in shrinks}
    for a in firing(pipeline.alerts(), "ReplicaOutOfSync", TOPIC):
        if a["partition"] not in led_by_victim and paused_ms <= a["started_ms"] <= resumed_ms + LAG_MS:
            assert (a["partition"], a["replica"]) in shrunk, (a, shrinks)
    wait_for(
        "replmon's ISR to equal describe_topics' after the rejoin",
        lambda: all(pipeline.isr(TOPIC, p) == after[p]["isr"] for p in after),
        60,
        1.0,
    )
    # The pause, as the stopped broker's request log shows it, and what the live monitor
    # quarantined as late through it (its parked fetches, logged when it runs again).
    late = pause_in_request_log(pipeline, judge_cluster.request_log(victim), paused_ms, resumed_ms)
    report(f"run {run}: the pause of broker {victim} in its request log", [late])
    # On-call: one notification, the paused broker's BrokerUnavailable, at replmon's on-call
    # stream and at the real Alertmanager; nothing about its followers before or after it resumed
    # (the running leaders' followers, and the paused leader's own, are its consequences).
    redis, am = notified_since(pipeline, judge_alertmanager, paused_ms - 1000, paused_ms - 1000)
    counts = last_counts(pipeline, redis[0]["alert_id"]) if redis else {}
    shrunk_partitions = sorted({s.partition for s in shrinks})
    report(
        f"run {run}: on-call for the pause of broker {victim} (leads {led_by_victim})",
        [
            describe_pages(redis, am),
            f"root's counts {counts}; partitions the brokers shrank {shrunk_partitions}",
        ],
    )
    assert [(r["name"], int(r["broker"])) for r in redis] == [("BrokerUnavailable", victim)], redis
    assert [sorted(a["alertname"] for a in n["alerts"]) for n in am] == [["BrokerUnavailable"]], am
    # Every partition a running leader shrank the paused broker from is counted; the partition it
    # leads itself may be counted too: replmon's model of a paused leader runs its isr-expiration
    # in event time, while the real leader runs it once resumed, racing its followers' fetches.
    running = {s.partition for s in shrinks if s.leader != victim}
    assert len(running) <= counts.get("under_replicated", 0) <= len(running) + len(led_by_victim), (
        counts,
        shrinks,
    )


def test_bursty_acks_all_producer_no_shrink_no_out_of_sync(
    judge_cluster, judge_admin, pipeline, judge_alertmanager
):
    """Bursts of acks=all records with healthy followers: the leaders shrink nothing, and
    replmon calls no follower out of sync (the 0.8 message-count rule would: KIP-16)."""
    wait_full_isr(judge_admin, TOPIC, 60)
    start_ms = int(time.time() * 1000)
    producer = Producer(judge_cluster.bootstrap, TOPIC, PARTITIONS, acks="all", burst=(4000, 2.0)).start()
    try:
        time.sleep(2 * LAG_MS / 1000)
    finally:
        producer.stop()
    end_ms = int(time.time() * 1000)
    # replmon has seen the whole window: its event time (the cluster series) is past the end.
    wait_for(
        "replmon's clock past the bursts",
        lambda: pipeline.clock() > end_ms,
        60,
        1.0,
    )
    shrinks = judge_cluster.shrinks(TOPIC, start_ms)
    fired = [
        a
        for a in firing(pipeline.alerts(), "ReplicaOutOfSync", TOPIC)
        if start_ms <= a["started_ms"] <= end_ms
    ]
    report(
        f"bursts of 4,000 acks=all records every 2 s for {end_ms - start_ms} ms",
        [
            (
                f"records sent {producer.sent}, errors {producer.errors}; broker shrinks {len(shrinks)}; "
                f"replmon ReplicaOutOfSync {len(fired)}"
            )
        ],
    )
    assert producer.sent > 0 and producer.errors == 0
    assert shrinks == []
    assert fired == []
    redis, am = notified_since(pipeline, judge_alertmanager, start_ms, start_ms)
    assert (redis, am) == ([], []), "nothing to tell on-call about healthy followers"


SLOW_PROPS = "replica.fetch.max.bytes=2048;replica.fetch.response.max.bytes=2048"
SLOW_AFTER_SHRINK_S = 12  # the fault goes on this long after the first shrink: past group_wait (5 s)
SLOW_LOAD_PER_S = 4000  # records/s of 1 KB, one per batch, over the topic's 3 partitions


class CpuThrottle:
    """Stop a process for `stop_s` of every `run_s + stop_s`, as the kernel's CFS bandwidth
    control does to a container over its CPU quota: it keeps running (fetching, heartbeating)
    at a quarter of its speed. Always leaves the process running."""

    def __init__(self, pid: int, run_s: float = 0.05, stop_s: float = 0.15) -> None:
        self.pid, self.run_s, self.stop_s = pid, run_s, stop_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.cycles = 0

    def start(self) -> CpuThrottle:
        self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            while not self._done.is_set():
                os.kill(self.pid, signal.SIGSTOP)
                self._done.wait(self.stop_s)
                os.kill(self.pid, signal.SIGCONT)
                self.cycles += 1
                self._done.wait(self.run_s)
        finally:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        self._done.set()
        self._thread.join(10)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGCONT)


_SLOW: dict[str, int] = {}  # the broker restarted with SLOW_PROPS (kept for the later runs)
# The fault's tries, each stronger than the last: the CPU throttle's (run_s, stop_s) and how
# long the follower gets to fall out of the ISR, in L. The brokers decide whether it happens
# (in about 1 run of 6 the first try's follower kept up); after the last try the case fails.
SLOW_TRIES = ((0.05, 0.15, 3), (0.05, 0.25, 4), (0.03, 0.3, 5))


def _slow_fault(judge_cluster, pipeline, victim: int, run_s: float, stop_s: float, lags: int):
    """One try of the slow follower: the throttled victim under the producer until it falls out
    of an ISR (then SLOW_AFTER_SHRINK_S more) or `lags` x L passed. Returns (started_ms, its
    shrinks, the throttle, the producer's last report)."""
    started_ms = int(time.time() * 1000)
    throttle = CpuThrottle(judge_cluster.pid(victim), run_s, stop_s).start()
    producer = JavaProducer(
        judge_cluster.bootstrap,
        TOPIC,
        per_second=SLOW_LOAD_PER_S,
        seconds=lags * LAG_MS / 1000 + SLOW_AFTER_SHRINK_S,
        size=1000,
        log=pipeline.workdir / "slow-producer.log",
    ).start()
    try:
        # lags x L for the follower to fall out of the ISR; once it has, it stays slow a while
        # longer: a follower back within alerts.group_wait_ms of falling out is, by the
        # notification policy (docs/alerts.md), recorded and not notified; on a loaded machine
        # the producer may take half the window to reach its pace.
        deadline = time.time() + lags * LAG_MS / 1000
        while time.time() < deadline and not judge_cluster.shrinks(TOPIC, started_ms):
            time.sleep(0.5)
        if judge_cluster.shrinks(TOPIC, started_ms):
            time.sleep(SLOW_AFTER_SHRINK_S)
    finally:
        throttle.stop()
        sent = producer.stop()
    shrinks = [s for s in judge_cluster.shrinks(TOPIC, started_ms) if s.replica == victim]
    return started_ms, shrinks, throttle, sent


@pytest.mark.parametrize("run", RUNS)
def test_slow_follower(judge_cluster, judge_admin, pipeline, judge_alertmanager, run):
    """A follower that keeps fetching but falls behind, made real: one broker restarted with
    replica.fetch.max.bytes and replica.fetch.response.max.bytes 2 KB (each fetch brings one
    batch of 1 KB) under Kafka's producer sending one record per batch, 4,000 a second: the
    leader takes batches several requests at a time, the follower copies one per round trip.
    The follower is also starved of CPU as a container over its CPU quota is (CpuThrottle): on
    a loaded machine the producer reached 2-30 records/s, which a capped follower alone copied
    in time (4 runs of 4 without a shrink). A try in which it kept up anyway is tried again,
    more throttled and longer (SLOW_TRIES); the case fails when none made it fall behind. Same
    checks as the pause, on the shrinks of that follower."""
    before = wait_full_isr(judge_admin, TOPIC, 60)
    active_controller = controller(judge_admin)
    victim = next(
        b
        for b in (3, 2, 1)
        if (b != active_controller and all(v["leader"] != b for v in before.values())) or b == 3
    )
    if "victim" in _SLOW:
        victim = _SLOW["victim"]
    else:
        pid = judge_cluster.pid(victim)
        os.kill(pid, signal.SIGTERM)
        wait_for("the broker to stop", lambda: not os.path.exists(f"/proc/{pid}") or None, 60)
        judge_cluster.restart_node_with(victim, SLOW_PROPS)
        _SLOW["victim"] = victim
    tries = []
    for run_s, stop_s, lags in SLOW_TRIES:
        wait_full_isr(judge_admin, TOPIC, 120)
        if "ended_ms" in _SLOW:
            # Each run its own incident: the same broker lagging again within REGROUP_MS of its
            # last lag is by policy the same incident, already notified (docs/alerts.md), so a
            # later run waits that out (REPLMON_JUDGE_RUNS > 1 only; CI runs each case once).
            time.sleep(max(0.0, (_SLOW["ended_ms"] + REGROUP_MS + 5000) / 1000 - time.time()))
        started_ms, shrinks, throttle, sent = _slow_fault(
            judge_cluster, pipeline, victim, run_s, stop_s, lags
        )
        tries.append(f"stopped {stop_s} s of every {run_s + stop_s} s for {lags} L: {len(shrinks)} shrinks")
        if shrinks:
            _SLOW["ended_ms"] = int(time.time() * 1000) + 30_000  # it catches up, and resolves, after this
            break
    else:
        pytest.fail(f"broker {victim} never fell out of the ISR: the fault did not happen ({tries})")

    def matched():
        alerts = pipeline.alerts()
        got = {}
        for s in shrinks:
            fired = [
                a
                for a in firing(alerts, "ReplicaOutOfSync", TOPIC, s.partition, s.replica)
                if a["started_ms"] >= started_ms
            ]
            if not fired:
                return None
            got[s] = fired[0]
        return got

    fired = wait_for("replmon's ReplicaOutOfSync for every shrink of the slow follower", matched, 60, 1.0)
    report(
        f"slow follower {victim} (replica.fetch.max.bytes 2 KB, CPU throttled {throttle.cycles} cycles); "
        f"producer: {sent}; tries: {tries}",
        [
            f"{TOPIC}-{s.partition}: broker shrank at +{s.log_ms - s.last_caught_up_ms} ms after its lcu, "
            f"replmon fired at +{a['started_ms'] - s.last_caught_up_ms} ms; lcu error "
            f"{a['started_ms'] - LAG_MS - 1 - s.last_caught_up_ms} ms"
            for s, a in fired.items()
        ],
    )
    for s, a in fired.items():
        assert a["started_ms"] <= s.log_ms + FIRING_TOLERANCE_MS, (s, a)
        assert abs(a["started_ms"] - LAG_MS - 1 - s.last_caught_up_ms) <= LCU_TOLERANCE_MS, (s, a)
    # On-call: one notification for the slow broker, however many partitions it fell behind on
    # (its first ReplicaOutOfSync stands for the rest), and nothing else.
    redis, am = notified_since(pipeline, judge_alertmanager, started_ms, started_ms)
    report(f"run {run}: on-call for the slow follower {victim}", [describe_pages(redis, am)])
    assert [(r["name"], int(r["replica"])) for r in redis] == [("ReplicaOutOfSync", victim)], redis
    # Alertmanager notifies only what is still firing after its group_wait: a follower that fell
    # behind and caught up again within it is not sent on (replmon's own stream has it once).
    assert [sorted(a["alertname"] for a in n["alerts"]) for n in am] in ([], [["ReplicaOutOfSync"]]), am
