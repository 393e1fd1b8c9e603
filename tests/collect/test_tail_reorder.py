"""Following a rolled file, and releasing events in event-time order."""

from __future__ import annotations

import os

import pytest

from replmon.streaming.collect.reorder import ReorderBuffer
from replmon.streaming.collect.tail import FileTail


def test_tail_follows_a_rename_rollover_and_resumes_from_its_position(tmp_path):
    log = tmp_path / "kafka-request.log"
    log.write_text("a\nb\npart")
    t = FileTail(log)
    t.open_at(None)
    assert t.read_lines() == ["a", "b"]  # the unfinished line waits
    with open(log, "a") as f:
        f.write("ial\nc\n")
    os.rename(log, tmp_path / "kafka-request.log.1")  # log4j2's rollover: rename, new file
    log.write_text("d\n")
    assert t.read_lines() == ["partial", "c", "d"]
    assert t.rotations == 1
    pos = t.position()
    with open(log, "a") as f:
        f.write("e\n")
    os.rename(log, tmp_path / "kafka-request.log.2")  # rolled again while we were away
    log.write_text("f\n")
    again = FileTail(log)
    again.open_at(pos)  # found by inode in the rolled file
    assert again.read_lines() == ["e", "f"]


def test_tail_rereads_a_truncated_file(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("a\nb\n")
    t = FileTail(log)
    t.open_at(None)
    assert t.read_lines() == ["a", "b"]
    log.write_text("c\n")  # copytruncate: same inode, shorter
    assert t.read_lines() == ["c"]


def test_reorder_releases_in_event_time_after_the_hold():
    b = ReorderBuffer(hold_ms=1000, max_events=10)
    for ts in (5000, 4000, 4500):
        b.add({"ts": ts})
    assert b.release(5400) == [{"ts": 4000}]  # watermark 4400
    assert b.release(6000) == [{"ts": 4500}, {"ts": 5000}]
    assert b.release(5000) == [] and b.watermark_ms == 5000  # never moves back


def test_reorder_is_bounded():
    b = ReorderBuffer(hold_ms=1000, max_events=1)
    b.add({"ts": 1})
    with pytest.raises(OverflowError, match="the bound is 1"):
        b.add({"ts": 2})
