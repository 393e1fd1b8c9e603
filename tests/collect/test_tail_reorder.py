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


# ---------------------------------------------------------------- a leader that stops

T = 1_795_437_650_000
PAUSE, RESUME = T + 5000, T + 25_000  # broker 3, the leader of t1-2, is stopped in between
TOLERANCE = 1000  # stream.reorder_tolerance_ms's default: what replmon takes behind a partition


class ThreeLeaders:
    """The Admin API: broker b leads t1-(b-1), replicated to all three; every broker runs (the
    session timeout is above the pause, so the controller does not fence the stopped one)."""

    def __init__(self, leader_of_2=3) -> None:
        self.leader_of_2, self.said = leader_of_2, False

    def name_of(self, topic_id):
        from tests.collect.lines import TOPIC_ID

        return {TOPIC_ID: "t1"}.get(topic_id)

    def ask(self):
        return None

    def changes(self, answers, now_ms):
        if self.said:
            return []
        self.said = True
        meta = [
            {
                "type": "metadata",
                "ts": now_ms,
                "cluster": "c",
                "topic": "t1",
                "partition": p,
                "leader": self.leader_of_2 if p == 2 else p + 1,
                "leader_epoch": 0,
                "replicas": [1, 2, 3],
                "isr": [1, 2, 3],
            }
            for p in range(3)
        ]
        return [
            {"type": "broker", "ts": now_ms, "cluster": "c", "broker": b, "state": "running"}
            for b in (1, 2, 3)
        ] + meta


class Sent:
    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send(self, events):
        self.sent += events


def _run_pause(tmp_path, probe, silent_hold_ms=60_000, admin=None):
    """Each broker answers its followers' fetches (parked 500 ms: caught up) every 500 ms;
    broker 3 logs nothing from PAUSE to RESUME, then the two fetches it held parked since just
    before PAUSE (read at PAUSE - 300 ms), then goes on. Steps of 200 ms, as `run` takes them."""
    from replmon.streaming.collect.collector import Collector
    from tests.collect.lines import fetch_line

    logs = {b: tmp_path / f"request-{b}.log" for b in (1, 2, 3)}
    for f in logs.values():
        f.write_text("")
    now = [T - 1000]
    sent = Sent()
    c = Collector(
        "c",
        {b: str(f) for b, f in logs.items()},
        admin or ThreeLeaders(),
        sent,
        tmp_path / "state",
        hold_ms=1500,
        heartbeat_ms=1,
        metadata_ms=1000,
        max_held=100_000,
        role="all",
        clock=lambda: now[0] / 1000,
        probe=probe,
        **({} if silent_hold_ms is None else {"silent_hold_ms": silent_hold_ms}),
    )
    c.start()
    c.poll_admin()
    offsets = {0: 10, 1: 20, 2: 30}

    def fetch(b, follower, log_ms, read_ms):
        p = b - 1
        total = log_ms - read_ms
        return fetch_line(
            log_ms,
            follower,
            session_id=0,
            epoch=-1,
            response_session=0,
            requested=[(p, offsets[p])],
            responded=[(p, 0, offsets[p])],
            total=total,
            queue=0,
            remote=total,
        )

    for t in range(T, RESUME + 10_000, 100):
        for b, f in logs.items():
            lines = []
            if b == 3 and t == RESUME:
                lines = [fetch(3, follower, RESUME, PAUSE - 300) for follower in (1, 2)]
            elif t % 500 == 0 and not (b == 3 and PAUSE <= t <= RESUME):
                lines = [fetch(b, follower, t, t - 500) for follower in (1, 2, 3) if follower != b]
            if lines:
                with open(f, "a") as out:
                    out.write("".join(line + "\n" for line in lines))
        now[0] = t
        if t % 200 == 0:
            c.step()
    return c, sent.sent


def _behind(sent):
    """Events published more than the tolerance behind the newest event time published before
    them (the heartbeats included: replmon's clock), as (ts, how far behind)."""
    newest, out = 0, []
    for e in sent:
        if e["ts"] < newest - TOLERANCE:
            out.append((e["ts"], newest - e["ts"]))
        newest = max(newest, e["ts"])
    return out


def _parked(sent):
    return [e for e in sent if e["type"] == "fetch" and e["ts"] == PAUSE - 300]


def _heartbeat_ms(sent, at_index):
    beats = [e["ts"] for e in sent[:at_index] if e["type"] == "heartbeat"]
    return beats[-1]


def test_the_release_waits_for_a_stopped_leaders_parked_fetches(tmp_path):
    from replmon.streaming.collect.collector import LATE

    c, sent = _run_pause(tmp_path, probe=lambda b: True)  # its port accepts: stopped, not gone
    parked = _parked(sent)
    assert [(e["partition"], e["replica"]) for e in parked] == [(2, 1), (2, 2)]
    assert _behind(sent) == []
    # it waited: no heartbeat past the stopped broker's last line until it ran again
    first = sent.index(parked[0])
    assert PAUSE - 2000 <= _heartbeat_ms(sent, first) <= PAUSE
    assert c.counts()[LATE] == 0
    # and went on after it: the other partitions' fetches of the pause came out too
    assert max(e["ts"] for e in sent if e["type"] == "heartbeat") >= RESUME + 5000
    assert {e["partition"] for e in sent if e["type"] == "fetch" and PAUSE < e["ts"] < RESUME} == {0, 1}


def test_a_broker_whose_port_refuses_is_not_waited_for(tmp_path):
    """A dead process logs nothing more: the release goes on (its lines, if it is restarted,
    have new read times). Here the test's broker comes back anyway: its parked fetches are then
    late, and counted."""
    from replmon.streaming.collect.collector import LATE

    c, sent = _run_pause(tmp_path, probe=lambda b: False)
    first = sent.index(_parked(sent)[0])
    assert _heartbeat_ms(sent, first) >= RESUME - 2000
    assert [ts for ts, _ in _behind(sent)] == [PAUSE - 300] * 2
    assert c.counts()[LATE] == 2


def test_the_wait_is_bounded_by_silent_hold(tmp_path):
    from replmon.streaming.collect.collector import LATE

    c, sent = _run_pause(tmp_path, probe=lambda b: True, silent_hold_ms=8000)
    first = sent.index(_parked(sent)[0])
    assert _heartbeat_ms(sent, first) >= RESUME - 2000
    assert c.counts()[LATE] == 2


def test_a_running_broker_that_leads_nothing_replicated_is_not_waited_for(tmp_path):
    """Its leaderships moved (the Admin API shows broker 1 leading t1-2): its followers fetch
    elsewhere, its silence is no stop."""
    probed = []
    moved = ThreeLeaders(leader_of_2=1)
    _, sent = _run_pause(tmp_path, probe=lambda b: probed.append(b) or True, admin=moved)
    first = sent.index(_parked(sent)[0])
    assert _heartbeat_ms(sent, first) >= RESUME - 2000
    assert probed == []


def test_off_by_default_the_parked_fetches_come_late_and_are_counted(tmp_path):
    """Waiting holds every event of the cluster, so it is asked for (--silent-hold)."""
    from replmon.streaming.collect.collector import LATE

    c, sent = _run_pause(tmp_path, probe=lambda b: True, silent_hold_ms=None)
    assert [ts for ts, _ in _behind(sent)] == [PAUSE - 300] * 2
    assert c.counts()[LATE] == 2
