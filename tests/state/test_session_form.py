"""The engine on the same inputs in two forms: a fetch event per follower fetch (compaction
off), and session form (streaming/collect/sessions.py: a partition's own fetches only when
its picture changes, the idle reads as `session` events at most once per resolution). The
alerts must be identical; the replica statuses identical but for the fields docs/events.md
lists as approximate in session form, each within its bound.

Pure and fast: simulated clusters (every named scenario, and random faulted clusters with idle
and quiet topics) and a real 3-broker capture are fed to one Bucket and the cluster step in
micro-batches of a second, as the streaming step does.
"""

from __future__ import annotations

import gzip
import json
import random
from functools import cache

import pytest

from replmon.streaming.collect.compact import Compactor, published
from replmon.streaming.collect.sessions import SessionForm, per_leader, per_partition, session_form
from replmon.streaming.simulator import scenarios
from replmon.streaming.simulator.cluster import ClusterSpec, TopicSpec
from replmon.streaming.simulator.faults import BrokerCrash, PausedFollower, SlowFollower
from replmon.streaming.simulator.model import simulate
from tests.collect.test_compact import DATA, fold

RESOLUTION_MS = 1000
FETCH_WAIT_MS = 500  # the simulator's replica.fetch.wait.max.ms: a caught-up follower's longest gap
# docs/events.md: the replica status fields that are approximate in session form, and their
# bound: behind the per-fetch value by less than the resolution plus one parked fetch.
APPROXIMATE = ("last_caught_up_ms", "last_fetch_ms", "lag_ms")
BOUND_MS = RESOLUTION_MS + FETCH_WAIT_MS


def compare(events: list[dict], lag_ms: int, **form) -> int:
    """Check the two forms agree (the engine and the cluster step, fed in micro-batches of a
    second as the streaming step feeds them); returns how many fetch events session form left
    out."""
    compact = session_form(events, RESOLUTION_MS, **form)
    agree(events, compact, lag_ms)
    return sum(e["type"] == "fetch" for e in events) - sum(e["type"] == "fetch" for e in compact)


def agree(events: list[dict], compact: list[dict], lag_ms: int) -> None:
    """The engine decides the same on both forms but for the approximate fields."""
    cfg = dict(compaction_resolution_ms=RESOLUTION_MS)
    alerts, statuses, quarantine = fold(_with_tail(events), lag_ms, **cfg)
    s_alerts, s_statuses, s_quarantine = fold(_with_tail(compact), lag_ms, **cfg)
    assert [q["reason"] for q in s_quarantine] == [q["reason"] for q in quarantine]
    # (records of one time may come in another order: one batch's records are a set)
    assert len(s_alerts) == len(alerts)
    for a, b in zip(sorted(alerts, key=_when), sorted(s_alerts, key=_when), strict=True):
        assert a == b
    assert [_key(r) for r in statuses] == [_key(r) for r in s_statuses]
    for want, got in zip(statuses, s_statuses, strict=True):
        for name, value in want.items():
            if name in APPROXIMATE and value is not None and got[name] is not None:
                assert abs(got[name] - value) < BOUND_MS, (_key(want), name, value, got[name])
            else:
                assert got[name] == value, (_key(want), name, value, got[name])


def _with_tail(events: list[dict]) -> list[dict]:
    """A last heartbeat the allowed lateness (10 s) after the end moves every partition past
    its own last event: the final statuses of both forms are taken at the same time."""
    last = max(events, key=lambda e: e["ts"])
    return [*events, {"type": "heartbeat", "ts": last["ts"] + 10_001, "cluster": last["cluster"]}]


def _key(row: dict) -> tuple:
    return row["topic"], row["partition"], row["replica"]


def _when(alert: dict) -> tuple:
    return alert["ts"], alert.get("alert_id") or "", alert["status"]


@cache
def simulated(name: str, seed: int) -> tuple[list, int]:
    spec = scenarios.get(name)
    events, _ = simulate(spec, seed=seed)
    return events, spec.replica_lag_time_max_ms


@pytest.mark.parametrize("name", ["demo", "paused_and_slow", "bursty", "steady"])
def test_every_scenario_says_the_same_in_session_form(name):
    events, lag_ms = simulated(name, 0)
    compare(events, lag_ms)


def random_cluster(seed: int) -> ClusterSpec:
    """A small cluster with an idle topic, a quiet one and a busy one, and a few random faults."""
    rng = random.Random(seed)
    topics = (
        TopicSpec(name="idle", partitions=3, produce_rate=0.0),
        TopicSpec(name="quiet", partitions=2, produce_rate=2.0, batch_interval_ms=1500),
        TopicSpec(name="busy", partitions=2, produce_rate=300.0),
    )
    faults: list = []
    for _ in range(rng.randint(1, 3)):
        topic = rng.choice(topics)
        partition = rng.randrange(topic.partitions)
        replica = rng.choice((1, 2, 3))
        start = rng.randrange(5_000, 40_000)
        kind = rng.choice(("pause", "slow", "crash"))
        if kind == "pause":
            faults.append(
                PausedFollower(
                    topic=topic.name,
                    partition=partition,
                    replica=replica,
                    start_ms=start,
                    duration_ms=rng.randrange(2_000, 25_000),
                )
            )
        elif kind == "slow":
            faults.append(
                SlowFollower(
                    topic=topic.name,
                    partition=partition,
                    replica=replica,
                    start_ms=start,
                    duration_ms=rng.randrange(5_000, 20_000),
                    throughput=50.0,
                )
            )
        elif not any(isinstance(f, BrokerCrash) for f in faults):
            faults.append(
                BrokerCrash(broker=replica, start_ms=start, restart_after_ms=rng.randrange(5_000, 20_000))
            )
    return ClusterSpec(
        name="rnd",
        topics=topics,
        duration_ms=60_000,
        faults=tuple(faults),
        replica_lag_time_max_ms=rng.choice((6_000, 10_000)),
    )


@pytest.mark.parametrize("seed", range(6))
def test_random_faulted_clusters_say_the_same_in_session_form(seed):
    spec = random_cluster(seed)
    events, _ = simulate(spec, seed=seed)
    saved = compare(events, spec.replica_lag_time_max_ms)
    fetches = sum(e["type"] == "fetch" for e in events)
    assert saved > fetches // 10  # the idle topic's fetches are said by sessions


@pytest.mark.parametrize("form", [per_partition, per_leader], ids=["per partition", "per leader"])
def test_a_real_capture_says_the_same_in_session_form(form):
    """Events `replmon collect` made (compaction off) from 3 real Kafka 4.3.1 brokers' request
    logs while broker 3 was paused past L and resumed. A real follower reads every partition it
    follows from one leader in one request (one fetcher thread: one session per follower and
    leader), so the session per leader is exact too."""
    with gzip.open(DATA / "capture-pause-3brokers.jsonl.gz", "rt") as f:
        events = [json.loads(line) for line in f]
    lag_ms = next(e["replica_lag_time_max_ms"] for e in events if e.get("replica_lag_time_max_ms"))
    assert compare(events, lag_ms, session_key=form) > 0


@pytest.mark.parametrize("seed", range(2))
def test_compacted_events_say_the_same_in_session_form(seed):
    """`replmon collect --session-form` builds the form from what the lossless compaction
    (streaming/collect/compact.py) lets through: the engine decides on it as on the compacted
    events."""
    spec = random_cluster(seed)
    events, _ = simulate(spec, seed=seed)
    compacted = published(events, Compactor(default_lag_ms=spec.replica_lag_time_max_ms), 1500, 200)
    compare(compacted, spec.replica_lag_time_max_ms)


@pytest.mark.parametrize("seed", range(3))
def test_the_collectors_steps_say_the_same_in_session_form(seed):
    """As `replmon collect` runs it: the compactor, then the session form, in 200 ms steps with
    a 1.5 s hold. Across steps a session event already published says a silent follower's read
    (it is not restated), and held reads leave at their flush time: the engine decides on it as
    on the compacted events."""
    spec = random_cluster(seed)
    events, _ = simulate(spec, seed=seed)
    lag_ms = spec.replica_lag_time_max_ms
    compacted = published(events, Compactor(default_lag_ms=lag_ms), 1500, 200)
    former = SessionForm(RESOLUTION_MS, per_partition)
    agree(compacted, published(events, Compactor(default_lag_ms=lag_ms), 1500, 200, former), lag_ms)
    assert former.dropped > 0


def test_a_leader_heard_from_again_after_the_telemetry_gap_says_the_same_in_session_form():
    """Nothing about the partitions broker 1 leads for 45 s, past alerts.telemetry_gap_ms
    (30 s): its fetch sessions fall silent with them. A partition its sessions carry has no
    silence check of its own (state/monitor.py evaluate): the sessions' silence wakes it
    (Bucket.advance), so it fires TelemetryMissing at the moment its fetches' silence does,
    and resolves when it is heard from again; the partitions of the other leaders stay quiet."""
    spec = ClusterSpec(
        name="gap",
        topics=(
            TopicSpec(name="idle", partitions=6, produce_rate=0.0),
            TopicSpec(name="quiet", partitions=3, produce_rate=2.0, batch_interval_ms=1500),
        ),
        duration_ms=120_000,
        replica_lag_time_max_ms=60_000,  # past the gap: the followers stay in the ISR meanwhile
    )
    events, _ = simulate(spec, seed=1)
    t0 = events[0]["ts"]
    led = {(e["topic"], e["partition"]) for e in events if e["type"] == "metadata" and e["leader"] == 1}
    gap = [
        e
        for e in events
        if not ((e.get("topic"), e.get("partition")) in led and t0 + 30_000 <= e["ts"] < t0 + 75_000)
    ]
    form = session_form(gap, RESOLUTION_MS)
    assert any(e["type"] == "session" for e in form)
    agree(gap, form, spec.replica_lag_time_max_ms)
    alerts, _, _ = fold(
        _with_tail(form), spec.replica_lag_time_max_ms, compaction_resolution_ms=RESOLUTION_MS
    )
    silent = {a["subject"] for a in alerts if a["name"] == "TelemetryMissing" and a["status"] == "firing"}
    assert silent == {f"gap/{t}-{p}" for t, p in led} and len(silent) == 3
