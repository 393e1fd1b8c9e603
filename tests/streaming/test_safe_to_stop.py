"""`replmon safe-to-stop` against a real Redis: the verdicts come from the cluster step over
statuses, through the Redis sink, as a running monitor writes them; the command reads them.
One test per exit code, and --wait both ways."""

from __future__ import annotations

import json
import time

import pytest

from replmon.sinks.redis_sink import RedisSink
from replmon.state.cluster import ClusterConfig, ClusterStep
from replmon.streaming.cli import build_parser, main
from replmon.streaming.safe_to_stop import parse_duration, run
from tests.sinks.records import partition_status, replica_status

CFG = ClusterConfig(silent_after_ms=3000, group_wait_ms=5000, slack_ms=1000, lag_share=0.5)


def publish(client, now_ms: int, isr=(1, 2, 3), lagging: int | None = None, step=None) -> ClusterStep:
    """What the monitor writes after a batch whose newest event is `now_ms`: three partitions,
    RF 3, min ISR 2, listed ISR `isr`; `lagging`: a listed follower 20 s behind (past L/2)."""
    step = step or ClusterStep(CFG)
    brokers = {str(b): {"segments": [[now_ms - 500, now_ms]]} for b in (1, 2, 3)}
    parts = [
        partition_status("c1", "orders", p, now_ms, isr=list(isr), reported_isr=list(isr), replicas=[1, 2, 3])
        for p in range(3)
    ]
    followers = []
    if lagging is not None:
        followers = [
            replica_status(
                "c1",
                "orders",
                p,
                lagging,
                now_ms,
                caught_up=False,
                state="slow",
                last_caught_up_ms=now_ms - 20_000,
            )
            for p in range(3)
        ]
    step.step([], [{"cluster": "c1", "bucket": 0, "brokers": brokers}], statuses=(parts, followers))
    RedisSink(client).write_batch(now_ms, [], parts, followers, [], verdicts=step.restart_verdicts())
    return step


def ask(redis_server, capsys, *flags: str) -> tuple[int, list[str]]:
    code = main(["safe-to-stop", "--redis-url", redis_server.url, *flags])
    return code, capsys.readouterr().out.splitlines()


def now_ms() -> int:
    return int(time.time() * 1000)


def test_safe_exits_0_with_the_answer_first(redis_server, redis_client, capsys):
    publish(redis_client, now_ms())
    code, lines = ask(redis_server, capsys, "--broker", "2")  # one cluster in Redis: no --cluster needed
    assert code == 0
    assert lines[0] == "broker 2: safe to stop for availability"
    # RF 3 / min ISR 2: every partition left at min ISR, told but not blocking
    assert lines[1].split()[:2] == ["info", "at_min_isr:"] and "orders-0, orders-1, orders-2" in lines[1]


def test_not_safe_exits_1_naming_the_partitions(redis_server, redis_client, capsys):
    publish(redis_client, now_ms(), isr=(1, 3))
    code, lines = ask(redis_server, capsys, "--broker", "3", "--cluster", "c1")
    assert code == 1
    assert lines[0] == "broker 3: not safe to stop (under_min_isr)"
    under = [line for line in lines if "under_min_isr:" in line]
    assert under and under[0].split()[0] == "BLOCKS" and "orders-0, orders-1, orders-2" in under[0]
    code, lines = ask(redis_server, capsys, "--broker", "2", "--cluster", "c1")
    assert code == 0, "broker 2 is out already: stopping it takes nothing under min ISR"
    assert any("self_out_of_sync" in line for line in lines)


def test_a_lagging_listed_follower_is_named_and_json_says_the_same(redis_server, redis_client, capsys):
    publish(redis_client, now_ms(), lagging=2)
    code, lines = ask(redis_server, capsys, "--broker", "1", "--cluster", "c1", "--json")
    doc = json.loads(lines[0])
    assert code == 1 and doc["exit"] == 1 and doc["verdict"] == "not_safe"
    assert doc["reasons"]["under_min_isr"]["examples"][0] == "orders-0 (2 lagging 20.0 s)"


@pytest.mark.parametrize(
    "setup, flags, says",
    [
        # the monitor stopped: its last verdict (safe) is 2 minutes old
        ("stale", ("--broker", "1", "--cluster", "c1"), "s old (over 30 s): it said safe"),
        ("none", ("--broker", "7", "--cluster", "c1"), "no verdict for broker 7 of cluster c1"),
        ("lagging_monitor", ("--broker", "1", "--cluster", "c1"), "replmon itself is behind or stopped"),
    ],
)
def test_unknown_exits_2_never_0(redis_server, redis_client, capsys, setup, flags, says):
    publish(redis_client, now_ms() - (120_000 if setup == "stale" else 0))
    if setup == "lagging_monitor":
        alert = {"name": "MonitorLagging", "reason": "no batch for 130 s"}
        redis_client.hset("replmon:alerts:firing:replmon", "m1", json.dumps(alert))
    code, lines = ask(redis_server, capsys, *flags)
    assert code == 2
    assert lines[0].startswith(f"broker {flags[1]}: unknown (") and says in lines[0], lines


def test_redis_unreachable_is_unknown(capsys):
    from tests.redis_server import free_port

    code = main(["safe-to-stop", "--redis-url", f"redis://127.0.0.1:{free_port()}/0", "--broker", "1"])
    assert code == 2
    assert "cannot read the verdict from Redis" in capsys.readouterr().out


def test_wait_polls_until_safe(redis_server, redis_client, capsys):
    """Not safe at first; the monitor's next batch (broker 2 back in the ISR) makes it safe."""
    start = now_ms()
    step = publish(redis_client, start, isr=(1, 3))
    polls = []

    def sleep(s):  # the monitor writes its next batch while the command waits
        polls.append(s)
        if len(polls) == 2:
            publish(redis_client, start + 2000, step=step)

    args = build_parser().parse_args(
        ["safe-to-stop", "--redis-url", redis_server.url, "--broker", "1", "--wait", "1m"]
    )
    code = run(args, sleep=sleep)
    assert code == 0
    assert len(polls) == 2 and all(0 < s <= 1.0 for s in polls)
    assert capsys.readouterr().out.startswith("broker 1: safe to stop")


def test_wait_gives_up_not_safe_when_the_time_is_up(redis_server, redis_client, capsys):
    publish(redis_client, now_ms(), isr=(1, 3))
    clock = [time.time()]
    slept = []

    def sleep(s):  # time passes only when the command sleeps
        slept.append(s)
        clock[0] += s

    args = build_parser().parse_args(
        ["safe-to-stop", "--redis-url", redis_server.url, "--broker", "1", "--wait", "2500ms"]
    )
    code = run(args, clock=lambda: clock[0], sleep=sleep)
    assert code == 1
    assert slept == pytest.approx([1.0, 1.0, 0.5])
    assert capsys.readouterr().out.startswith("broker 1: not safe to stop")


@pytest.mark.parametrize(
    "text, ms", [("500ms", 500), ("30s", 30_000), ("10m", 600_000), ("1h", 3_600_000), ("1m30s", 90_000)]
)
def test_durations(text, ms):
    assert parse_duration(text) == ms


def test_a_bad_duration_is_a_usage_error(redis_server, capsys):
    assert main(["safe-to-stop", "--redis-url", redis_server.url, "--broker", "1", "--wait", "10"]) == 2
    assert "'10' is not a duration" in capsys.readouterr().err
