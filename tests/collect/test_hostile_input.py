"""Hostile input (issue 20, part 5): a line the collector cannot use is counted by reason and
shown once; nothing is skipped silently and nothing crashes the collector."""

from __future__ import annotations

import json
import logging

from replmon.streaming.collect.broker_log import BrokerLog
from replmon.streaming.collect.tail import FileTail
from tests.collect.lines import TOPIC_ID, fetch_line, produce_line

T = 1_795_437_650_000


def names(topic_id):
    return {TOPIC_ID: "t1", "internalTopicIdAAAAAAA": "__consumer_offsets"}.get(topic_id)


def without(line: str, field: str) -> str:
    """The line with `field` taken out of every requested partition."""
    head, body = line.split("Completed request:", 1)
    obj = json.loads(body)
    for t in obj["request"]["topics"]:
        for p in t["partitions"]:
            p.pop(field)
    return f"{head}Completed request:{json.dumps(obj)}"


def test_a_fetch_line_missing_a_field_is_counted_and_shown_once_not_a_crash(caplog):
    # Kafka 4.x names fetchOffset on every requested partition; a line without it (a damaged
    # line, an unknown version) was a KeyError in sessions.py and a crash loop, warm-up included.
    bad = without(fetch_line(T, 2, epoch=-1, session_id=0, requested=[(0, 10)], responded=[]), "fetchOffset")
    bl = BrokerLog("c", 1, names)
    with caplog.at_level(logging.WARNING):
        assert bl.events(bad, emit=False) == []  # warm-up
        assert bl.events(bad) == []
        assert bl.events(bad) == []
    reason = "unusable FETCH line: no 'fetchOffset'"
    assert bl.counts[reason] == 3
    shown = [r for r in caplog.records if reason in r.getMessage()]
    assert len(shown) == 1 and "Completed request:" in shown[0].getMessage()  # one example line
    good = fetch_line(T + 500, 2, epoch=-1, session_id=0, requested=[(0, 10)], responded=[(0, 100, 11)])
    assert [e["fetch_offset"] for e in bl.events(good)] == [10]  # and the next line still counts


def test_garbage_lines_are_counted():
    bl = BrokerLog("c", 1, names)
    assert bl.events("\x00\x00garbage") == []
    assert bl.events("[1795437652061] INFO some other logger") == []
    assert bl.events("[1795437652061] Completed request:[1, 2]") == []
    assert bl.counts["not a request line"] == 2
    assert bl.counts["bad line: the request JSON is not an object"] == 1


def test_internal_topics_are_counted_apart_from_unknown_ids():
    bl = BrokerLog("c", 1, names, wanted=lambda t: not t.startswith("__"))
    line = fetch_line(T, 2, epoch=-1, session_id=0, requested=[(0, 1)], responded=[])
    bl.events(line.replace(TOPIC_ID, "internalTopicIdAAAAAAA"))
    bl.events(line.replace(TOPIC_ID, "deletedTopicIdAAAAAAAA"))
    assert bl.counts["skipped: internal topic"] == 1
    assert bl.counts["skipped: unknown topic id after a metadata poll (a deleted topic)"] == 1


def test_a_line_over_4_mb_is_read_and_the_tail_goes_on(tmp_path):
    # A follower FETCH line of a session of tens of thousands of partitions is this long; the
    # tail used to wait for its end within 4 MB forever, silently.
    log = tmp_path / "kafka-request.log"
    long = "x" * (5 << 20)
    log.write_text(f"a\n{long}\nb\n")
    t = FileTail(log)
    t.open_at(None)
    got = []
    for _ in range(5):
        got += t.read_lines()
    assert got == ["a", long, "b"]


def test_a_line_over_the_cap_is_skipped_counted_and_shown(tmp_path, caplog):
    log = tmp_path / "kafka-request.log"
    log.write_text("a\n" + "y" * 3000 + "\nb\n")
    t = FileTail(log, max_line_bytes=1000)
    t.open_at(None)
    got = []
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            got += t.read_lines()
    assert got == ["a", "b"]
    assert t.counts["skipped: line longer than --max-line-bytes"] == 1
    assert any("yyyy" in r.getMessage() and "3001 bytes" in r.getMessage() for r in caplog.records)


def test_a_long_line_still_being_written_waits(tmp_path):
    log = tmp_path / "kafka-request.log"
    log.write_text("a\n" + "z" * (5 << 20))
    t = FileTail(log)
    t.open_at(None)
    assert t.read_lines() == ["a"]
    assert t.read_lines() == []
    with open(log, "a") as f:
        f.write("z\n")
    assert t.read_lines() == ["z" * ((5 << 20) + 1)]


def test_produce_lines_still_count():
    bl = BrokerLog("c", 1, names)
    assert [e["type"] for e in bl.events(produce_line(T, 0, 9))] == ["append"]
