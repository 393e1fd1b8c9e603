"""Alert transitions -> annotation bodies, tags and patches (pure; sinks/grafana_annotations.py)."""

from __future__ import annotations

import pytest

from replmon.sinks.grafana_annotations import (
    AlertRecordError,
    Annotation,
    create_body,
    patch_for,
    tags_of,
    transition,
)


def entry(**overrides) -> dict:
    """A stream entry as the Redis sink writes it: every value a string, '' for null."""
    fields = {
        "alert_id": "a1",
        "name": "ReplicaOutOfSync",
        "status": "firing",
        "severity": "warning",
        "cluster": "c1",
        "topic": "orders",
        "partition": "0",
        "replica": "3",
        "subject": "c1/orders/0/3",
        "started_ms": "1000",
        "ts": "1000",
        "reason": "replica 3 of orders-0 has not caught up for 31.2 s",
    }
    fields.update(overrides)
    return fields


@pytest.mark.parametrize(
    "overrides, expected, why",
    [
        (
            {},
            (
                "replmon",
                "alert:ReplicaOutOfSync",
                "cluster:c1",
                "topic:orders",
                "partition:0",
                "replica:3",
                "severity:warning",
                "alert_id:a1",
            ),
            "a follower alert names every level down to the replica",
        ),
        (
            {
                "topic": "",
                "partition": "",
                "replica": "",
                "name": "BrokerUnavailable",
                "broker": "2",
                "root_cause": "true",
                "caused_by": "",
            },
            (
                "replmon",
                "alert:BrokerUnavailable",
                "cluster:c1",
                "broker:2",
                "severity:warning",
                "alert_id:a1",
                "root-cause",
            ),
            "a broker alert has no topic; null fields make no tag; a root cause says so",
        ),
        (
            {
                "name": "ReplicaFetcherStalled",
                "topic": "",
                "partition": "",
                "replica": "",
                "broker": "3",
                "leader": "1",
                "fetcher_id": "0",
                "partitions": '["orders-0","orders-3"]',
                "root_cause": "true",
            },
            (
                "replmon",
                "alert:ReplicaFetcherStalled",
                "cluster:c1",
                "broker:3",
                "leader:1",
                "severity:warning",
                "alert_id:a1",
                "root-cause",
            ),
            "a stalled fetcher names its follower broker and the leader it stopped fetching from",
        ),
        (
            {"caused_by": "b7", "cause": "broker_gone", "root_cause": "false"},
            (
                "replmon",
                "alert:ReplicaOutOfSync",
                "cluster:c1",
                "topic:orders",
                "partition:0",
                "replica:3",
                "severity:warning",
                "alert_id:a1",
                "cause:broker_gone",
                "caused_by:b7",
            ),
            "an alert explained by another carries the root's id, so a dashboard can filter on it",
        ),
        (
            {"silenced_by": '["s1"]', "topic": "", "partition": "", "replica": ""},
            (
                "replmon",
                "alert:ReplicaOutOfSync",
                "cluster:c1",
                "severity:warning",
                "alert_id:a1",
                "silenced",
            ),
            "a silenced alert is still drawn, marked so",
        ),
        (
            {"silenced_by": "[]"},
            (
                "replmon",
                "alert:ReplicaOutOfSync",
                "cluster:c1",
                "topic:orders",
                "partition:0",
                "replica:3",
                "severity:warning",
                "alert_id:a1",
            ),
            "an empty silence list is no silence",
        ),
        (
            {"cluster": "dc1:prod"},
            (
                "replmon",
                "alert:ReplicaOutOfSync",
                "cluster:dc1%3Aprod",
                "topic:orders",
                "partition:0",
                "replica:3",
                "severity:warning",
                "alert_id:a1",
            ),
            "escaped as in the index sets, so the $cluster variable matches",
        ),
        (
            {"partition": "12", "replica": "0"},
            (
                "replmon",
                "alert:ReplicaOutOfSync",
                "cluster:c1",
                "topic:orders",
                "partition:12",
                "replica:0",
                "severity:warning",
                "alert_id:a1",
            ),
            "replica 0 is a broker id, not a null",
        ),
    ],
)
def test_tags(overrides, expected, why):
    assert tags_of(entry(**overrides)) == expected, why


@pytest.mark.parametrize(
    "overrides, message, why",
    [
        ({"alert_id": ""}, "lacks alert_id", "no id: the annotation could never be found again"),
        ({"status": "pending"}, "status 'pending'", "only firing and resolved exist"),
        ({"ts": "soon"}, "no integer ts", "the annotation needs an epoch ms"),
        (
            {"started_ms": "2000", "ts": "1000"},
            r"starts \(2000\) after its ts",
            "a region cannot end before it starts",
        ),
        ({"name": ""}, "lacks name", "the text and tags need the alert's name"),
    ],
)
def test_records_that_cannot_become_annotations(overrides, message, why):
    with pytest.raises(AlertRecordError, match=message):
        transition(entry(**overrides))


def test_bytes_from_redis_are_decoded_and_started_ms_defaults_to_ts():
    fields = {k.encode(): v.encode() for k, v in entry(started_ms="").items()}
    t = transition(fields)
    assert (t.alert_id, t.status, t.started_ms, t.ts) == ("a1", "firing", 1000, 1000)
    assert t.text == "ReplicaOutOfSync c1/orders/0/3: replica 3 of orders-0 has not caught up for 31.2 s"


def test_a_firing_creates_a_point_a_resolve_a_region():
    firing = transition(entry())
    assert create_body(firing) == {
        "time": 1000,
        "timeEnd": 1000,
        "tags": list(firing.tags),
        "text": firing.text,
    }
    resolved = transition(entry(status="resolved", ts="5000", reason="caught up again"))
    body = create_body(resolved, dashboard_uid="replmon-overview")
    assert (body["time"], body["timeEnd"], body["dashboardUID"]) == (1000, 5000, "replmon-overview")
    assert body["text"].endswith("\nresolved: caught up again")


@pytest.mark.parametrize(
    "current, status, ts, expected, why",
    [
        (Annotation(7, 1000, 1000, "x"), "firing", 1000, None, "the firing is already there"),
        (
            Annotation(7, 1000, 5000, "x\nresolved: y"),
            "firing",
            1000,
            None,
            "a firing replayed after its resolve must not reopen the region",
        ),
        (
            Annotation(7, 1000, 1000, "x"),
            "resolved",
            5000,
            {"timeEnd": 5000},
            "the resolve closes the region",
        ),
        (
            Annotation(7, 1000, 5000, "x\nresolved: y"),
            "resolved",
            5000,
            None,
            "a replayed resolve changes nothing",
        ),
        (
            Annotation(7, 1000, 1000, "x"),
            "resolved",
            1000,
            {"timeEnd": 1000},
            "resolved in the same ms: a zero-length region, but the text still says resolved",
        ),
    ],
)
def test_patch_for(current, status, ts, expected, why):
    t = transition(entry(status=status, ts=str(ts), reason="caught up again"))
    patch = patch_for(current, t)
    if expected is None:
        assert patch is None, why
    else:
        assert patch["timeEnd"] == expected["timeEnd"] and patch["text"].endswith(
            "resolved: caught up again"
        ), why
