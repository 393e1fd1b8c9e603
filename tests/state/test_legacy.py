"""Out-of-sync rules of older Kafka versions (docs/kafka-rules.md §3.2, §9, §10.4 `legacy`)."""

import pytest

from replmon.state.legacy import (
    is_out_of_sync,
    is_out_of_sync_v0_8,
    is_out_of_sync_v0_9_to_0_10_1,
    is_out_of_sync_v0_10_2_to_2_0,
)
from replmon.state.replica import ReplicaState

from .helpers import T, make, play

L = 10000


@pytest.mark.parametrize(
    "leo, leo_update_ms, leader_leo, now, out",
    [
        pytest.param(100, T, 100, T + L, False, id="0.8: fetched exactly L ago: in sync"),
        pytest.param(100, T, 100, T + L + 1, True, id="0.8: no fetch for L+1 ms, even at the LEO: stuck"),
        pytest.param(100, T, 4100, T + 1, False, id="0.8: 4000 messages behind is the limit, not over it"),
        pytest.param(100, T, 4101, T + 1, True, id="0.8: 4001 messages behind: slow"),
        pytest.param(
            -1, T, 9000, T + 1, False, id="0.8: unknown LEO is not counted as slow (messageOffset >= 0)"
        ),
    ],
)
def test_v0_8(leo, leo_update_ms, leader_leo, now, out):
    state = ReplicaState(leo=leo, leo_update_ms=leo_update_ms)
    assert is_out_of_sync_v0_8(state, leader_leo, now, L, 4000) is out


@pytest.mark.parametrize(
    "read_to_log_end_ms, lcu, now, v09, v0102",
    [
        pytest.param(T, T, T + L, False, False, id="both: exactly L: in sync"),
        pytest.param(
            T,
            T + 5000,
            T + L + 1,
            True,
            False,
            id="previous-fetch credit keeps it under 0.10.2, not under 0.9",
        ),
        pytest.param(T, T, T + L + 1, True, True, id="no exemption for a follower at the LEO before 2.1"),
    ],
)
def test_v0_9_and_v0_10_2(read_to_log_end_ms, lcu, now, v09, v0102):
    state = ReplicaState(leo=100, last_caught_up_ms=lcu, read_to_log_end_ms=read_to_log_end_ms)
    assert is_out_of_sync_v0_9_to_0_10_1(state, now, L) is v09
    assert is_out_of_sync_v0_10_2_to_2_0(state, now, L) is v0102
    assert is_out_of_sync("current", state, 100, now, L, 4000) is False, "today: LEO equality exempts it"


def test_update_fetch_state_feeds_the_legacy_timers():
    # Follower 2 creeps: each fetch reaches the LEO of the previous one but never the current LEO.
    p = make(replicas=(1, 2), isr=(1, 2), leo=0, hw=0, lag=2000)
    play(
        p,
        [
            ("fetch", 0, 2, 0),
            ("append", 250, 100),
            ("fetch", 500, 2, 50),
            ("append", 750, 200),
            ("fetch", 1000, 2, 100),
            ("append", 1250, 300),
            ("fetch", 1500, 2, 150),
        ],
    )
    s = p.followers[2]
    assert (s.read_to_log_end_ms, s.last_caught_up_ms, s.leo_update_ms) == (T, T + 500, T + 1500)
    at = T + 2500
    assert p.out_of_sync_replicas(at, rule_set="v0_9_to_0_10_1") == (2,)
    assert p.out_of_sync_replicas(at, rule_set="v0_10_2_to_2_0") == ()
    assert p.out_of_sync_replicas(at, rule_set="v0_8") == ()
    assert p.out_of_sync_replicas(at) == ()


@pytest.mark.parametrize(
    "rule_set, proposed",
    [
        pytest.param("current", (), id="current rules keep a follower at the LEO"),
        pytest.param("v0_10_2_to_2_0", (2,), id="0.10.2-2.0 drops it: no LEO-equality exemption"),
        pytest.param("v0_9_to_0_10_1", (2,), id="0.9-0.10.1 drops it too"),
        pytest.param("v0_8", (2,), id="0.8 drops it: no fetch for more than L"),
    ],
)
def test_isr_expiration_uses_the_configured_rule_set(rule_set, proposed):
    p = make(replicas=(1, 2), isr=(1, 2), leo=10, hw=10, rule_set=rule_set)
    play(p, [("fetch", 0, 2, 10)])
    assert p.isr_expiration(T + L + 1) == proposed


def test_v0_8_message_rule_uses_configured_limit():
    p = make(replicas=(1, 2), isr=(1, 2), leo=0, hw=0, rule_set="v0_8", lag_messages=100)
    play(p, [("fetch", 0, 2, 0), ("append", 1, 101)])
    assert p.isr_expiration(T + 2) == (2,)


def test_unknown_rule_set_is_refused():
    with pytest.raises(ValueError, match="rule_set"):
        is_out_of_sync("v9", ReplicaState(), 0, T, L, 4000)
