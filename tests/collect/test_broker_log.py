"""Request-log lines -> contract events: the inferences of streaming/collect/infer.py, each
row with the Kafka behaviour that makes the expected event right."""

from __future__ import annotations

import pytest

from replmon.streaming.collect.broker_log import BrokerLog
from replmon.streaming.collect.requestlog import BadLine, log_time_ms, parse_line
from tests.collect.lines import TOPIC_ID, fetch_line, heartbeat_line, produce_line


def names(topic_id):
    return {TOPIC_ID: "t1"}.get(topic_id)


def new_log():
    return BrokerLog("c", 1, names)


def fetches(evs):
    return [
        (e["partition"], e["replica"], e["fetch_offset"], e["leader_leo"], e["ts"])
        for e in evs
        if e["type"] == "fetch"
    ]


def test_session_open_then_incremental_observes_every_cached_partition():
    bl = new_log()
    # Full fetch opening session 7 (epoch 0): both partitions named; p0 got records, p1 none.
    evs = bl.events(
        fetch_line(
            10_000,
            2,
            epoch=0,
            session_id=0,
            response_session=7,
            requested=[(0, 100), (1, 50)],
            responded=[(0, 4000, 90), (1, 0, 50)],
            total=3.0,
            queue=1.0,
        )
    )
    # read time = log time - totalTimeMs + requestQueueTimeMs = 10000 - 3 + 1
    assert fetches(evs) == [(0, 2, 100, 101, 9998), (1, 2, 50, 50, 9998)]
    # Incremental (epoch 1): only p0 changed (new offset 130); parked 500 ms, empty response:
    # both partitions were at the leader LEO when the fetch arrived (KIP-227: p1 read from cache).
    evs = bl.events(
        fetch_line(
            11_000, 2, epoch=1, requested=[(0, 130)], responded=[], total=502.0, queue=0.2, remote=501.0
        )
    )
    assert fetches(evs) == [(0, 2, 130, 130, 10498), (1, 2, 50, 50, 10498)]


@pytest.mark.parametrize(
    "case, line_kw, expected_leo",
    [
        # records came back at once: the leader had more than the fetch offset; HW 140 is a floor
        (
            "records now: behind, LEO above the offset and the HW",
            dict(requested=[(0, 100)], responded=[(0, 500, 140)]),
            140,
        ),
        # records but the fetch had waited in purgatory: it was caught up when it arrived
        (
            "parked, then records: caught up at arrival",
            dict(requested=[(0, 100)], responded=[(0, 500, 100)], total=300.0, remote=299.0),
            100,
        ),
        # a partition error: not an observation, reported with the error (events.md); the failed
        # read proves nothing, so leader_leo claims no more than the offset
        ("error: reported, no claim", dict(requested=[(0, 100)], responded=[(0, 0, -1, 6)]), 100),
    ],
)
def test_caught_up_inference(case, line_kw, expected_leo):
    bl = new_log()
    bl.events(
        fetch_line(
            9_000, 3, epoch=0, session_id=0, response_session=7, requested=[(0, 100)], responded=[(0, 0, 100)]
        )
    )
    evs = bl.events(fetch_line(10_000, 3, epoch=1, **line_kw))
    (ev,) = [e for e in evs if e["type"] == "fetch"]
    assert ev["leader_leo"] == expected_leo, case


def test_error_is_named():
    bl = new_log()
    evs = bl.events(
        fetch_line(10_000, 3, epoch=-1, session_id=0, requested=[(0, 100)], responded=[(0, 0, -1, 6)])
    )
    assert evs[0]["error"] == "NOT_LEADER_OR_FOLLOWER"


def test_forgotten_partitions_leave_the_session():
    bl = new_log()
    bl.events(
        fetch_line(
            9_000, 2, epoch=0, session_id=0, response_session=7, requested=[(0, 10), (1, 20)], responded=[]
        )
    )
    evs = bl.events(fetch_line(9_600, 2, epoch=1, forgotten=[1], total=501, remote=500))
    assert [e["partition"] for e in evs] == [0]


def test_response_cut_at_max_bytes_makes_empty_partitions_unknown():
    # maxBytes 1000, p0 filled it: p1's empty answer says nothing about p1's LEO.
    bl = new_log()
    evs = bl.events(
        fetch_line(
            9_000,
            2,
            epoch=-1,
            session_id=0,
            max_bytes=1000,
            requested=[(0, 10, 600), (1, 20, 600)],
            responded=[(0, 900, 5)],
        )
    )
    assert [e["partition"] for e in evs] == [0]
    assert bl.counts["skipped: empty after the response's maxBytes"] == 1


def test_produce_proves_a_leo_floor_used_by_later_behind_fetches():
    bl = new_log()
    (app,) = bl.events(produce_line(10_000, 0, 500, total=10.0, queue=1.0, local=2.0))
    # append time = 10000 - 10 + 1 + 2; LEO after it >= baseOffset + 1
    assert (app["type"], app["ts"], app["leader_leo"]) == ("append", 9993, 501)
    bl.events(
        fetch_line(
            10_050,
            2,
            epoch=0,
            session_id=0,
            response_session=7,
            requested=[(0, 100)],
            responded=[(0, 5000, 90)],
        )
    )
    ev = next(
        e
        for e in bl.events(fetch_line(10_100, 2, epoch=1, requested=[(0, 200)], responded=[(0, 5000, 150)]))
        if e["type"] == "fetch"
    )
    assert ev["leader_leo"] == 501  # the produce's floor beats offset + 1 and the HW


def test_non_follower_fetches_are_not_events():
    bl = new_log()
    assert (
        bl.events(
            fetch_line(
                9_000, 1, client="raft-client-1", epoch=-1, session_id=0, requested=[(0, 1)], responded=[]
            )
        )
        == []
    )
    assert (
        bl.events(
            fetch_line(
                9_000, -1, client="consumer-1", epoch=-1, session_id=0, requested=[(0, 1)], responded=[]
            )
        )
        == []
    )


def test_unknown_topic_ids_are_counted_not_guessed():
    bl = BrokerLog("c", 1, lambda tid: None)
    assert bl.events(fetch_line(9_000, 2, epoch=-1, session_id=0, requested=[(0, 1)], responded=[])) == []
    assert bl.counts["skipped: unknown topic id after a metadata poll (a deleted topic)"] == 1


def test_dates_and_damaged_lines():
    assert log_time_ms("[1795437652061] Completed request:{}") == 1795437652061
    assert log_time_ms("[2026-11-23 12:47:08,543] INFO x") == 1795438028543
    assert parse_line("[1] INFO something else") is None
    with pytest.raises(BadLine):
        parse_line("[1795437652061] Completed request:{not json")
    bl = new_log()
    assert bl.events("[1795437652061] Completed request:{broken") == []
    assert bl.counts["bad line: the request JSON does not parse"] == 1


def test_session_state_survives_a_checkpoint():
    bl = new_log()
    bl.events(
        fetch_line(9_000, 2, epoch=0, session_id=0, response_session=7, requested=[(0, 10)], responded=[])
    )
    other = new_log()
    other.sessions.restore(bl.sessions.snapshot())
    evs = other.events(fetch_line(9_600, 2, epoch=1, total=501, remote=500))
    assert fetches(evs) == [(0, 2, 10, 10, 9099)]


def test_a_heartbeat_that_asks_to_shut_down_is_one_shutting_down_event_per_shutdown():
    """Kafka's controlled shutdown (KIP-631): the broker's heartbeats to the controller carry
    wantShutDown until it is let go; the Admin API shows nothing of it (the broker stays
    registered and unfenced). One event when the first such heartbeat is logged, none for the
    repeats, and a later shutdown (after heartbeats without it: the broker came back) is new."""
    bl = new_log()
    lines = [
        heartbeat_line(1000, 3),
        heartbeat_line(2000, 3, want_shutdown=True, epoch=21),
        heartbeat_line(2500, 3, want_shutdown=True, epoch=21),
        heartbeat_line(2600, 2),
        heartbeat_line(9000, 3, epoch=40),
        heartbeat_line(12000, 3, want_shutdown=True, epoch=40),
    ]
    events = [e for line in lines for e in bl.events(line)]
    assert events == [
        {
            "type": "broker",
            "ts": 2000,
            "cluster": "c",
            "broker": 3,
            "state": "shutting_down",
            "broker_epoch": 21,
        },
        {
            "type": "broker",
            "ts": 12000,
            "cluster": "c",
            "broker": 3,
            "state": "shutting_down",
            "broker_epoch": 40,
        },
    ]
    assert bl.counts["controlled shutdowns"] == 2
