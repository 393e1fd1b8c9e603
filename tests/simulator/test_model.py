"""The event model: determinism, order, and fetches as a Kafka leader sees them."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

from replmon.streaming.simulator import scenarios
from replmon.streaming.simulator.cluster import ClusterSpec, TopicSpec
from replmon.streaming.simulator.model import DEFAULT_START_MS, simulate

from .runs import run

L = 10000


def _fetches(events, *, with_diverging=False):
    return [e for e in events if e["type"] == "fetch" and (with_diverging or "diverging_epoch" not in e)]


def test_same_seed_same_events_and_truth():
    spec = scenarios.paused_and_slow()
    assert simulate(spec, seed=7) == simulate(spec, seed=7)


def test_another_seed_other_events():
    spec = scenarios.steady()
    assert simulate(spec, seed=1)[0] != simulate(spec, seed=2)[0]


def test_start_time_is_fixed_unless_given():
    events, _ = run("steady")
    assert events[0]["ts"] == DEFAULT_START_MS == 1_767_225_600_000  # 2026-01-01T00:00:00Z
    moved, _ = simulate(scenarios.steady(), seed=0, start_ms=1_000)
    assert moved[0]["ts"] == 1_000 and len(moved) == len(events)


def test_events_are_in_ts_order_and_span_the_scenario():
    for name in scenarios.SCENARIOS:
        events, _ = run(name)
        ts = [e["ts"] for e in events]
        assert ts == sorted(ts), name
        assert ts[-1] - ts[0] <= scenarios.get(name).duration_ms
        assert ts[-1] - ts[0] > scenarios.get(name).duration_ms - 1000


def test_a_heartbeat_every_second():
    events, _ = run("steady")
    beats = [e["ts"] for e in events if e["type"] == "heartbeat"]
    assert {b - a for a, b in pairwise(beats)} == {1000}


def test_fetch_offset_never_above_the_leader_leo():
    for name in scenarios.SCENARIOS:
        events, _ = run(name)
        assert all(0 <= f["fetch_offset"] <= f["leader_leo"] for f in _fetches(events)), name


def test_leader_leo_in_a_fetch_is_the_leader_log_end_as_appended():
    """leader_leo is the LEO just before the read: the last append, or the new leader's LEO after
    an election."""
    events, _ = run("demo")
    leo, epoch = {}, {}
    for e in events:
        key = (e.get("topic"), e.get("partition"))
        if e["type"] == "append":
            leo[key] = e["leader_leo"]
        elif e["type"] == "metadata" and e["leader_epoch"] > epoch.get(key, -1):
            epoch[key] = e["leader_epoch"]
            leo[key] = e["leader_leo"]
        elif e["type"] == "fetch":
            assert e["leader_leo"] == leo[key], e
            assert e["leader_epoch"] == epoch[key], e


def test_a_healthy_follower_fetches_what_the_leader_had_at_its_previous_fetch():
    """Steady state: every fetch reaches the leader LEO of the previous one (no lag builds up), most are
    exactly at the LEO, and a follower is never silent longer than the 500 ms long poll plus a round trip."""
    events, _ = run("steady")
    last = {}
    at_leo = total = 0
    for f in _fetches(events):
        key = (f["topic"], f["partition"], f["replica"])
        if key in last:
            assert f["fetch_offset"] >= last[key]["leader_leo"], (last[key], f)
            assert f["ts"] - last[key]["ts"] <= 500 + 5 + 100, (last[key], f)
        last[key] = f
        total += 1
        at_leo += f["fetch_offset"] == f["leader_leo"]
    assert at_leo / total > 0.9


def test_leader_hw_is_the_hw_before_the_fetch_and_never_goes_back_under_one_leader():
    events, _ = run("steady")
    hw = defaultdict(int)
    for f in _fetches(events):
        key = (f["topic"], f["partition"])
        assert hw[key] <= f["leader_hw"] <= f["leader_leo"]
        hw[key] = f["leader_hw"]


def test_a_caught_up_fetch_is_parked_up_to_fetch_wait_max():
    """One batch every 2 s: a follower at the LEO is answered after 500 ms (empty) and fetches
    again an RTT later, unless an append completes the long poll first."""
    spec = ClusterSpec(
        name="c", topics=(TopicSpec(name="t", partitions=1, batch_interval_ms=2000),), duration_ms=20_000
    )
    events, _ = simulate(spec, seed=3)
    by_replica = defaultdict(list)
    for f in _fetches(events):
        by_replica[f["replica"]].append(f)
    for fetches in by_replica.values():
        parked = [b["ts"] - a["ts"] for a, b in pairwise(fetches) if a["fetch_offset"] == a["leader_leo"]]
        assert max(parked) <= 500 + 5 + 50  # + the time to append a batch that completed the poll
        assert sum(501 <= g <= 505 for g in parked) > len(parked) / 2  # most long polls time out


def test_every_fetch_carries_epochs_and_hw():
    events, _ = run("demo")
    for f in _fetches(events, with_diverging=True):
        assert {"leader_epoch", "broker_epoch", "leader_hw"} <= f.keys()
