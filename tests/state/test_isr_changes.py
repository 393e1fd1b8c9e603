"""ISR shrink, the AlterPartition pending states and their answers, and leader changes.

docs/kafka-rules.md §1.4, §3, §10.3."""

import dataclasses

import pytest

from replmon.state.partition import (
    NON_RETRIABLE_ALTER_PARTITION_ERRORS,
    CommittedIsr,
    PendingExpandIsr,
    PendingShrinkIsr,
)

from .helpers import T, make, play

L = 10000


# ---- shrink (docs/kafka-rules.md §2.2, §3.3) ---------------------------------------------------------------


# Partition 1,2,3 with ISR {1,2,3}, leader LEO 100, HW 100; followers 2 and 3 fetched at the LEO at T+0.
@pytest.mark.parametrize(
    "steps, tick_at, proposed, isr",
    [
        pytest.param([], L, (), (1, 2, 3), id="at the LEO: never out of sync however long (KAFKA-7152)"),
        pytest.param([("append", 1, 150)], L, (), (1, 2, 3), id="now - lcu == L: still in sync (<=)"),
        pytest.param(
            [("append", 1, 150)], L + 1, (2, 3), (1,), id="now - lcu == L+1: all out-of-sync removed at once"
        ),
        pytest.param(
            [("append", 1, 150), ("fetch", 5000, 2, 150)],
            L + 1,
            (3,),
            (1, 2),
            id="only the follower that did not catch up is removed",
        ),
        pytest.param(
            [("append", 1, 150), ("fetch", 5000, 2, 120), ("fetch", 9000, 2, 150)],
            L + 1,
            (3,),
            (1, 2),
            id="a fetch at the LEO refreshes lcu",
        ),
        pytest.param(
            [("append", 1, 150), ("fetch", 9000, 2, 140)],
            L + 1,
            (2, 3),
            (1,),
            id="a fetch below the LEO (and the previous fetch's LEO) earns nothing",
        ),
    ],
)
def test_shrink(steps, tick_at, proposed, isr):
    p = make(isr=(1, 2, 3), leo=100, hw=100)
    play(p, [("fetch", 0, 2, 100), ("fetch", 0, 3, 100), *steps])
    assert p.isr_expiration(T + tick_at) == proposed
    assert p.isr == isr


def test_shrink_ignores_min_isr_and_releases_the_hw():
    # §3.4: the leader shrinks below min.insync.replicas; the committed shrink re-runs maybeIncrementLeaderHW,
    # which the min-ISR gate then freezes.
    p = make(isr=(1, 2, 3), leo=100, hw=0, min_isr=2)
    play(p, [("fetch", 0, 2, 100)])
    assert p.hw == 0
    assert p.isr_expiration(T + L + 1) == (3,)
    assert p.hw == 100, "3 (LEO unknown) no longer holds it; ISR {1,2} meets min 2"
    play(p, [("append", L + 2, 200)])
    assert p.isr_expiration(T + 2 * L + 3) == (2,)
    assert p.isr == (1,) and p.under_min_isr
    play(p, [("append", 2 * L + 4, 300)])
    assert p.hw == 100, "frozen under min ISR"


def test_isr_member_without_replica_state_counts_out_of_sync():
    # Partition.getOutOfSyncReplicas: an ISR id with no Replica object is out of sync.
    p = make(replicas=(1, 2), isr=(1, 2), leo=100, hw=100)
    p.controller_update(T + 1, isr=(1, 2, 7), leader_epoch=5)
    assert p.out_of_sync_replicas(T + 1) == (7,)


def test_out_of_sync_is_empty_while_in_flight_unless_ignored():
    p = make(replicas=(1, 2), isr=(1, 2), leo=100, hw=0, mode="manual")
    assert p.isr_expiration(T + L + 1) == (2,)
    assert p.out_of_sync_replicas(T + L + 2) == ()
    assert p.out_of_sync_replicas(T + L + 2, ignore_inflight=True) == (2,)


# ---- AlterPartition pending states and answers (docs/kafka-rules.md §3.5) ----------------------------------


def _pending_shrink():
    p = make(replicas=(1, 2, 3), isr=(1, 2, 3), leo=100, hw=0, mode="manual")
    play(p, [("fetch", 0, 2, 100)])
    assert p.isr_expiration(T + L + 1) == (3,)
    assert (p.pending, p.isr, p.maximal_isr, p.hw) == ("shrink", (1, 2, 3), (1, 2, 3), 0), (
        "PendingShrinkIsr does not assume the shrink"
    )
    return p


def _pending_expand():
    p = make(replicas=(1, 2, 3), isr=(1, 2), leo=100, hw=100, mode="manual")
    play(p, [("fetch", 0, 2, 100), ("fetch", 0, 3, 100)])
    assert (p.pending, p.isr, p.maximal_isr) == ("expand", (1, 2), (1, 2, 3))
    return p


@pytest.mark.parametrize(
    "make_pending, answer, expected",
    [
        pytest.param(
            _pending_shrink,
            ("success",),
            (None, (1, 2), (1, 2), 100, 0),
            id="shrink committed: ISR shrinks and the HW moves",
        ),
        pytest.param(
            _pending_expand, ("success",), (None, (1, 2, 3), (1, 2, 3), 100, 0), id="expansion committed"
        ),
        pytest.param(
            _pending_shrink,
            ("error", "INELIGIBLE_REPLICA"),
            (None, (1, 2, 3), (1, 2, 3), 0, 1),
            id="INELIGIBLE_REPLICA reverts to the committed state",
        ),
        pytest.param(
            _pending_expand,
            ("error", "OPERATION_NOT_ATTEMPTED"),
            (None, (1, 2), (1, 2), 100, 1),
            id="OPERATION_NOT_ATTEMPTED reverts an expansion: maximal ISR back to committed",
        ),
        pytest.param(
            _pending_shrink,
            ("error", "NETWORK_EXCEPTION"),
            ("shrink", (1, 2, 3), (1, 2, 3), 0, 1),
            id="other errors stay pending (and are resubmitted)",
        ),
        pytest.param(
            _pending_expand,
            ("error", "UNKNOWN_SERVER_ERROR"),
            ("expand", (1, 2), (1, 2, 3), 100, 1),
            id="unexpected error on an expansion stays pending",
        ),
    ],
)
def test_alter_partition_answers(make_pending, answer, expected):
    p = make_pending()
    p.alter_partition_response(T + L + 2, *answer)
    assert (p.pending, p.isr, p.maximal_isr, p.hw, p.failed_isr_updates) == expected


@pytest.mark.parametrize(
    "error, retried",
    [
        *[
            pytest.param(e, False, id=f"{e}: pending, not retried, frozen until new metadata")
            for e in sorted(NON_RETRIABLE_ALTER_PARTITION_ERRORS)
        ],
        pytest.param("NETWORK_EXCEPTION", True, id="NETWORK_EXCEPTION: pending and resubmitted"),
        pytest.param(None, True, id="an error without a code is treated as retriable"),
    ],
)
def test_alter_partition_errors_that_stay_pending(error, retried):
    p = _pending_shrink()
    p.alter_partition_response(T + L + 2, "error", error)
    assert (p.pending, p.pending_retry) == ("shrink", retried)
    assert p.isr_expiration(T + 3 * L) == (), "no new proposal while a change is in flight"
    p.controller_update(T + 3 * L + 1, isr=(1, 2), leader_epoch=5)
    assert (p.pending, p.isr, p.hw) == (None, (1, 2), 100), "new metadata unfreezes it"


def test_answer_without_pending_change_is_ignored():
    p = make(isr=(1, 2, 3), mode="manual")
    p.alter_partition_response(T + 1, "success")
    assert (p.pending, p.isr, p.isr_expands, p.isr_shrinks) == (None, (1, 2, 3), 0, 0)


def test_counters_follow_kafka_meters():
    p = _pending_shrink()
    p.alter_partition_response(T + L + 2, "error", "NETWORK_EXCEPTION")
    p.alter_partition_response(T + L + 3, "success")
    assert (p.isr_shrinks, p.isr_expands, p.failed_isr_updates) == (1, 0, 1)


def test_bad_answer_result_is_refused():
    with pytest.raises(ValueError, match="result"):
        make().alter_partition_response(T, "maybe")


# ---- leader changes and controller updates (docs/kafka-rules.md §1.4) --------------------------------------


def _led():
    """Followers 2 (ISR, at 100) and 3 (non-ISR, at 40), leader LEO 100, epoch 5."""
    p = make(replicas=(1, 2, 3), isr=(1, 2), leo=100, hw=100)
    play(p, [("fetch", 10, 2, 100), ("fetch", 20, 3, 40)])
    return p


def _states(p):
    return {
        r: (s.leo, s.last_caught_up_ms, s.last_fetch_leader_leo, s.last_fetch_ms)
        for r, s in p.followers.items()
    }


@pytest.mark.parametrize(
    "update, expected_states, start_offset",
    [
        pytest.param(
            dict(isr=(1, 2), leader_epoch=6, is_new_leader=False),
            {2: (100, T + 5000, 100, T + 5000), 3: (40, 0, 100, 0)},
            100,
            id="re-elected: LEOs kept, lflo = LEO, ISR lcu = lft = now, non-ISR 0/0",
        ),
        pytest.param(
            dict(isr=(1, 2), leader_epoch=6, is_new_leader=True, leader_leo=120, hw=90),
            {2: (-1, T + 5000, -1, 0), 3: (-1, 0, -1, 0)},
            120,
            id="new leader: LEOs unknown, lflo -1, lft 0; epoch start = new leader LEO",
        ),
        pytest.param(
            dict(isr=(1, 2, 3), leader_epoch=5),
            {2: (100, T + 10, 100, T + 10), 3: (40, 0, 100, T + 20)},
            100,
            id="same epoch: no reset, epoch start unchanged",
        ),
        pytest.param(
            dict(isr=(1,), leader_epoch=4, is_new_leader=True),
            {2: (100, T + 10, 100, T + 10), 3: (40, 0, 100, T + 20)},
            100,
            id="older epoch: ignored",
        ),
    ],
)
def test_controller_update_resets(update, expected_states, start_offset):
    p = _led()
    p.controller_update(T + 5000, **update)
    assert _states(p) == expected_states
    assert p.leader_epoch_start_offset == start_offset


def test_controller_update_replaces_isr_and_assignment():
    p = _led()
    p.controller_update(T + 30, isr=(1, 2), leader_epoch=5, replicas=(1, 2, 4), adding_replicas=(4,))
    assert set(p.followers) == {2, 4}, "removed replica's state dropped, added one created"
    s = p.followers[4]
    assert (s.leo, s.last_caught_up_ms, s.last_fetch_leader_leo, s.last_fetch_ms) == (-1, 0, 0, 0), (
        "a new Replica starts as ReplicaState.Empty"
    )
    assert p.adding_replicas == (4,) and not p.under_replicated


def test_controller_update_recomputes_hw():
    # Kafka's PartitionTest.testHighWatermarkIncreasesWithFencedOrShutdownFollower:
    # a controller-side shrink releases it.
    p = make(replicas=(1, 2), isr=(1, 2), leo=10, hw=0)
    play(p, [("fetch", 0, 2, 10), ("append", 0, 20), ("broker", 2, {"fenced": True})])
    assert p.hw == 10
    p.controller_update(T, isr=(1,), leader_epoch=5)
    assert p.hw == 20


def test_new_epoch_clears_pending_and_timers_start_at_election():
    p = _pending_shrink()
    p.controller_update(T + L + 5, isr=(1, 2, 3), leader_epoch=6)
    assert (p.pending, p.maximal_isr) == (None, (1, 2, 3))
    assert p.out_of_sync_replicas(T + 2 * L + 5) == (), "ISR members' lcu restarts at the election"
    assert p.out_of_sync_replicas(T + 2 * L + 6) == (3,)


@pytest.mark.parametrize(
    "state, maximal_isr, is_inflight",
    [
        pytest.param(CommittedIsr((1, 2)), (1, 2), False, id="committed: the HW waits for the ISR"),
        pytest.param(
            PendingExpandIsr((1, 2), (3,)), (1, 2, 3), True, id="expand: the HW waits for the joiner at once"
        ),
        pytest.param(
            PendingShrinkIsr((1, 2, 3), (3,)), (1, 2, 3), True, id="shrink: the HW still waits for the leaver"
        ),
    ],
)
def test_each_isr_state_derives_its_maximal_isr_and_whether_a_change_is_in_flight(
    state, maximal_isr, is_inflight
):
    assert (state.maximal_isr, state.is_inflight) == (maximal_isr, is_inflight)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.isr = ()  # one value, replaced whole on every change


def test_every_answer_replaces_the_isr_state_whole():
    p = _pending_expand()
    before = p.isr_state
    p.alter_partition_response(T + L + 2, "error", "FENCED_LEADER_EPOCH")
    assert (before.retry, p.isr_state.retry, p.isr_state.replica_ids) == (True, False, (3,))
    assert before is not p.isr_state, "the state a caller read is not changed under it"
