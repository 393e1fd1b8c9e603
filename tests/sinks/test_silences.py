"""Silences (sinks/silences.py): which alerts a silence matches, how matched alerts are marked,
and the store in a real Redis."""

import pytest

from replmon.sinks.alertmanager import to_postable
from replmon.sinks.silences import (
    Silence,
    SilenceError,
    SilenceStore,
    alert_labels,
    apply_silences,
    matches,
    new_silence,
)

BROKER_DOWN = {
    "alert_id": "a1",
    "name": "BrokerUnavailable",
    "cluster": "c1",
    "topic": None,
    "partition": None,
    "replica": None,
    "broker": 3,
    "severity": "critical",
    "caused_by": None,
    "notify": True,
}
REPLICA_OUT = {
    "alert_id": "a2",
    "name": "ReplicaOutOfSync",
    "cluster": "c1",
    "topic": "orders",
    "partition": 0,
    "replica": 3,
    "broker": 3,
    "severity": "warning",
    "caused_by": "a1",
    "cause": "broker_fenced",
    "notify": False,
}
UNDER_MIN = {
    "alert_id": "a3",
    "name": "UnderMinIsr",
    "cluster": "c1",
    "topic": "orders",
    "partition": 0,
    "replica": None,
    "broker": None,
    "severity": "critical",
    "caused_by": "a1",
    "notify": True,
}


def silence(**matchers):
    return Silence("s1", {k: str(v) for k, v in matchers.items()}, 0, 1000)


@pytest.mark.parametrize(
    "matchers, alert, expected",
    [
        ({"broker": 3}, BROKER_DOWN, True),  # maintenance of broker 3: its own alert
        ({"broker": 3}, REPLICA_OUT, True),  # ... and its replicas' alerts
        ({"broker": 3}, UNDER_MIN, False),  # not a partition that can no longer take writes
        ({"broker": 3, "cluster": "c2"}, BROKER_DOWN, False),  # every matcher must hold
        ({"alert_id": "a3"}, UNDER_MIN, True),  # one episode by id
        ({"alertname": "UnderMinIsr", "topic": "orders"}, UNDER_MIN, True),  # a label matcher
        ({"alertname": "UnderMinIsr", "topic": "payments"}, UNDER_MIN, False),
        ({"caused_by": "a1"}, UNDER_MIN, True),  # everything a root cause explains
        ({"root_cause_id": "a1"}, BROKER_DOWN, True),  # ... and the root itself (its own id)
        ({"root_cause_id": "a1"}, UNDER_MIN, True),
        ({"cause": "broker_fenced"}, REPLICA_OUT, True),  # why it is out of the ISR
        ({"cause": "lag"}, REPLICA_OUT, False),
    ],
)
def test_matches(matchers, alert, expected):
    assert matches(silence(**matchers), alert) is expected


def test_a_silence_matches_the_labels_alertmanager_gets_and_the_cause():
    labels = {
        "alertname": "ReplicaOutOfSync",
        "cluster": "c1",
        "topic": "orders",
        "partition": "0",
        "replica": "3",
        "broker": "3",
        "severity": "warning",
        "caused_by": "a1",
        "root_cause_id": "a1",
        "alert_id": "a2",
    }
    posted = to_postable(dict(REPLICA_OUT, status="firing", reason="", subject="", started_ms=0))
    assert posted["labels"] == labels
    assert alert_labels(REPLICA_OUT) == {**labels, "cause": "broker_fenced"}


def test_silenced_alerts_are_marked_and_not_notified():
    alerts = [dict(BROKER_DOWN), dict(REPLICA_OUT), dict(UNDER_MIN)]
    marked, held = apply_silences(alerts, [silence(broker=3)], now_ms=500)
    assert held == 1, "only the broker alert was going to be notified"
    assert [a["notify"] for a in marked] == [False, False, True]
    assert [a.get("silenced_by") for a in marked] == [["s1"], ["s1"], None]
    assert marked[2] is alerts[2], "an alert no silence matches is passed on as it is"
    assert alerts == [BROKER_DOWN, REPLICA_OUT, UNDER_MIN], "the records given are never changed"


def test_a_silence_outside_its_window_does_nothing():
    alerts = [dict(BROKER_DOWN)]
    marked, held = apply_silences(alerts, [silence(broker=3)], now_ms=1000)
    assert held == 0, "ends_ms is exclusive"
    assert marked == [BROKER_DOWN]


@pytest.mark.parametrize(
    "matchers, duration, message",
    [
        ({}, 1000, "at least one matcher"),
        ({"brokr": "3"}, 1000, "unknown label"),
        ({"broker": "3"}, 0, "positive time"),
    ],
)
def test_bad_silences_are_refused_with_a_reason(matchers, duration, message):
    with pytest.raises(SilenceError, match=message):
        new_silence(matchers, duration, now_ms=0)


def test_store_lists_and_expires(redis_client):
    store = SilenceStore(redis_client, "silence-test")
    a = store.add(new_silence({"broker": 3}, 30 * 60_000, now_ms=1_000, created_by="ops"))
    b = store.add(new_silence({"alert_id": "x"}, 1_000, now_ms=1_000))
    assert [s.silence_id for s in store.active(1_500)] == [b.silence_id, a.silence_id]
    assert [s.silence_id for s in store.active(2_000)] == [a.silence_id], "b ended at 2000"
    assert b.silence_id not in redis_client.hkeys("silence-test:silences"), "expired ones are removed"
    assert store.expire(a.silence_id) and store.active(2_000) == []
    assert not store.expire(a.silence_id)
