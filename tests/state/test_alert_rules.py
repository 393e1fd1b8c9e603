"""The alert conditions (state/alert_rules.py): one table per alert, a reason per row."""

import pytest

from replmon.state import alert_rules as rules


@pytest.mark.parametrize(
    "in_isr, behind, since, oos, expected",
    [
        (True, True, 5001, False, True),  # past half of L, still caught up by Kafka's test: warn
        (True, True, 5000, False, False),  # exactly at the fraction is not past it
        (True, False, 9000, False, False),  # at the leader LEO: Kafka's LEO-equality exemption, never removed
        (False, True, 9000, False, False),  # not in the ISR: nothing to leave
        (True, True, 10001, True, False),  # already out of sync: ReplicaOutOfSync says so, not this
    ],
)
def test_isr_exit_imminent(in_isr, behind, since, oos, expected):
    assert (
        rules.is_isr_exit_imminent(
            in_isr=in_isr, behind=behind, ms_since_caught_up=since, imminent_after_ms=5000, out_of_sync=oos
        )
        is expected
    )


@pytest.mark.parametrize(
    "in_isr, oos, ever, expected",
    [
        (True, True, True, True),  # in the ISR and failing isCaughtUp: the leader will remove it
        (True, False, True, False),  # in the ISR and caught up
        (False, False, True, True),  # was in the ISR, is out now
        (False, False, False, False),  # never joined: bootstrapping, not out of sync
    ],
)
def test_replica_out_of_sync(in_isr, oos, ever, expected):
    assert rules.is_replica_out_of_sync(in_isr=in_isr, out_of_sync=oos, ever_in_isr=ever) is expected


@pytest.mark.parametrize(
    "isr, replicas, adding, expected",
    [
        (2, 3, 0, True),  # one replica missing
        (3, 3, 0, False),  # all in sync
        (3, 4, 1, False),  # the missing one is being added by a reassignment: not under-replicated
        (2, 4, 1, True),  # one of the original replicas is missing too
    ],
)
def test_under_replicated(isr, replicas, adding, expected):
    assert rules.is_under_replicated(isr_size=isr, replica_count=replicas, adding_count=adding) is expected


@pytest.mark.parametrize(
    "isr, min_isr, expected",
    [
        (1, 2, True),  # below: acks=all produce rejected
        (2, 2, False),  # at is not under
        (3, 2, False),  # above
    ],
)
def test_under_min_isr(isr, min_isr, expected):
    assert rules.is_under_min_isr(isr_size=isr, effective_min_isr=min_isr) is expected


@pytest.mark.parametrize(
    "isr, min_isr, replicas, expected",
    [
        (2, 2, 3, True),  # one more loss stops acks=all
        (3, 3, 3, False),  # min ISR = replica count: always at min, a configuration not a fault
        (3, 2, 3, False),  # above
        (1, 2, 3, False),  # under: UnderMinIsr instead
    ],
)
def test_at_min_isr(isr, min_isr, replicas, expected):
    assert rules.is_at_min_isr(isr_size=isr, effective_min_isr=min_isr, replica_count=replicas) is expected


@pytest.mark.parametrize(
    "leader, has_metadata, expected",
    [
        (-1, True, True),  # the controller says no leader
        (2, True, False),  # has a leader
        (-1, False, False),  # leader unknown only because no metadata arrived yet
    ],
)
def test_offline(leader, has_metadata, expected):
    assert rules.is_offline(leader=leader, has_metadata=has_metadata) is expected


@pytest.mark.parametrize(
    "waiting, now, under_min, expected",
    [
        (0, 10001, False, True),  # behind the LEO for longer than the limit
        (0, 10000, False, False),  # exactly the limit is not past it
        (None, 99999, False, False),  # HW at the LEO
        (0, 20000, True, False),  # frozen by the min ISR rule: UnderMinIsr is the cause, nobody waits
    ],
)
def test_hw_stalled(waiting, now, under_min, expected):
    assert (
        rules.is_hw_stalled(waiting_since_ms=waiting, now_ms=now, stall_ms=10000, under_min_isr=under_min)
        is expected
    )


@pytest.mark.parametrize(
    "exits, expected",
    [
        (3, True),  # the configured count
        (2, False),  # fewer
    ],
)
def test_isr_flapping(exits, expected):
    assert rules.is_isr_flapping(exits_in_window=exits, flap_count=3) is expected


@pytest.mark.parametrize(
    "last, now, expected",
    [
        (0, 30001, True),  # silent longer than the gap
        (0, 30000, False),  # exactly the gap
    ],
)
def test_telemetry_missing(last, now, expected):
    assert rules.is_telemetry_missing(last_event_ms=last, now_ms=now, gap_ms=30000) is expected


@pytest.mark.parametrize(
    "state, expected",
    [
        ("fenced", True),  # the controller fenced it (session timeout, crash)
        ("shutting_down", True),  # controlled shutdown: leaving on purpose
        ("running", False),  # registered and unfenced
    ],
)
def test_broker_unavailable(state, expected):
    assert rules.is_broker_unavailable(state=state) is expected
