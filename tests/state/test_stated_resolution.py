"""The compaction resolution a cluster's source states on its heartbeats (docs/events.md,
`heartbeat`) is the one the engine allows for in its silences (state/monitor.py
quiet_after_ms); alerts.compaction_resolution_ms stands only for a source that states none."""

from __future__ import annotations

import pytest

from replmon.state.bucket import Bucket
from replmon.state.codec import decode, encode
from replmon.state.events import as_tuple, event
from replmon.streaming.settings import monitor_config

T = 1_000_000
L_MS = 30_000  # resolution at most L/4 = 7.5 s
ASSIGNED = {"replicas": [1, 2], "isr": [1, 2], "leader_leo": 100, "replica_lag_time_max_ms": L_MS}


def replica_state(
    configured: int,
    stated: int | None,
    quiet_ms: int,
    scheme: str | None = None,
    lag_ms: int = L_MS,
    configured_scheme: str = "fixed",
) -> str:
    """Follower 2's state `quiet_ms` after its last (caught-up) fetch, with alerts.stuck_after_ms
    3 s, the settings `configured` and `configured_scheme`, the heartbeat stating `stated` (None:
    not at all) and `scheme`, and the partition's L `lag_ms`."""
    cfg = monitor_config(compaction_resolution_ms=configured, compaction_scheme=configured_scheme)
    assigned = {**ASSIGNED, "replica_lag_time_max_ms": lag_ms}
    events = [
        event("metadata", T, "c", topic="t", partition=0, leader=1, leader_epoch=1, **assigned),
        event("heartbeat", T, "c", compaction_resolution_ms=stated, compaction_scheme=scheme),
        event("fetch", T + 10, "c", topic="t", partition=0, replica=2, fetch_offset=100, leader_leo=100),
        # the partition's own time moves on: an append that does not grow the LEO
        event("append", T + 10 + quiet_ms, "c", topic="t", partition=0, leader_leo=100),
    ]
    bucket = Bucket(0, 1)
    bucket.process([as_tuple(e) for e in events], cfg, [], [])
    replicas: list = []
    bucket.statuses(cfg, [], replicas, force=True)
    (row,) = replicas
    return row["state"]


@pytest.mark.parametrize(
    "configured, stated, state",
    [
        # no compaction said anywhere: silent after alerts.stuck_after_ms (3 s)
        (0, None, "stuck"),
        # the source compacts to 7.5 s: a 5 s gap is its resolution, not a silence
        (0, 7500, "caught_up"),
        # a source that states none: the setting stands for it
        (7500, None, "caught_up"),
        # the stated value wins over a setting that disagrees (the source sends every event)
        (7500, 0, "stuck"),
        # 1 s (the collector's default, L/8 at most 1 s) fits in stuck_after_ms: no allowance
        (0, 1000, "stuck"),
    ],
)
def test_the_stated_resolution_decides_when_a_caught_up_follower_looks_stuck(configured, stated, state):
    assert replica_state(configured, stated, quiet_ms=5000) == state


@pytest.mark.parametrize(
    "lag_ms, state",
    [
        # L = 30 s: the default resolution is L/10 = 3 s, so a 5 s gap is within 3 s + 3.5 s
        (30_000, "caught_up"),
        # L = 10 s: the default resolution is 1 s, no allowance: 5 s quiet is stuck
        (10_000, "stuck"),
    ],
)
def test_the_lag_scheme_allows_for_each_partitions_own_resolution(lag_ms, state):
    """`replmon collect`'s default compacts each partition by its L and states the largest
    (3 s) with the scheme "lag": a partition at L = 10 s is compacted at 1 s and must not be
    given 3 s of allowance."""
    assert replica_state(0, 3000, quiet_ms=5000, scheme="lag", lag_ms=lag_ms) == state
    # the same from the settings, for a source that states none
    assert replica_state(0, None, quiet_ms=5000, lag_ms=lag_ms, configured_scheme="lag") == state


def test_a_stated_resolution_is_kept_in_the_stored_state():
    """It is stated once a heartbeat: a restored bucket keeps it until the next one."""
    cfg = monitor_config()
    bucket = Bucket(0, 1)
    bucket.process([as_tuple(event("heartbeat", T, "c", compaction_resolution_ms=7500))], cfg, [], [])
    back = decode(encode(bucket), bucket_id=0, buckets=1, cfg=cfg)
    assert back.clusters["c"].config(cfg).compaction_resolution_ms == 7500
    # and a later heartbeat that states nothing (an older collector) leaves it as it was
    back.process([as_tuple(event("heartbeat", T + 1000, "c"))], cfg, [], [])
    assert back.clusters["c"].config(cfg).compaction_resolution_ms == 7500
    # and so is a stated scheme
    back.process(
        [as_tuple(event("heartbeat", T + 2000, "c", compaction_resolution_ms=3000, compaction_scheme="lag"))],
        cfg,
        [],
        [],
    )
    again = decode(encode(back), bucket_id=0, buckets=1, cfg=cfg).clusters["c"].config(cfg)
    assert (again.compaction_resolution_ms, again.compaction_scheme) == (3000, "lag")


def busy_follower_state(configured: int, stated: int | None) -> str:
    """Follower 2's state 4 s after the last moment it was caught up (its fetch at the leader's
    LEO 100), having fetched again 1 s before, still at 100 after an append to 110: Kafka's
    previous-fetch credit keeps its lcu at the first fetch (docs/kafka-rules.md §1.2)."""
    cfg = monitor_config(compaction_resolution_ms=configured)
    fetch = {"topic": "t", "partition": 0, "replica": 2, "fetch_offset": 100}
    events = [
        event("metadata", T, "c", topic="t", partition=0, leader=1, leader_epoch=1, **ASSIGNED),
        event("heartbeat", T, "c", compaction_resolution_ms=stated),
        event("fetch", T + 10, "c", leader_leo=100, **fetch),
        event("append", T + 20, "c", topic="t", partition=0, leader_leo=110),
        event("fetch", T + 3010, "c", leader_leo=110, **fetch),
        event("append", T + 4010, "c", topic="t", partition=0, leader_leo=110),
    ]
    bucket = Bucket(0, 1)
    bucket.process([as_tuple(e) for e in events], cfg, [], [])
    replicas: list = []
    bucket.statuses(cfg, [], replicas, force=True)
    (row,) = replicas
    assert (row["lag_ms"], row["lag_messages"]) == (4000, 10)
    return row["state"]


@pytest.mark.parametrize(
    "configured, stated, state",
    [
        # every event sent: 4 s behind is past alerts.caught_up_grace_ms (2 s)
        (0, None, "slow"),
        (0, 1000, "slow"),
        # compacted to 3 s, a follower that keeps up is credited only at its sent fetches, up to
        # 3 s and a parked fetch apart: the grace allows for them
        (0, 3000, "caught_up"),
        (3000, None, "caught_up"),
        (3000, 0, "slow"),
    ],
)
def test_the_stated_resolution_widens_the_caught_up_grace_as_it_widens_silences(configured, stated, state):
    assert busy_follower_state(configured, stated) == state
