"""The alert conditions (state/alert_rules.py): one table per alert, a reason per row; and the
rules table itself (every row has its severity, causes and templates)."""

import pytest

from replmon.state import alert_rules as rules
from replmon.state import texts
from replmon.state.alert_rules import PartitionFacts, ReplicaFacts

from .helpers import make


def replica(**kw) -> ReplicaFacts:
    return ReplicaFacts(PartitionFacts(make()), **kw)


def partition(p=None, **kw) -> PartitionFacts:
    return PartitionFacts(make() if p is None else p, **kw)


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
            replica(
                in_isr=in_isr,
                behind=behind,
                ms_since_caught_up=since,
                imminent_after_ms=5000,
                out_of_sync=oos,
            )
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
    assert rules.is_replica_out_of_sync(replica(in_isr=in_isr, out_of_sync=oos, ever_in_isr=ever)) is expected


@pytest.mark.parametrize(
    "isr, replicas, adding, expected",
    [
        ((1, 2), (1, 2, 3), (), True),  # one replica missing
        ((1, 2, 3), (1, 2, 3), (), False),  # all in sync
        ((1, 2, 3), (1, 2, 3, 4), (4,), False),  # the missing one is being added by a reassignment
        ((1, 2), (1, 2, 3, 4), (4,), True),  # one of the original replicas is missing too
    ],
)
def test_under_replicated(isr, replicas, adding, expected):
    p = make(replicas=replicas, isr=isr, adding_replicas=adding)
    assert rules.is_under_replicated(partition(p)) is expected
    assert p.under_replicated is expected  # partition_status says the same (one definition)


@pytest.mark.parametrize(
    "isr, min_isr, expected",
    [
        ((1,), 2, True),  # below: acks=all produce rejected
        ((1, 2), 2, False),  # at is not under
        ((1, 2, 3), 2, False),  # above
        ((1, 2), 4, True),  # min ISR 4 on 3 replicas is capped at 3 (KAFKA-15221): under
    ],
)
def test_under_min_isr(isr, min_isr, expected):
    p = make(isr=isr, min_isr=min_isr)
    assert rules.is_under_min_isr(partition(p)) is expected
    assert p.under_min_isr is expected  # partition_status says the same (one definition)


@pytest.mark.parametrize(
    "isr, min_isr, replicas, expected",
    [
        ((1, 2), 2, (1, 2, 3), True),  # one more loss stops acks=all
        ((1, 2, 3), 3, (1, 2, 3), False),  # min ISR = replica count: always at min, a configuration
        ((1, 2, 3), 2, (1, 2, 3), False),  # above
        ((1,), 2, (1, 2, 3), False),  # under: UnderMinIsr instead
        ((1,), 1, (1,), False),  # one replica, min 1: at min by Kafka's test, nothing to lose
    ],
)
def test_at_min_isr(isr, min_isr, replicas, expected):
    p = make(replicas=replicas, isr=isr, min_isr=min_isr)
    assert rules.is_at_min_isr(partition(p)) is expected
    # the alert is Kafka's isAtMinIsr (partition_status.at_min_isr) where a loss matters
    assert expected is (p.at_min_isr and len(p.replicas) > p.effective_min_isr)


@pytest.mark.parametrize(
    "leader, has_metadata, expected",
    [
        (-1, True, True),  # the controller says no leader
        (2, True, False),  # has a leader
        (-1, False, False),  # leader unknown only because no metadata arrived yet
    ],
)
def test_offline(leader, has_metadata, expected):
    p = make()
    p.leader = leader
    assert rules.is_offline(partition(p, has_metadata=has_metadata)) is expected


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
    p = make(isr=(1,), min_isr=2) if under_min else make()
    f = partition(p, hw_waiting_since_ms=waiting, now_ms=now, hw_stall_ms=10000)
    assert rules.is_hw_stalled(f) is expected


@pytest.mark.parametrize(
    "exits, expected",
    [
        (3, True),  # the configured count
        (2, False),  # fewer
    ],
)
def test_isr_flapping(exits, expected):
    assert rules.is_isr_flapping(replica(exits_in_window=exits, flap_count=3)) is expected


@pytest.mark.parametrize(
    "last, now, expected",
    [
        (0, 30001, True),  # silent longer than the gap
        (0, 30000, False),  # exactly the gap
    ],
)
def test_telemetry_missing(last, now, expected):
    assert (
        rules.is_telemetry_missing(partition(last_event_ms=last, now_ms=now, telemetry_gap_ms=30000))
        is expected
    )


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


# ---- the rules table ----------------------------------------------------------------------------


def test_every_rule_has_its_templates():
    for rule in rules.RULES:
        assert rule.opens and rule.closes, rule.name
        for cause in rule.opens:
            assert (rule.name, cause) in texts.OPEN, (rule.name, cause)
        for cause in rule.closes:
            assert (rule.name, cause) in texts.CLOSE, (rule.name, cause)


def test_every_rule_is_named_once_and_has_a_severity():
    names = [rule.name for rule in rules.RULES]
    assert len(names) == len(set(names))
    assert {rule.severity for rule in rules.RULES} <= {"critical", "warning", "info"}


def test_the_engine_decides_exactly_the_rules_with_a_condition():
    engine = {rules.REPLICA, rules.PARTITION}
    for rule in rules.RULES:
        assert (rule.condition is not None) is (rule.scope in engine), rule.name
        if rule.scope in engine:
            assert rule.root is not None and rule.cause is not None, rule.name


@pytest.mark.parametrize(
    "kw, expected",
    [
        (dict(in_isr=False), "left_isr"),  # left the ISR: ReplicaOutOfSync takes over
        (dict(out_of_sync=True), "out_of_sync"),  # failing isCaughtUp, not yet removed
        (dict(new_leader=True), "new_leader"),  # a new leader starts every follower over
        ({}, "caught_up"),  # back at the leader LEO or within the fraction
    ],
)
def test_isr_exit_imminent_close_cause(kw, expected):
    new_leader = kw.pop("new_leader", False)
    f = ReplicaFacts(PartitionFacts(make(), new_leader=new_leader), **kw)
    assert rules.imminent_close_cause(f) == expected
    assert expected in rules.RULES[0].closes
