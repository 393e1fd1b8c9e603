"""When a partition's conditions may next change (state/deadlines.py): the isr-expiration runs
that can remove a follower, and a follower's own deadlines. Times are offsets from T; with
L = 10 s the leader's isr-expiration task runs at every multiple of 5 s."""

from collections import Counter

import pytest

from replmon.state.alert_rules import PartitionFacts, ReplicaFacts
from replmon.state.deadlines import NEVER, follower_deadline, isr_expiration_due, refresh_due, run_after

from .helpers import T, make

L = 10_000
FIRST = T + 5_000  # the next run after T (T is a multiple of L/2)


@pytest.mark.parametrize(
    "lag, t, expected, why",
    [
        (L, T, T + 5_000, "a run at t itself is not after t"),
        (L, T + 1, T + 5_000, "the next multiple of L/2"),
        (L, T + 4_999, T + 5_000, "just before a run"),
        (L, T + 5_000, T + 10_000, "on a run: the one after"),
        (3, 10, 11, "L/2 rounds down (3 -> 1 ms)"),
        (1, 10, 11, "at least every ms, never every 0 ms"),
    ],
)
def test_run_after(lag, t, expected, why):
    assert run_after(lag, t) == expected, why


def at_leo(**kw):
    return {"leo": 100, "last_caught_up_ms": T, **kw}


@pytest.mark.parametrize(
    "followers, rule_set, every_run, expected, why",
    [
        ({2: at_leo(), 3: at_leo()}, "current", False, NEVER, "every ISR follower at the LEO: KAFKA-7152"),
        ({2: at_leo(), 3: at_leo()}, "current", True, FIRST, "every run when asked for every run"),
        ({2: at_leo(), 3: at_leo()}, "v0_8", False, FIRST, "the older rule sets have no exemption"),
        (
            {2: at_leo(leo=90), 3: at_leo()},
            "current",
            False,
            T + 15_000,
            "2 fails isCaughtUp at T + L + 1: the first run after is T + 15 s, not T + 10 s",
        ),
        (
            {2: at_leo(leo=90, last_caught_up_ms=T - 1), 3: at_leo()},
            "current",
            False,
            T + 10_000,
            "2 fails isCaughtUp at T + 10 s, itself a run: that run",
        ),
        (
            {2: at_leo(leo=90, last_caught_up_ms=T - 30_000), 3: at_leo()},
            "current",
            False,
            FIRST,
            "2 is already out of sync: the next run",
        ),
        (
            {2: at_leo(leo=90, last_caught_up_ms=T + 2_000), 3: at_leo(leo=95)},
            "current",
            False,
            T + 15_000,
            "the earlier of two (3 at T + 10 001)",
        ),
    ],
)
def test_isr_expiration_due(followers, rule_set, every_run, expected, why):
    p = make(lag=L, rule_set=rule_set, followers=followers)
    assert isr_expiration_due(p, FIRST, every_run) == expected, why


def test_a_follower_out_of_the_isr_cannot_be_removed_so_needs_no_run():
    p = make(lag=L, isr=(1, 3), followers={2: at_leo(leo=10, last_caught_up_ms=T - 60_000), 3: at_leo()})
    assert isr_expiration_due(p, FIRST, False) == NEVER


FAR = T + 1_000_000  # a deadline nothing here comes before


@pytest.mark.parametrize(
    "follower, in_isr, exits, now, expected, why",
    [
        (at_leo(last_fetch_ms=T), True, None, T + 100, FAR, "at the LEO: exempt, nothing to come"),
        (at_leo(leo=90, last_fetch_ms=T), True, None, T + 100, T + 5_001, "lag passes the imminent fraction"),
        (at_leo(leo=90, last_fetch_ms=T), True, None, T + 5_001, T + 10_001, "then the limit"),
        (
            at_leo(leo=90, last_fetch_ms=T - 8_000),
            True,
            None,
            T + 100,
            T + 2_001,
            "no fetch for L comes first",
        ),
        (at_leo(leo=90, last_fetch_ms=T), True, None, T + 10_001, FAR, "all passed: the run removes it"),
        (
            at_leo(leo=10, last_fetch_ms=T),
            False,
            [T + 1_000],
            T + 100,
            T + 61_000,
            "its oldest exit leaves the window",
        ),
        (
            at_leo(leo=10, last_fetch_ms=T),
            False,
            None,
            T + 100,
            FAR,
            "out of the ISR, no exit: nothing to come",
        ),
    ],
)
def test_follower_deadline(follower, in_isr, exits, now, expected, why):
    isr = (1, 2, 3) if in_isr else (1, 3)
    p = make(lag=L, isr=isr, followers={2: follower, 3: at_leo()})
    f = ReplicaFacts(PartitionFacts(p, now), 2, in_isr, imminent_after_ms=5_000)
    assert follower_deadline(p, p.followers[2], f, exits, 60_000, FAR, now) == expected, why


@pytest.mark.parametrize(
    "refresh_ms, grid_ms, waves",
    [
        (300_000, 10_000, 30),  # 5 min: a thirtieth of the period
        (1_800_000, 10_000, 180),  # 30 min (the default): more waves, no larger ones
        (10_000, 333, 31),  # short periods keep thirtieths (the rounding adds one)
    ],
)
def test_refresh_repeats_come_in_waves_at_most_10_s_apart(refresh_ms, grid_ms, waves):
    # 3,000 partitions' repeats after a status sent at T: each lands on the wave grid, within one
    # period and one wave of T, and the waves spread them: none holds more than a few times its
    # even share (a wave is a burst of status records: docs/outputs.md).
    due = [refresh_due("c1", "t", p, T, refresh_ms) for p in range(3_000)]
    assert all(d % grid_ms == 0 and T < d <= T + refresh_ms + grid_ms for d in due)
    per_wave = Counter(due)
    assert len(per_wave) == waves
    assert max(per_wave.values()) <= 3 * 3_000 / waves
