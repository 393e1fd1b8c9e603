"""Partition-level rules: fetch acceptance, ISR expansion and shrink, HW, AlterPartition, leader changes."""

import copy

import pytest

from replmon.state.partition import PartitionConfig

from .helpers import T, make, play

# ---- rejected fetches change nothing (docs/kafka-rules.md §1.2, §10.3) -------------------------------------


@pytest.mark.parametrize(
    "replica, offset, kw, reason",
    [
        pytest.param(
            4, 50, {}, "unassigned_replica", id="replica outside the assignment (followerReplicaOrThrow)"
        ),
        pytest.param(1, 50, {}, "unassigned_replica", id="the leader is not one of its own followers"),
        pytest.param(
            2, 101, {}, "offset_above_leader_leo", id="offset above the leader LEO (OffsetOutOfRange)"
        ),
        pytest.param(2, 9, {}, "offset_below_log_start", id="offset below the leader's log start"),
        pytest.param(
            2,
            50,
            {"error": "FENCED_LEADER_EPOCH"},
            "error:FENCED_LEADER_EPOCH",
            id="answered with an error: not an observation (KAFKA-8400)",
        ),
        pytest.param(2, 50, {"diverging_epoch": 4}, "diverging_epoch", id="answered with a diverging epoch"),
        pytest.param(
            2, 50, {"diverging_epoch": 0}, "diverging_epoch", id="diverging epoch 0 is still a divergence"
        ),
        pytest.param(
            2, 50, {"broker_epoch": 6}, "stale_broker_epoch", id="older broker incarnation (KAFKA-15221)"
        ),
    ],
)
def test_rejected_fetch_changes_no_state(replica, offset, kw, reason):
    p = make(isr=(1, 2), hw=40, leader_log_start_offset=10, broker_epochs={2: 7})
    play(p, [("fetch", 1, 2, 40), ("fetch", 2, 3, 40)])
    before = copy.deepcopy((p.followers, p.isr, p.maximal_isr, p.hw, p.pending))
    outcome = p.fetch(T + 50, replica, offset, **kw)
    assert (outcome.accepted, outcome.reject_reason, outcome.response_hw) == (False, reason, 40)
    assert not outcome.leo_changed and not outcome.hw_changed
    assert (p.followers, p.isr, p.maximal_isr, p.hw, p.pending) == before


@pytest.mark.parametrize(
    "offset, kw",
    [
        pytest.param(100, {}, id="offset equal to the leader LEO is in range"),
        pytest.param(10, {}, id="offset equal to the log start is in range"),
        pytest.param(50, {"diverging_epoch": False}, id="diverging_epoch false means none"),
        pytest.param(50, {"broker_epoch": -1}, id="broker epoch -1 is never stale"),
        pytest.param(50, {"broker_epoch": 8}, id="a newer broker epoch than cached is accepted"),
    ],
)
def test_accepted_fetch_edges(offset, kw):
    p = make(leader_log_start_offset=10, broker_epochs={2: 7})
    outcome = p.fetch(T + 1, 2, offset, **kw)
    assert outcome.accepted and outcome.reject_reason is None
    assert p.followers[2].leo == offset


def test_fetch_outcome_reports_pre_update_hw_and_changes():
    # Partition.readRecords captures initialHighWatermark before updateFollowerFetchState.
    p = make(isr=(1, 2), replicas=(1, 2), hw=0)
    first = p.fetch(T + 1, 2, 100)
    second = p.fetch(T + 2, 2, 100)
    assert first == (True, None, 0, True, True)
    assert second == (True, None, 100, False, False)


# ---- ISR expansion (docs/kafka-rules.md §4.1) --------------------------------------------------------------


# Partition: replicas 1,2,3, ISR {1,2}, leader LEO 100, HW 80, epoch start offset 60; follower 3 fetches.
@pytest.mark.parametrize(
    "setup, offset, fetch_kw, joins",
    [
        pytest.param([], 80, {}, True, id="LEO == HW and >= epoch start offset: proposed"),
        pytest.param([], 79, {}, False, id="LEO below the HW: not proposed"),
        pytest.param([], 100, {}, True, id="at the leader LEO: proposed"),
        pytest.param(
            [("broker", 3, {"fenced": True})],
            100,
            {},
            False,
            id="fenced broker is not ISR-eligible (KIP-841)",
        ),
        pytest.param(
            [("broker", 3, {"shutting_down": True})], 100, {}, False, id="broker in controlled shutdown"
        ),
        pytest.param(
            [("broker", 3, {"broker_epoch": 9})],
            100,
            {"broker_epoch": 10},
            False,
            id="stored broker epoch differs from the cached one (KIP-903)",
        ),
        pytest.param(
            [("broker", 3, {"broker_epoch": 9})],
            100,
            {"broker_epoch": 9},
            True,
            id="stored broker epoch matches the cached one",
        ),
        pytest.param(
            [("broker", 3, {"broker_epoch": 9})],
            100,
            {},
            True,
            id="a fetch without a broker epoch (-1) is eligible",
        ),
        pytest.param(
            [("append", 1, 300)],
            80,
            {},
            True,
            id="far behind the LEO and lcu 0: the time rule is not checked (KAFKA-19996)",
        ),
    ],
)
def test_expansion_conditions(setup, offset, fetch_kw, joins):
    p = make(isr=(1, 2), hw=80, leo=100, leader_epoch_start_offset=60, mode="manual")
    play(p, setup)
    assert p.fetch(T + 10, 3, offset, **fetch_kw).accepted
    assert (p.pending == "expand") is joins
    assert p.isr == (1, 2), "a proposal does not change the committed ISR"
    assert p.maximal_isr == ((1, 2, 3) if joins else (1, 2)), "PendingExpandIsr grows the maximal ISR at once"


def test_expansion_requires_epoch_start_offset():
    # KAFKA-7128: LEO >= HW is not enough, the follower must reach the new epoch's start offset.
    p = make(isr=(1, 2), hw=40, leo=100, leader_epoch_start_offset=60)
    p.fetch(T + 1, 3, 50)
    assert p.isr == (1, 2)
    p.fetch(T + 2, 3, 60)
    assert p.isr == (1, 2, 3)


def test_expansion_uses_hw_before_this_fetchs_update():
    # maybeExpandIsr runs before maybeIncrementLeaderHW (§1.3). Follower 2 (non-ISR, caught up by
    # time, below the epoch start offset so it cannot join) holds the HW at 50; by T+L+1 its credit
    # has expired, so a recompute before the expansion check would jump to the LEO (200) and 3 at
    # 100 would no longer qualify.
    p = make(replicas=(1, 2, 3), isr=(1,), leo=100, hw=50, followers={2: {"leo": 50, "last_caught_up_ms": T}})
    p.append(T + 1, 200)
    assert p.hw == 50, "caught-up eligible non-ISR follower holds the HW"
    p.fetch(T + 10001, 3, 100)
    assert p.isr == (1, 3), "joined against the HW before the fetch (50), not the recomputed one"
    assert p.hw == 100


def test_no_expansion_while_a_change_is_in_flight():
    p = make(isr=(1,), hw=100, leo=100, mode="manual")
    play(p, [("fetch", 1, 2, 100), ("fetch", 2, 3, 100)])
    assert p.pending == "expand" and p.maximal_isr == (1, 2)


# ---- high watermark (docs/kafka-rules.md §5.1) -------------------------------------------------------------


@pytest.mark.parametrize(
    "kw, steps, hw",
    [
        pytest.param(
            dict(isr=(1, 2, 3), hw=0),
            [("fetch", 1, 2, 50), ("fetch", 1, 3, 30)],
            30,
            id="min over the ISR followers' LEOs",
        ),
        pytest.param(
            dict(isr=(1, 2, 3), hw=0),
            [("fetch", 1, 2, 50)],
            0,
            id="an ISR follower with unknown LEO (-1) holds the HW",
        ),
        pytest.param(
            dict(isr=(1, 2), hw=100),
            [("fetch", 1, 3, 100), ("append", 2, 150), ("fetch", 3, 2, 150)],
            100,
            id="caught-up eligible non-ISR follower holds the HW (KAFKA-4485)",
        ),
        pytest.param(
            dict(isr=(1, 2), hw=100),
            [("fetch", 1, 3, 20), ("append", 2, 150), ("fetch", 3, 2, 150)],
            150,
            id="non-ISR follower that is not caught up does not hold it",
        ),
        pytest.param(
            dict(isr=(1, 2), hw=100, fenced=(3,)),
            [("fetch", 1, 3, 100), ("append", 2, 150), ("fetch", 3, 2, 150)],
            150,
            id="caught-up but fenced non-ISR follower does not hold it (KAFKA-15021)",
        ),
        pytest.param(
            dict(isr=(1, 2), hw=100, shutting_down=(3,)),
            [("fetch", 1, 3, 100), ("append", 2, 150), ("fetch", 3, 2, 150)],
            150,
            id="caught-up but shutting-down non-ISR follower does not hold it",
        ),
        pytest.param(
            dict(isr=(1, 2), replicas=(1, 2), hw=0),
            [("fetch", 1, 2, 90), ("broker", 2, {"fenced": True}), ("append", 2, 150)],
            90,
            id="a fenced ISR member still holds it: the maximal ISR counts regardless",
        ),
        pytest.param(
            dict(isr=(1, 2), replicas=(1, 2), hw=0),
            [("fetch", 1, 2, 90), ("fetch", 2, 2, 50)],
            90,
            id="never decreases: a follower whose offset went backwards",
        ),
        pytest.param(
            dict(isr=(1, 2), replicas=(1, 2), hw=0),
            [("append", 1, 150)],
            0,
            id="append with an unknown ISR follower LEO: no change",
        ),
        pytest.param(
            dict(isr=(1, 2), replicas=(1, 2), hw=0, min_isr=3),
            [("fetch", 1, 2, 100), ("append", 2, 150), ("fetch", 3, 2, 150)],
            150,
            id="min.insync.replicas above the replica count is capped (effective min 2)",
        ),
        pytest.param(
            dict(isr=(1,), replicas=(1, 2), hw=0, min_isr=3),
            [("append", 1, 150)],
            0,
            id="under the capped effective min ISR the HW is frozen (3.7+)",
        ),
        pytest.param(
            dict(isr=(1, 2), replicas=(1, 2, 3), hw=0, min_isr=3, mode="manual"),
            [("fetch", 1, 2, 100), ("fetch", 1, 3, 100)],
            0,
            id="frozen while the expansion that restores min ISR is pending (committed ISR counts)",
        ),
        pytest.param(
            dict(isr=(1, 2), replicas=(1, 2, 3), hw=0, min_isr=3, mode="manual"),
            [("fetch", 1, 2, 100), ("fetch", 1, 3, 100), ("answer", 2, "success")],
            100,
            id="moves once the controller commits the expansion",
        ),
    ],
)
def test_high_watermark(kw, steps, hw):
    p = make(**kw)
    play(p, steps)
    assert p.hw == hw


def test_hw_is_recomputed_only_on_its_triggers():
    # §5.1: a non-ISR follower whose credit expired keeps holding the HW until the next trigger. Follower 3 is
    # below the epoch start offset (100), so it cannot join and stays a non-ISR holder.
    p = make(replicas=(1, 2, 3), isr=(1,), leo=100, hw=90, followers={3: {"leo": 90, "last_caught_up_ms": T}})
    assert p.hw == 90
    play(p, [("tick", 20000), ("fetch", 20001, 3, 90)])
    assert not p.is_caught_up(3, T + 20001)
    assert p.hw == 90, "neither a tick nor a fetch that leaves the LEO unchanged recomputes the HW"
    play(p, [("append", 20002, 101)])
    assert p.hw == 101


def test_append_that_does_not_grow_the_leo_is_ignored():
    p = make(isr=(1,), leo=100, hw=100)
    assert p.append(T + 1, 90) is False
    assert p.leader_leo == 100


def test_makeleader_hw_recompute_runs_in_constructor():
    # makeLeader ends with maybeIncrementLeaderHW: given follower LEOs at the leader LEO, HW moves to it.
    p = make(isr=(1, 2), replicas=(1, 2), hw=50, followers={2: {"leo": 100}})
    assert p.hw == 100


# ---- partition predicates (docs/kafka-rules.md §3.4, §7) ---------------------------------------------------


@pytest.mark.parametrize(
    "replicas, adding, isr, min_isr, expected",
    [
        pytest.param((1, 2, 3), (), (1, 2), 2, (2, True, False, False, True), id="2 of 3 with min 2: at min"),
        pytest.param(
            (1, 2, 3), (), (1,), 2, (2, True, True, False, False), id="1 of 3 with min 2: under min"
        ),
        pytest.param((1, 2, 3), (), (1, 2, 3), 2, (2, False, False, False, False), id="full ISR"),
        pytest.param((1,), (), (1,), 2, (1, False, False, False, True), id="RF 1, min 2: effective min 1"),
        pytest.param(
            (1, 2, 4),
            (4,),
            (1, 2),
            3,
            (3, False, True, False, False),
            id="adding replicas count for min ISR but not for the replication factor",
        ),
        pytest.param(
            (1, 2, 3), (), (1,), 1, (1, True, False, False, True), id="leader-only ISR, min 1: at min"
        ),
    ],
)
def test_partition_predicates(replicas, adding, isr, min_isr, expected):
    p = make(replicas=replicas, adding_replicas=adding, isr=isr, min_isr=min_isr)
    got = (p.effective_min_isr, p.under_replicated, p.under_min_isr, False, p.at_min_isr)
    assert got == expected


def test_config_is_replaceable():
    p = make(isr=(1, 2), min_isr=1)
    assert not p.under_min_isr
    p.config = PartitionConfig(replica_lag_time_max_ms=10000, min_insync_replicas=3)
    assert p.under_min_isr


@pytest.mark.parametrize(
    "kw, message",
    [
        pytest.param(dict(alter_partition="later"), "alter_partition", id="unknown AlterPartition mode"),
        pytest.param(dict(rule_set="v1_0"), "rule_set", id="unknown rule set"),
        pytest.param(dict(replica_lag_time_max_ms=0), "replica_lag_time_max_ms", id="L must be positive"),
        pytest.param(dict(min_insync_replicas=0), "min_insync_replicas", id="min ISR must be positive"),
    ],
)
def test_partition_config_is_validated(kw, message):
    with pytest.raises(ValueError, match=message):
        PartitionConfig(**kw)
