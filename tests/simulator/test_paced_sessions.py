"""The benchmark's paced cluster in session form (streaming/simulator/scale.py `Paced` with
`session_ms`): an idle partition's follower (with `busy_sessions`, a busy one's too) sends one
fetch naming its session, then only its session's reads say it, at most once per session_ms; the
engine keeps those followers caught up and fetching, and raises nothing, on a fraction of the
events."""

from __future__ import annotations

import json
from itertools import pairwise

import numpy as np

from replmon.state.bucket import Bucket
from replmon.streaming.settings import monitor_config
from replmon.streaming.simulator.scale import Fault, Layout, Paced
from tests.state.test_monitor_vs_truth import TYPE_RANK, as_tuple

START = 1_767_225_600_000
PARTITIONS = 30  # the first 20 idle, the last 10 appending 5 times a second
SECONDS = 30


def paced(session_ms: int | None, step_ms: int | None = None, faults=(), busy=True) -> list[dict]:
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
        faults=faults,
        busy_sessions=busy,
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


def test_followers_at_the_leo_are_said_by_their_sessions():
    events = paced(1000)
    fetches = [e for e in events if e["type"] == "fetch"]
    sessions = [e for e in events if e["type"] == "session"]
    # one fetch per follower (60), idle or busy, each naming its follower's session from its
    # leader; a busy partition's appends go out as they come
    assert len(fetches) == 60
    assert {(e["partition"], e["replica"]) for e in fetches} == {
        (p, r) for p in range(PARTITIONS) for r in Layout.of(PARTITIONS, "sim", "bench", 1).replicas[p][1:]
    }
    assert all(e.get("session_id") for e in fetches)
    assert sum(e["type"] == "append" for e in events) >= 10 * 5 * (SECONDS - 1)
    # without `busy`, a busy partition's fetches go out as they come, in no session
    busy = [e for e in paced(1000, busy=False) if e["type"] == "fetch" and e["partition"] >= 20]
    assert len(busy) >= 20 * 2 * (SECONDS - 1) and not any("session_id" in e for e in busy)
    # 6 sessions (3 followers x 2 leaders each), each at most once a second
    by_session: dict = {}
    for e in sessions:
        by_session.setdefault((e["replica"], e["leader"], e["session_id"]), []).append(e["ts"])
    assert len(by_session) == 6
    for times in by_session.values():
        assert all(b - a >= 1000 for a, b in pairwise(times))
        assert len(times) >= SECONDS - 2
    # against a fetch event per idle follower read: 40 followers x 2 a second x 30 s
    without = [e for e in paced(None) if e["type"] == "fetch"]
    assert len(without) >= 3500 and len(fetches) + len(sessions) < len(without) / 10


def run(events: list[dict]):
    """The engine on `events` in micro-batches of a second: its alerts, quarantine and the
    replica statuses at the end."""
    events = sorted(events, key=lambda e: (e["ts"], TYPE_RANK[e["type"]]))
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
    for watch in bucket.partitions.values():
        watch.dirty = True
    rows: list = []
    bucket.statuses(cfg, [], rows, force=True)
    return alerts, quarantine, rows


def test_the_engine_keeps_session_followers_caught_up_and_raises_nothing():
    alerts, quarantine, rows = run(paced(1000))
    assert alerts == [] and quarantine == []
    assert len(rows) == 60
    # each follower's last fetch is its session's last read before the partition's time
    assert all(r["ts"] - r["last_fetch_ms"] <= 1500 and r["caught_up"] for r in rows), rows[:2]
    # a busy follower is at most the appends of its last second behind (5 of 100-300 records)
    assert all(r["lag_messages"] <= 1500 for r in rows if r["partition"] >= 20), rows[-1]


def test_a_stuck_follower_of_a_busy_partition_leaves_the_isr_in_session_form():
    """From +5 s follower `r` of busy partition 25 reads at its offset and falls behind: its
    fetches go out (below the LEO, in no session), its session's reads no longer carry it, and
    it is out of sync L after its last read at the LEO; the other followers raise nothing."""
    layout = Layout.of(PARTITIONS, "sim", "bench", 1)
    r = layout.replicas[25][1]
    events = paced(1000, faults=[Fault(25, r, START + 5_000, START + 60_000)])
    stuck = [e for e in events if e["type"] == "fetch" and e["partition"] == 25 and e["replica"] == r]
    assert len(stuck) > 40 and stuck[-1]["fetch_offset"] < stuck[-1]["leader_leo"]
    alerts, quarantine, _ = run(events)
    assert quarantine == []
    out = [a for a in alerts if a["name"] == "ReplicaOutOfSync" and a["status"] == "firing"]
    assert [(a["partition"], a["replica"]) for a in out] == [(25, r)], out
    # its last read at the LEO was at about +5 s (a fetch of 2 a second); out at that + L + 1
    assert START + 15_000 <= out[0]["ts"] <= START + 15_600, out[0]["ts"] - START
