"""The isr-expiration runs the engine schedules: only where a run can remove a follower, at the
times of Kafka's schedule (every L/2 from the epoch), and no alert moves for the runs it skips.
Expected times are derived in each test's comment. bench/engine_diff.py --every-run checks the
same on every simulator scenario and random faulted clusters."""

from __future__ import annotations

import pytest

from replmon.state import monitor
from replmon.state.partition import PartitionLeader
from replmon.streaming.settings import monitor_config
from tests.state.test_monitor import T0, L, ev, meta, run, steady, transitions


@pytest.fixture
def runs(monkeypatch):
    """The event times of every isr-expiration run the engine makes."""
    times: list[int] = []
    real = PartitionLeader.isr_expiration

    def counted(self, now_ms):
        times.append(now_ms - T0)
        return real(self, now_ms)

    monkeypatch.setattr(PartitionLeader, "isr_expiration", counted)
    return times


def idle(end_ms: int) -> list:
    """Metadata, then followers 2 and 3 fetching at the LEO (0, no appends) every second."""
    events = [meta(T0)]
    for t in range(T0 + 1000, T0 + end_ms, 1000):
        events += [ev("fetch", t, replica=r, fetch_offset=0, leader_leo=0) for r in (2, 3)]
    return events


@pytest.mark.parametrize(
    "skip, expected",
    [
        # every follower at the LEO for 60 s: Kafka never calls one out of sync (KAFKA-7152), no run
        (True, []),
        # as before: every run of the schedule, L/2 = 5 s apart from the epoch, up to the last
        # event at +59 s
        (False, list(range(5000, 60_000, 5000))),
    ],
)
def test_a_partition_whose_followers_are_at_the_leo_costs_no_run(runs, monkeypatch, skip, expected):
    monkeypatch.setattr(monitor, "SKIP_IDLE_RUNS", skip)
    _, alerts, _ = run(idle(60_000), advance=False)
    assert alerts == []
    assert runs == expected


def test_a_follower_that_can_lag_gets_the_run_after_lcu_plus_l(runs):
    # Follower 3 stops at +5000: its last caught-up fetch is +4902, it fails isCaughtUp at
    # lcu + L + 1 = +14903, and the first run of the schedule from then is +15000, which removes
    # it (UnderReplicated at +15000, as with every run made). Follower 2 fetches at the LEO
    # right after each append, so no run before can remove anyone: the first is +15000.
    events = [meta(T0), *steady(T0 + 100, T0 + 20_000, stop=T0 + 5000)]
    _, alerts, _ = run(events, advance=False)
    assert transitions(alerts, "UnderReplicated") == [("firing", 15000, "c1/t-0")]
    assert runs[0] == 15000


def test_a_fetch_below_the_leo_it_had_reached_brings_the_warning_at_once(runs):
    # Follower 3 fetches at the LEO 10 at +1000 (lcu +1000), then, with no append since, at
    # offset 4 at +7000 (its log truncated). It is past the imminent fraction (L/2 = 5 s after
    # lcu, +6001) from that fetch on: IsrExitImminent at +7000. It fails isCaughtUp at
    # lcu + L + 1 = +11001 and the run at +15000 removes it.
    events = [
        meta(T0),
        ev("append", T0 + 500, leader_leo=10),
        ev("fetch", T0 + 1000, replica=2, fetch_offset=10, leader_leo=10),
        ev("fetch", T0 + 1000, replica=3, fetch_offset=10, leader_leo=10),
        *[ev("fetch", T0 + t, replica=2, fetch_offset=10, leader_leo=10) for t in range(2000, 20_000, 1000)],
        ev("fetch", T0 + 7000, replica=3, fetch_offset=4, leader_leo=10),
    ]
    events.sort(key=lambda e: e[1])
    _, alerts, _ = run(events, advance=False)
    assert transitions(alerts, "IsrExitImminent") == [
        ("firing", 7000, "c1/t-0/3"),
        ("resolved", 11001, "c1/t-0/3"),
    ]
    assert transitions(alerts, "ReplicaOutOfSync") == [("firing", 11001, "c1/t-0/3")]
    assert transitions(alerts, "UnderReplicated") == [("firing", 15000, "c1/t-0")]


def test_the_run_due_under_the_old_l_stays_when_metadata_changes_l(runs):
    # L is 10 s (runs every 5 s) until the metadata at +10500 sets it to 2 s (runs every 1 s):
    # the run already due under the old L, +15000, stays, and the runs after it are every 1 s
    # from it (as Kafka's rescheduled task would, and as every run made did). Follower 3 last
    # fetches at the LEO at +10400; an append at +10600 leaves it behind, so it fails
    # isCaughtUp at lcu + 2000 + 1 = +12401 and is removed at +15000, not at +13000.
    events = [meta(T0)]
    for t in range(1000, 10_500, 100):
        events.append(ev("fetch", T0 + t, replica=2, fetch_offset=0, leader_leo=0))
        events.append(ev("fetch", T0 + t, replica=3, fetch_offset=0, leader_leo=0))
    events.append(
        ev(
            "metadata",
            T0 + 10_500,
            leader=1,
            leader_epoch=1,
            replicas=(1, 2, 3),
            isr=(1, 2, 3),
            leader_leo=0,
            hw=0,
            replica_lag_time_max_ms=2000,
        )
    )
    events.append(ev("append", T0 + 10_600, leader_leo=5))
    for t in range(10_601, 17_000, 100):
        events.append(ev("fetch", T0 + t, replica=2, fetch_offset=5, leader_leo=5))
    cfg = monitor_config(replica_lag_time_max_ms=L)
    _, alerts, _ = run(events, cfg, advance=False)
    assert transitions(alerts, "ReplicaOutOfSync") == [("firing", 12401, "c1/t-0/3")]
    assert transitions(alerts, "UnderReplicated") == [("firing", 15000, "c1/t-0")]
