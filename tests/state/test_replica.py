"""Rules on one follower's ReplicaState (docs/kafka-rules.md §1.1, §1.2, §1.4, §2.1)."""

import dataclasses

import pytest

from replmon.state.replica import (
    ReplicaState,
    is_broker_epoch_isr_eligible,
    is_caught_up,
    is_stale_broker_epoch,
    reset_replica_state,
    update_fetch_state,
)

L = 30000
T = 1_000_000


@pytest.mark.parametrize(
    "leo, lcu, leader_leo, now, expected",
    [
        pytest.param(
            10, T, 10, T + 10 * L, True, id="LEO equals leader LEO: caught up however old lcu is (KAFKA-7152)"
        ),
        pytest.param(9, T, 10, T + L, True, id="now - lcu == L is still caught up (<=)"),
        pytest.param(9, T, 10, T + L + 1, False, id="now - lcu == L + 1 is out of sync"),
        pytest.param(9, T, 10, T, True, id="caught up at lcu itself"),
        pytest.param(
            -1, T, 10, T + L, True, id="unknown LEO after election: only the time clause, still within L"
        ),
        pytest.param(-1, 0, 10, T, False, id="unknown LEO and lcu never: not caught up"),
        pytest.param(-1, 0, -1, T, True, id="LEO equality also holds for two unknowns (plain ==)"),
        pytest.param(11, 0, 10, T, False, id="LEO above leader LEO is not 'equal': time clause only"),
    ],
)
def test_is_caught_up(leo, lcu, leader_leo, now, expected):
    state = ReplicaState(leo=leo, last_caught_up_ms=lcu)
    assert is_caught_up(state, leader_leo, now, L) is expected


# (lcu, lflo, lft) before; fetch (offset, time, leader LEO E); (lcu, lflo, lft, leo) after.
@pytest.mark.parametrize(
    "before, fetch, after",
    [
        pytest.param((0, 0, 0), (10, T, 10), (T, 10, T, 10), id="fetch at the LEO: lcu = fetch time"),
        pytest.param(
            (0, 0, 0), (12, T, 10), (T, 10, T, 12), id="fetch above E still counts as at the LEO (f >= E)"
        ),
        pytest.param(
            (0, 10, T),
            (10, T + 500, 15),
            (T, 15, T + 500, 10),
            id="reached the LEO of the previous fetch: lcu = previous fetch time",
        ),
        pytest.param((0, 10, T), (5, T + 500, 15), (0, 15, T + 500, 5), id="below both: lcu unchanged"),
        pytest.param(
            (T + 100, 10, T),
            (10, T + 500, 15),
            (T + 100, 15, T + 500, 10),
            id="previous-fetch credit never lowers lcu (max)",
        ),
        pytest.param(
            (T + 900, 10, T),
            (20, T + 500, 20),
            (T + 900, 20, T + 500, 20),
            id="a fetch time older than lcu never lowers lcu (max)",
        ),
        pytest.param(
            (T, 20, T),
            (3, T + 500, 15),
            (T, 20, T + 500, 3),
            id="lflo = max(E, lflo): a smaller E does not lower it (3.3+)",
        ),
        pytest.param(
            (T, -1, 0),
            (3, T + 500, 10),
            (T, 10, T + 500, 3),
            id="after a new-leader reset (lflo -1, lft 0) the first fetch earns no credit",
        ),
    ],
)
def test_update_fetch_state(before, fetch, after):
    lcu, lflo, lft = before
    state = ReplicaState(last_caught_up_ms=lcu, last_fetch_leader_leo=lflo, last_fetch_ms=lft)
    offset, t, leader_leo = fetch
    update_fetch_state(state, fetch_offset=offset, fetch_time_ms=t, leader_leo=leader_leo)
    assert (state.last_caught_up_ms, state.last_fetch_leader_leo, state.last_fetch_ms, state.leo) == after


def test_update_fetch_state_reproduces_kafka_replica_test():
    # ReplicaTest.testUpdateFetchState: three fetches at one instant.
    state = ReplicaState()
    update_fetch_state(state, fetch_offset=5, fetch_time_ms=T, leader_leo=10, log_start_offset=1)
    assert (state.last_caught_up_ms, state.last_fetch_leader_leo) == (0, 10)
    update_fetch_state(state, fetch_offset=10, fetch_time_ms=T + 1, leader_leo=15, log_start_offset=2)
    assert (state.last_caught_up_ms, state.last_fetch_leader_leo) == (T, 15)
    update_fetch_state(state, fetch_offset=15, fetch_time_ms=T + 2, leader_leo=15, log_start_offset=3)
    assert (state.last_caught_up_ms, state.log_start_offset, state.last_fetch_ms) == (T + 2, 3, T + 2)


@pytest.mark.parametrize(
    "fetch_epoch, stored_after",
    [
        pytest.param(7, 7, id="the fetch's broker epoch is stored"),
        pytest.param(
            None, -1, id="a fetch without a broker epoch stores -1, as Kafka's default replicaEpoch"
        ),
    ],
)
def test_update_fetch_state_stores_broker_epoch(fetch_epoch, stored_after):
    state = ReplicaState(broker_epoch=3)
    update_fetch_state(state, fetch_offset=0, fetch_time_ms=T, leader_leo=0, broker_epoch=fetch_epoch)
    assert state.broker_epoch == stored_after


@pytest.mark.parametrize(
    "is_new_leader, in_sync, expected",
    [
        pytest.param(
            True,
            True,
            dict(
                leo=-1,
                log_start_offset=-1,
                last_caught_up_ms=T,
                last_fetch_leader_leo=-1,
                last_fetch_ms=0,
                broker_epoch=None,
            ),
            id="new leader, follower in ISR: offsets unknown, lcu = now",
        ),
        pytest.param(
            True,
            False,
            dict(
                leo=-1,
                log_start_offset=-1,
                last_caught_up_ms=0,
                last_fetch_leader_leo=-1,
                last_fetch_ms=0,
                broker_epoch=None,
            ),
            id="new leader, follower not in ISR: lcu 0 (never)",
        ),
        pytest.param(
            False,
            True,
            dict(
                leo=10,
                log_start_offset=2,
                last_caught_up_ms=T,
                last_fetch_leader_leo=11,
                last_fetch_ms=T,
                broker_epoch=7,
            ),
            id="re-elected, in ISR: LEO kept, lflo = leader LEO, lcu = lft = now",
        ),
        pytest.param(
            False,
            False,
            dict(
                leo=10,
                log_start_offset=2,
                last_caught_up_ms=0,
                last_fetch_leader_leo=11,
                last_fetch_ms=0,
                broker_epoch=7,
            ),
            id="re-elected, not in ISR: lcu = lft = 0 so it earns no time credit",
        ),
    ],
)
def test_reset_replica_state(is_new_leader, in_sync, expected):
    state = ReplicaState(
        leo=10,
        log_start_offset=2,
        last_caught_up_ms=T - 5000,
        last_fetch_leader_leo=10,
        last_fetch_ms=T - 5000,
        broker_epoch=7,
    )
    reset_replica_state(
        state, now_ms=T, leader_leo=11, is_new_leader=is_new_leader, is_follower_in_sync=in_sync
    )
    got = {k: getattr(state, k) for k in expected}
    assert got == expected
    assert state.leo_update_ms == state.read_to_log_end_ms == T, "legacy timers start at the election"


def test_empty_state_matches_kafka_replica_state_empty():
    # ReplicaTest.testInitialState
    assert dataclasses.astuple(ReplicaState())[:6] == (-1, -1, 0, 0, 0, None)


@pytest.mark.parametrize(
    "fetch_epoch, cached, stale",
    [
        pytest.param(5, 6, True, id="cache knows a newer incarnation: stale (KAFKA-15221)"),
        pytest.param(6, 6, False, id="same epoch: fine"),
        pytest.param(7, 6, False, id="fetch newer than the cache: not stale (cache lags)"),
        pytest.param(-1, 6, False, id="-1 (no epoch sent) is accepted"),
        pytest.param(None, 6, False, id="no epoch on the event is accepted"),
        pytest.param(5, None, False, id="unknown cached epoch: nothing to compare"),
    ],
)
def test_is_stale_broker_epoch(fetch_epoch, cached, stale):
    assert is_stale_broker_epoch(fetch_epoch, cached) is stale


@pytest.mark.parametrize(
    "stored, cached, eligible",
    [
        pytest.param(6, 6, True, id="stored equals cached"),
        pytest.param(-1, 6, True, id="stored -1 (fetch sent none) is eligible"),
        pytest.param(5, 6, False, id="stored differs from cached: not eligible (KIP-903)"),
        pytest.param(
            None, 6, False, id="no fetch since reset while the cache knows the broker: not eligible"
        ),
        pytest.param(5, None, True, id="cache has no epoch for the broker: not checked"),
    ],
)
def test_is_broker_epoch_isr_eligible(stored, cached, eligible):
    assert is_broker_epoch_isr_eligible(stored, cached) is eligible
