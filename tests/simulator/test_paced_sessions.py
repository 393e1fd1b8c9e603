"""The benchmark's paced cluster in session form (streaming/simulator/scale.py `Paced` with
`session_ms`): an idle partition's follower sends one fetch naming its session, then only its
session's reads say it, at most once per session_ms; the engine keeps those followers caught up
and fetching, and raises nothing, on a fraction of the events."""

from __future__ import annotations

import json
from itertools import pairwise

import numpy as np

from replmon.state.bucket import Bucket
from replmon.streaming.settings import monitor_config
from replmon.streaming.simulator.scale import Layout, Paced
from tests.state.test_monitor_vs_truth import TYPE_RANK, as_tuple

START = 1_767_225_600_000
PARTITIONS = 30  # the first 20 idle, the last 10 appending 5 times a second
SECONDS = 30


def paced(session_ms: int | None, step_ms: int | None = None) -> list[dict]:
    append = np.r_[np.zeros(20), np.full(10, 5.0)]
    cluster = Paced(
        Layout.of(PARTITIONS, "sim", "bench", 1),
        range(PARTITIONS),
        np.full(PARTITIONS, 2.0),  # fetches per follower-second
        append,
        start_ms=START,
        lag_max_ms=10_000,
        heartbeats=True,
        seed=3,
        session_ms=session_ms,
    )
    lines = cluster.header()
    for end in range(START + (step_ms or SECONDS * 1000), START + SECONDS * 1000 + 1, step_ms or 1):
        lines += cluster.window(end)
    return [json.loads(value) for _, value in lines]


def test_the_events_do_not_depend_on_how_time_is_cut_into_windows():
    """The bench asks for the events every 100 ms; the sessions' and the idle followers'
    progress carries from one window to the next."""
    whole = paced(1000)
    assert paced(1000, step_ms=100) == whole
    assert paced(1000, step_ms=1500) == whole
    assert sum(e["type"] == "session" for e in whole) >= 6 * (SECONDS - 2)


def test_idle_followers_are_said_by_their_sessions():
    events = paced(1000)
    idle_fetches = [e for e in events if e["type"] == "fetch" and e["partition"] < 20]
    busy_fetches = [e for e in events if e["type"] == "fetch" and e["partition"] >= 20]
    sessions = [e for e in events if e["type"] == "session"]
    # one fetch per idle follower (40), each naming its follower's session from its leader
    assert len(idle_fetches) == 40
    assert {(e["partition"], e["replica"]) for e in idle_fetches} == {
        (p, r) for p in range(20) for r in Layout.of(PARTITIONS, "sim", "bench", 1).replicas[p][1:]
    }
    assert all(e.get("session_id") for e in idle_fetches)
    assert not any("session_id" in e for e in busy_fetches)
    # 6 sessions (3 followers x 2 leaders each), each at most once a second
    by_session: dict = {}
    for e in sessions:
        by_session.setdefault((e["replica"], e["leader"], e["session_id"]), []).append(e["ts"])
    assert len(by_session) == 6
    for times in by_session.values():
        assert all(b - a >= 1000 for a, b in pairwise(times))
        assert len(times) >= SECONDS - 2
    # against a fetch event per idle follower read: 40 followers x 2 a second x 30 s
    without = [e for e in paced(None) if e["type"] == "fetch" and e["partition"] < 20]
    assert len(without) >= 2300 and len(idle_fetches) + len(sessions) < len(without) / 10


def test_the_engine_keeps_session_followers_caught_up_and_raises_nothing():
    events = sorted(paced(1000), key=lambda e: (e["ts"], TYPE_RANK[e["type"]]))
    cfg = monitor_config(replica_lag_time_max_ms=10_000)
    bucket, alerts, quarantine = Bucket(0, 1), [], []
    for second in range(SECONDS + 1):
        batch = [
            as_tuple(e) for e in events if START + (second - 1) * 1000 <= e["ts"] < START + second * 1000
        ]
        if second == 0:
            batch = [as_tuple(e) for e in events if e["ts"] < START]
        bucket.process(batch, cfg, alerts, quarantine)
        bucket.advance(cfg, alerts)
    assert alerts == [] and quarantine == []
    for watch in bucket.partitions.values():
        watch.dirty = True
    rows: list = []
    bucket.statuses(cfg, [], rows, force=True)
    idle = [r for r in rows if r["partition"] < 20]
    assert len(idle) == 40
    # each idle follower's last fetch is its session's last read before the partition's time
    assert all(r["ts"] - r["last_fetch_ms"] <= 1500 and r["caught_up"] for r in idle), idle[:2]


def test_unpublished_appends_still_grow_the_leo_the_fetches_tell():
    """`published_per_s` below the append rate: a compacting collector sends an append only
    where the next fetch would not tell its LEO, so fewer appends go out, and the busy
    partitions' fetches still tell a LEO that grows at every append."""
    rates = np.r_[np.zeros(20), np.full(10, 5.0)]

    def events(published: np.ndarray | None) -> list[dict]:
        cluster = Paced(
            Layout.of(PARTITIONS, "sim", "bench", 1), range(PARTITIONS), np.full(PARTITIONS, 2.0), rates,
            start_ms=START, lag_max_ms=10_000, seed=3, session_ms=1000, published_per_s=published,
        )  # fmt: skip
        lines = cluster.header() + cluster.window(START + SECONDS * 1000)
        return [json.loads(value) for _, value in lines]

    every, few = events(None), events(np.r_[np.zeros(20), np.full(10, 0.5)])
    appends = [sum(e["type"] == "append" for e in evs) for evs in (every, few)]
    assert appends[0] == 10 * 5 * SECONDS and 10 * 0.5 * SECONDS - 10 <= appends[1] <= 10 * 0.5 * SECONDS

    def told(evs: list[dict]) -> list[int]:
        return [e["leader_leo"] for e in evs if e["type"] == "fetch" and e["partition"] == 25]

    assert told(few) == told(every) and len(set(told(few))) > SECONDS
