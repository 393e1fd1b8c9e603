"""The rolling-restart gate (`replmon safe-to-stop`) against what Kafka really does, on the judge's
3-broker cluster: a topic of RF 3 and min.insync.replicas 2 whose partitions the paused broker
leads none of (its leaderships would stall the produce, not refuse it). One cluster and one
pipeline for the module; the cases run in order and each leaves the cluster whole:

1. healthy: every broker safe; SIGTERM one, and an acks=all producer keeps succeeding;
2. one broker paused past L and shrunk out by the leaders: its partners are not safe, naming the
   partitions; stop one of them for real, and acks=all gets NotEnoughReplicas on exactly those;
   the paused one is safe for availability and said out of sync;
3. a follower throttled but still listed in the ISR, lagging past half of L: its partners are
   not safe, naming it, before its leader shrinks it out (tried again, longer, when the brokers
   keep up, then failed);
4. the monitor stopped: unknown (exit 2), never safe.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import time

import pytest

from replmon.streaming.cli import build_parser
from replmon.streaming.safe_to_stop import run as safe_to_stop
from tests.judge.cluster import wait_for
from tests.judge.pipeline import CLUSTER, JavaProducer, controller, describe, wait_full_isr
from tests.judge.verdicts import report

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.judge]

# replica.lag.time.max.ms of this module's cluster: the throttled follower's window, from half
# of L behind to the leader's shrink (L to 1.5 L), must hold a micro-batch's end, and the loaded
# machine's batches came up to 9 s apart.
LAG_MS = 15_000
GATE_TOPIC = "gate"
GATE_PARTITIONS = 3


@pytest.fixture(scope="module")
def roles(judge_admin, pipeline):
    """(paused, kept, stopped): the broker paused in case 2 (not the active controller: its
    pause would hold the AlterPartition answers, not the verdicts), the partner that stays up,
    and the partner stopped for real. The gate topic puts the paused broker last in every
    replica list, so it leads none of its partitions."""
    from kafka.admin import NewTopic

    active = controller(judge_admin)
    paused = next(b for b in (2, 3, 1) if b != active)
    kept, stopped = [b for b in (1, 2, 3) if b != paused]
    assignments = {p: [kept, stopped, paused] if p % 2 == 0 else [stopped, kept, paused] for p in range(3)}
    judge_admin.create_topics(
        [
            NewTopic(
                GATE_TOPIC,
                replica_assignments=assignments,
                num_partitions=-1,
                replication_factor=-1,
                topic_configs={"min.insync.replicas": "2"},
            )
        ]
    )
    full = wait_full_isr(judge_admin, GATE_TOPIC, 60)
    wait_for(
        "replmon to report every partition of the gate topic with its ISR",
        lambda: pipeline.check_alive() or all(pipeline.isr(GATE_TOPIC, p) == full[p]["isr"] for p in full),
        120,
        1.0,
    )
    return paused, kept, stopped


def gate(pipeline, broker: int, *flags: str) -> tuple[int, dict]:
    """`replmon safe-to-stop --broker N --json` against the pipeline's Redis: (exit, answer)."""
    args = build_parser().parse_args(
        [
            "safe-to-stop",
            "--broker",
            str(broker),
            "--cluster",
            CLUSTER,
            "--redis-url",
            pipeline.services["redis_url"],
            "--json",
            *flags,
        ]
    )
    out = io.StringIO()
    code = safe_to_stop(args, out=out)
    return code, json.loads(out.getvalue())


def named(answer: dict, cls: str, topic: str = GATE_TOPIC) -> set[int]:
    """The partitions of `topic` a reason class names ('gate-1 (2 stalled)' -> 1)."""
    examples = answer["reasons"].get(cls, {}).get("examples", [])
    return {int(e.split()[0].rsplit("-", 1)[1]) for e in examples if e.split()[0].rsplit("-", 1)[0] == topic}


def all_safe(pipeline, brokers=(1, 2, 3)):
    answers = {b: gate(pipeline, b) for b in brokers}
    return answers if all(code == 0 for code, _ in answers.values()) else None


def acks_all_producer(bootstrap: str, retries: int):
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=bootstrap.split(","),
        acks="all",
        retries=retries,
        retry_backoff_ms=200,
        request_timeout_ms=5000,
        max_block_ms=5000,
    )


def described(admin) -> dict:
    """describe_topics of the gate topic, or {} when the request timed out (the admin client
    may ask the paused broker: the next poll asks again)."""
    from kafka.errors import KafkaError

    try:
        return describe(admin, GATE_TOPIC)
    except KafkaError:
        return {}


def stop_broker(judge_cluster, broker: int) -> None:
    pid = judge_cluster.pid(broker)
    os.kill(pid, signal.SIGTERM)
    wait_for(f"broker {broker} to shut down", lambda: not os.path.exists(f"/proc/{pid}") or None, 60)


@pytest.fixture(autouse=True)
def prefix(pipeline, monkeypatch):
    monkeypatch.setenv("REPLMON_REDIS__PREFIX", pipeline.prefix)


def test_healthy_every_broker_safe_and_a_stop_keeps_acks_all_writing(
    judge_cluster, judge_admin, pipeline, roles
):
    paused, _kept, _stopped = roles
    answers = wait_for("every broker to be safe to stop", lambda: all_safe(pipeline), 120, 1.0)
    report(
        "healthy cluster: safe-to-stop",
        [f"broker {b}: exit {c}, {a['summary']}" for b, (c, a) in answers.items()],
    )
    for _b, (_code, answer) in answers.items():
        assert answer["verdict"] == "safe"
        # RF 3 / min ISR 2: stopping any broker leaves every gate partition at min ISR
        assert named(answer, "at_min_isr") == set(range(GATE_PARTITIONS)), answer
    # Now for real: SIGTERM the broker, and acks=all keeps being acknowledged on every partition.
    producer = acks_all_producer(judge_cluster.bootstrap, retries=10)
    futures = []
    try:
        for i in range(60):
            futures.append(producer.send(GATE_TOPIC, b"x" * 100, partition=i % GATE_PARTITIONS))
        stop_broker(judge_cluster, paused)
        isr = describe(judge_admin, GATE_TOPIC)
        assert all(paused not in v["isr"] for v in isr.values()), isr  # the fault happened
        for i in range(60):
            futures.append(producer.send(GATE_TOPIC, b"x" * 100, partition=i % GATE_PARTITIONS))
            time.sleep(0.05)
        failed = []
        for f in futures:
            try:
                f.get(timeout=30)
            except Exception as exc:  # noqa: BLE001 - what the producer saw is the verdict
                failed.append(type(exc).__name__)
    finally:
        producer.close(timeout=5)
        judge_cluster.services("up", "--brokers", "3")
    report(f"SIGTERM of broker {paused}", [f"acks=all: {len(futures)} sent, failed: {failed}"])
    assert failed == []
    wait_full_isr(judge_admin, GATE_TOPIC, 120)


def test_paused_broker_shrunk_out_partners_not_safe_and_kafka_agrees(
    judge_cluster, judge_admin, pipeline, roles
):
    paused, kept, stopped = roles
    wait_full_isr(judge_admin, GATE_TOPIC, 120)
    wait_for("every broker to be safe to stop again", lambda: all_safe(pipeline), 180, 1.0)
    every = set(range(GATE_PARTITIONS))
    pid = judge_cluster.pid(paused)
    os.kill(pid, signal.SIGSTOP)
    producer = None
    try:
        # past L: the leaders shrink it out (the fault is Kafka's own verdict, checked here)
        wait_for(
            f"the leaders to shrink broker {paused} out of every gate partition",
            lambda: (
                ((d := described(judge_admin)) and all(paused not in v["isr"] for v in d.values())) or None
            ),
            6 * LAG_MS / 1000 + 30,
            1.0,
        )
        answers = wait_for(
            f"the partners of broker {paused} to be not safe, naming every gate partition",
            lambda: (
                (a := {b: gate(pipeline, b) for b in (kept, stopped)})
                and all(code == 1 and named(ans, "under_min_isr") == every for code, ans in a.values())
                and a
            ),
            60,
            1.0,
        )
        own_code, own = gate(pipeline, paused)
        rows = [
            f"broker {b}: exit {c}, {a['summary']}; under_min_isr {a['reasons']['under_min_isr']}"
            for b, (c, a) in answers.items()
        ]
        rows.append(f"broker {paused} (paused): exit {own_code}, {own['summary']}; {sorted(own['reasons'])}")
        # the paused broker: out already, so stopping it takes nothing under min ISR or offline
        assert own_code == 0 and own["verdict"] == "safe", own
        assert named(own, "self_out_of_sync") == every, own
        assert "under_min_isr" not in own["reasons"] and "offline" not in own["reasons"], own
        # now run the check for real: stop `stopped`, and acks=all is refused on those partitions
        stop_broker(judge_cluster, stopped)
        wait_for(
            f"broker {kept} to lead every gate partition",
            lambda: ((d := described(judge_admin)) and all(v["leader"] == kept for v in d.values())) or None,
            30,
            1.0,
        )
        # bootstrapped from the broker that runs (a request to the paused one waits out its timeout)
        producer = acks_all_producer(judge_cluster.bootstrap.split(",")[kept - 1], retries=0)
        saw = {}
        for p in sorted(every):
            for _ in range(10):  # past a stale leader in the producer's metadata
                try:
                    producer.send(GATE_TOPIC, b"x" * 100, partition=p).get(timeout=10)
                    saw[p] = "acknowledged"
                    break
                except Exception as exc:  # noqa: BLE001 - what the producer saw is the verdict
                    saw[p] = type(exc).__name__
                    if saw[p].startswith("NotEnoughReplicas"):
                        break
                    time.sleep(0.5)
        rows.append(f"after stopping broker {stopped}: acks=all per gate partition: {saw}")
        report(f"broker {paused} paused past L and shrunk out", rows)
        refused = {p for p, what in saw.items() if what.startswith("NotEnoughReplicas")}
        assert refused == named(answers[stopped][1], "under_min_isr") == every, saw
    finally:
        os.kill(pid, signal.SIGCONT)
        if producer is not None:
            with contextlib.suppress(Exception):
                producer.close(timeout=5)
        judge_cluster.services("up", "--brokers", "3")
    wait_full_isr(judge_admin, GATE_TOPIC, 180)


def test_throttled_follower_named_before_kafka_drops_it(judge_cluster, judge_admin, pipeline, roles):
    """A follower that keeps fetching but falls behind (test_judge.test_slow_follower's fault:
    fetches capped at 2 KB, the process CPU-throttled, 4,000 records/s of 1 KB): while Kafka
    still lists it in the ISR and it is behind for more than half of L, its partners' verdict
    is not safe, naming it lagging; that verdict's clock is before the leader's shrink."""
    from tests.judge.test_judge import SLOW_PROPS

    victim = roles[0]
    stop_broker(judge_cluster, victim)
    judge_cluster.restart_node_with(victim, SLOW_PROPS)
    why = ""
    for attempt in range(1, SLOW_TRIES + 1):  # the fault must happen: tried again, longer, then fail
        seconds = (2 + attempt) * LAG_MS / 1000 + 10
        shrinks, seen, sent = throttle_once(judge_cluster, judge_admin, pipeline, roles, seconds)
        # the verdict is computed as of each micro-batch's end (its cluster series point)
        key = f"{pipeline.prefix}:series:cluster:{CLUSTER}"
        ends = [int(i.split("-")[0]) for i, _ in pipeline.redis.xrange(key)]
        if not shrinks:
            why = f"broker {victim} never fell out of the ISR: the fault did not happen ({sent})"
        elif not any(s.last_caught_up_ms + LAG_MS // 2 < t < s.log_ms for s in shrinks for t in ends):
            why = f"no micro-batch ended past L/2 with the follower still listed: {shrinks}, {ends[-20:]}"
        else:
            break
        print(f"throttled follower, try {attempt} of {SLOW_TRIES}: {why}")
    else:
        pytest.fail(f"after {SLOW_TRIES} tries: {why}")
    first = {}
    for p, clock in seen:
        first.setdefault(p, clock)
    report(
        f"throttled follower {victim}; producer: {sent}",
        [
            f"{GATE_TOPIC}-{s.partition}: leader {s.leader} shrank it at {s.log_ms}; the gate named it "
            f"lagging at event time {first.get(s.partition)} "
            f"({'' if s.partition not in first else s.log_ms - first[s.partition]} ms before)"
            for s in shrinks
        ],
    )
    assert any(s.partition in first and first[s.partition] < s.log_ms for s in shrinks), (seen, shrinks)


SLOW_TRIES = 3


def throttle_once(judge_cluster, judge_admin, pipeline, roles, seconds: float):
    """One throttled window of `seconds` on the victim: its shrinks, the partners' verdicts that
    named it lagging (partition, verdict clock), and what the producer sent."""
    from tests.judge.test_judge import SLOW_LOAD_PER_S, CpuThrottle

    victim, kept, stopped = roles
    wait_full_isr(judge_admin, GATE_TOPIC, 180)
    wait_for("every broker to be safe to stop again", lambda: all_safe(pipeline), 180, 1.0)
    started_ms = int(time.time() * 1000)
    throttle = CpuThrottle(judge_cluster.pid(victim)).start()
    producer = JavaProducer(
        judge_cluster.bootstrap,
        GATE_TOPIC,
        per_second=SLOW_LOAD_PER_S,
        seconds=seconds,
        size=1000,
        log=pipeline.workdir / "gate-slow-producer.log",
    ).start()
    lagging = f"({victim} lagging"
    seen = []
    try:
        deadline = time.time() + seconds
        while time.time() < deadline:
            for b in (kept, stopped):
                code, answer = gate(pipeline, b)
                for e in answer["reasons"].get("under_min_isr", {}).get("examples", []):
                    if code == 1 and lagging in e and e.startswith(f"{GATE_TOPIC}-"):
                        seen.append((int(e.split()[0].rsplit("-", 1)[1]), answer["clock_ms"]))
            if [s for s in judge_cluster.shrinks(GATE_TOPIC, started_ms) if s.replica == victim] and seen:
                break
            time.sleep(0.3)
    finally:
        throttle.stop()
        sent = producer.stop()
    shrinks = [s for s in judge_cluster.shrinks(GATE_TOPIC, started_ms) if s.replica == victim]
    wait_full_isr(judge_admin, GATE_TOPIC, 180)
    return shrinks, seen, sent


def test_monitor_stopped_is_unknown_never_safe(judge_admin, pipeline, roles):
    """The answer's age is the wall clock less the cluster's event time in the verdict: with the
    monitor running it stays at the pipeline's lag; stopped, it grows until it passes the bound."""
    wait_full_isr(judge_admin, GATE_TOPIC, 120)
    wait_for("every broker to be safe to stop again", lambda: all_safe(pipeline), 180, 1.0)
    code, answer = gate(pipeline, roles[0])
    bound_ms = max(answer["age_ms"], 0) + 15_000  # the running pipeline's lag, and a margin
    code, answer = gate(pipeline, roles[0], "--max-age", f"{bound_ms}ms")
    assert code == 0, answer  # within the bound while the monitor runs
    run = pipeline.procs["run"]
    os.killpg(run.pid, signal.SIGTERM)
    run.wait(timeout=60)
    assert run.poll() is not None  # the fault happened: the monitor is gone

    def past_bound():
        code, answer = gate(pipeline, roles[0], "--max-age", f"{bound_ms}ms")
        assert code in (0, 2), answer  # its last verdict until it is too old, then unknown
        return (code, answer) if code != 0 else None

    code, answer = wait_for("the last verdict to pass the bound", past_bound, bound_ms / 1000 + 30, 1.0)
    report("monitor stopped", [f"bound {bound_ms} ms: exit {code}, {answer['why']}"])
    assert code == 2 and answer["verdict"] == "unknown", answer
    assert "it said safe" in answer["why"], answer
