"""Per-follower explanations behind replica_status (docs/outputs.md)."""

import pytest

from replmon.state.explain import explain_partition, explain_replica, hw_holders

from .helpers import T, make, play

L = 10000
TIMES = {"stuck_after_ms": 3000, "caught_up_grace_ms": 2000}  # the rows' timings assume these


# Partition 1,2,3 with ISR {1,2}, leader LEO 100, HW 100; steps, then explain replica 2 at `at`
# (an offset from T).
@pytest.mark.parametrize(
    "steps, replica, at, ever_in_isr, state",
    [
        pytest.param([("fetch", 0, 2, 100)], 2, 2500, True, "caught_up", id="at the leader LEO, fetching"),
        pytest.param(
            [("fetch", 0, 2, 100), ("append", 1, 200), ("fetch", 2000, 2, 150)],
            2,
            2000,
            True,
            "caught_up",
            id="below the LEO but reached it within the 2 s grace",
        ),
        pytest.param(
            [("fetch", 0, 2, 100), ("append", 1, 200), ("fetch", 2500, 2, 150)],
            2,
            2600,
            True,
            "slow",
            id="fetching but last at the LEO more than 2 s ago",
        ),
        pytest.param(
            [("fetch", 0, 2, 100), ("append", 1, 200)],
            2,
            3001,
            True,
            "stuck",
            id="no accepted fetch for more than 3 s",
        ),
        pytest.param(
            [("fetch", 0, 2, 100), ("append", 1, 200)],
            2,
            3000,
            True,
            "slow",
            id="exactly 3 s since the last fetch is not yet stuck",
        ),
        pytest.param([], 2, 3001, True, "stuck", id="never fetched since the election, election > 3 s ago"),
        pytest.param([], 2, 2000, True, "caught_up", id="just elected: within the grace of lcu = election"),
        pytest.param(
            [("fetch", 0, 2, 100), ("fetch", 3000, 2, 100, {"error": "NOT_LEADER_OR_FOLLOWER"})],
            2,
            3001,
            True,
            "stuck",
            id="rejected fetches are not fetches",
        ),
        pytest.param(
            [("fetch", 2000, 3, 20)],
            3,
            2500,
            False,
            "bootstrapping",
            id="never in the ISR, fetching, far behind",
        ),
        pytest.param(
            [("fetch", 2000, 3, 20)],
            3,
            2500,
            True,
            "slow",
            id="was in the ISR before, fetching, behind: slow, not bootstrapping",
        ),
        pytest.param([], 3, 3001, False, "stuck", id="never in the ISR and not fetching: stuck"),
        pytest.param(
            [("fetch", 0, 2, 100), ("broker", 2, {"fenced": True})],
            2,
            10,
            True,
            "fenced",
            id="fenced comes first",
        ),
        pytest.param(
            [("broker", 2, {"shutting_down": True})],
            2,
            5000,
            True,
            "shutting_down",
            id="shutting down comes before stuck",
        ),
    ],
)
def test_state_classification(steps, replica, at, ever_in_isr, state):
    p = make(replicas=(1, 2, 3), isr=(1, 2), leo=100, hw=100, lag=L)
    play(p, steps)
    assert explain_replica(p, replica, T + at, ever_in_isr=ever_in_isr, **TIMES).state == state


def test_view_fields_for_a_lagging_follower():
    p = make(replicas=(1, 2), isr=(1, 2), leo=100, hw=0, lag=L)
    play(p, [("fetch", 100, 2, 100), ("append", 200, 150), ("fetch", 300, 2, 120)])
    v = explain_replica(p, 2, T + 1300, ever_in_isr=True, **TIMES)
    assert (v.replica, v.leo, v.leader_leo, v.lag_messages) == (2, 120, 150, 30)
    assert (v.last_caught_up_ms, v.lag_ms, v.last_fetch_ms) == (T + 100, 1200, T + 300)
    assert (v.in_isr, v.caught_up, v.eligible) == (True, True, True)
    assert v.out_of_sync_at_ms == T + 100 + L + 1, "first time isCaughtUp fails if nothing changes"
    assert v.removable_by_ms == T + 100 + L + 1 + L // 2, "plus one isr-expiration period"
    assert v.holds_hw, "LEO 120 == HW < leader LEO, in the ISR"
    assert not p.is_caught_up(2, v.out_of_sync_at_ms) and p.is_caught_up(2, v.out_of_sync_at_ms - 1)


@pytest.mark.parametrize(
    "steps, rule_set, expected",
    [
        pytest.param(
            [("fetch", 0, 2, 100)], "current", (0, None, None), id="at the leader LEO: never out of sync"
        ),
        pytest.param(
            [],
            "current",
            (100, T + L + 1, T + L + 1 + L // 2),
            id="LEO unknown: lag is the whole leader LEO",
        ),
        # Kafka 0.10.2-2.0 had no LEO-equality exemption (KAFKA-7152): a follower at the leader LEO
        # that stops fetching is removed L after its last catch-up all the same
        pytest.param(
            [("fetch", 0, 2, 100)],
            "v0_10_2_to_2_0",
            (0, T + L + 1, T + L + 1 + L // 2),
            id="at the leader LEO without the exemption: out of sync after L",
        ),
    ],
)
def test_view_lag_and_deadlines(steps, rule_set, expected):
    p = make(replicas=(1, 2), isr=(1, 2), leo=100, hw=0, lag=L, rule_set=rule_set)
    play(p, steps)
    v = explain_replica(p, 2, T + 1, ever_in_isr=True, **TIMES)
    assert (v.lag_messages, v.out_of_sync_at_ms, v.removable_by_ms) == expected
    if v.out_of_sync_at_ms is not None:  # the rule set's own test agrees
        at = v.out_of_sync_at_ms
        assert p.out_of_sync_replicas(at) == (2,) and p.out_of_sync_replicas(at - 1) == ()


@pytest.mark.parametrize(
    "kw, steps, holders",
    [
        pytest.param(
            dict(isr=(1, 2, 3)),
            [("fetch", 0, 2, 80), ("fetch", 0, 3, 90)],
            (2,),
            id="the ISR follower whose LEO is the HW",
        ),
        pytest.param(
            dict(isr=(1, 2, 3)),
            [("fetch", 0, 2, 80), ("fetch", 0, 3, 80)],
            (2, 3),
            id="two followers at the HW both hold it",
        ),
        pytest.param(
            dict(isr=(1, 2)),
            [("fetch", 0, 2, 100), ("fetch", 0, 3, 100)],
            (),
            id="HW equal to the leader LEO: nobody holds it",
        ),
        pytest.param(
            dict(isr=(1,), hw=80, followers={3: {"leo": 80, "last_caught_up_ms": T}}),
            [],
            (3,),
            id="a caught-up eligible non-ISR follower (below the epoch start, cannot join) holds it",
        ),
        pytest.param(
            dict(isr=(1, 2), leader_epoch_start_offset=200, leo=200),
            [("fetch", 0, 2, 200), ("fetch", 1, 3, 90)],
            (),
            id="non-ISR follower not caught up does not hold it",
        ),
        pytest.param(
            dict(isr=(1,), min_isr=2, hw=80),
            [("fetch", 0, 2, 80)],
            (),
            id="under min ISR the HW waits for the ISR, not for a LEO",
        ),
    ],
)
def test_hw_holders(kw, steps, holders):
    base = dict(replicas=(1, 2, 3), leo=100, hw=0, lag=L)
    p = make(**{**base, **kw})
    play(p, steps)
    assert hw_holders(p, T + 2) == holders
    assert explain_partition(p, T + 2).hw_holders == holders
    for r in p.followers:
        assert explain_replica(p, r, T + 2, ever_in_isr=True, **TIMES).holds_hw is (r in holders)


def test_explain_partition_mirrors_partition_state():
    p = make(replicas=(1, 2, 3), isr=(1, 2), leo=100, hw=100, min_isr=2)
    v = explain_partition(p, T)
    assert (v.leader, v.leader_epoch, v.replicas, v.isr, v.maximal_isr) == (1, 5, (1, 2, 3), (1, 2), (1, 2))
    assert (v.hw, v.leader_leo, v.under_replicated, v.under_min_isr, v.at_min_isr) == (
        100,
        100,
        True,
        False,
        True,
    )
    assert (v.min_insync_replicas, v.replica_lag_time_max_ms) == (2, 10000)


def test_explaining_a_non_follower_is_refused():
    with pytest.raises(ValueError, match="not a follower"):
        explain_replica(make(), 1, T, ever_in_isr=True, **TIMES)
