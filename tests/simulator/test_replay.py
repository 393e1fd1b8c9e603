"""The events are a faithful record: replayed into a fresh rules engine they give back the truth."""

from __future__ import annotations

import json

import pytest

from replmon.state.partition import PartitionConfig, PartitionLeader
from replmon.streaming.simulator.scale import scale

from .runs import run


def replay(events, shrinks=(), lag_max_ms=10000, min_isr=2, tick_every_ms=None):
    """Feed fetches and appends, in order, to one engine per partition started from its first metadata.
    Shrinks are run at the times given (the truth's isr-expiration runs that removed someone), or, with
    tick_every_ms, isr-expiration runs on that schedule. Returns engines and the ISR changes seen."""
    config = PartitionConfig(replica_lag_time_max_ms=lag_max_ms, min_insync_replicas=min_isr)
    engines, epochs, changes = {}, {}, []
    pending = sorted(shrinks)
    next_tick = None

    def expire(key, ts):
        e = engines[key]
        before = e.isr
        e.isr_expiration(ts)
        if e.isr != before:
            changes.append((ts, *key, list(before), list(e.isr)))

    for event in events:
        while (
            pending and pending[0][0] <= event["ts"]
        ):  # a run precedes the fetches of its ms (scheduled L/2 ahead)
            ts, topic, partition = pending.pop(0)
            expire((topic, partition), ts)
        if tick_every_ms is not None:
            next_tick = event["ts"] if next_tick is None else next_tick
            while next_tick <= event["ts"]:
                for key in engines:
                    expire(key, next_tick)
                next_tick += tick_every_ms
        kind = event["type"]
        if kind == "broker":
            epochs[event["broker"]] = event["broker_epoch"]
            continue
        key = (event.get("topic"), event.get("partition"))
        if kind == "metadata" and key not in engines:
            engines[key] = PartitionLeader(
                config=config,
                now_ms=event["ts"],
                leader=event["leader"],
                leader_epoch=event["leader_epoch"],
                replicas=event["replicas"],
                isr=event["isr"],
                leader_leo=event["leader_leo"],
                hw=event["hw"],
                broker_epochs=epochs,
            )
        elif kind == "append":
            engines[key].append(event["ts"], event["leader_leo"])
        elif kind == "fetch":
            e = engines[key]
            before = e.isr
            outcome = e.fetch(
                event["ts"],
                event["replica"],
                event["fetch_offset"],
                broker_epoch=event["broker_epoch"],
                log_start_offset=event["log_start_offset"],
            )
            assert outcome.accepted, (event, outcome)
            assert outcome.response_hw == event["leader_hw"], (event, outcome)
            if e.isr != before:
                changes.append((event["ts"], *key, list(before), list(e.isr)))
    return engines, changes


@pytest.mark.parametrize(
    "name, seed",
    [*(("paused_and_slow", s) for s in range(4)), ("paused_and_slow", 23), ("steady", 0), ("bursty", 0)],
)
def test_replaying_the_events_reproduces_every_isr_change_hw_and_final_state(name, seed):
    events, truth = run(name, seed)
    shrinks = [
        (r["ts"], r["topic"], r["partition"])
        for r in truth
        if r["kind"] == "isr_change" and r["reason"] == "shrink"
    ]
    engines, changes = replay(events, shrinks)
    assert changes == [
        (r["ts"], r["topic"], r["partition"], r["old"], r["new"])
        for r in sorted((r for r in truth if r["kind"] == "isr_change"), key=lambda r: r["ts"])
    ]
    for final in (r for r in truth if r["kind"] == "partition"):
        e = engines[(final["topic"], final["partition"])]
        assert (list(e.isr), e.hw, e.leader_leo) == (final["isr"], final["hw"], final["leader_leo"])


def test_the_scale_generator_is_a_healthy_cluster_to_the_rules_engine():
    events = [json.loads(line) for line in scale(12, 40, seed=5, topics=3)]
    engines, changes = replay(events, lag_max_ms=30000, tick_every_ms=15000)
    assert changes == []
    assert len(engines) == 12
    for e in engines.values():
        assert e.hw == e.leader_leo > 0
        assert not e.out_of_sync_replicas(e.election_ms + 40_000)
