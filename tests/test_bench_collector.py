"""bench/collector.py's counting and its session-form path (no brokers: the bench runs them).

An idle topic read through fetch sessions, as a leader's request log gives it: `session_published`
(the compactor, then the session form, in the collector's 200 ms steps and 1.5 s hold) must
send each follower's first fetch of each partition and then only its session's reads, at most
one per session per second, the last one exactly."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

from bench.collector import (
    HOLD_MS,
    STEP_MS,
    counted,
    rates,
    read_classes,
    session_published,
    simulated_bursty,
)
from replmon.state.events import event

PARTITIONS, LEADER, SESSIONS = 4, 1, {2: 11, 3: 12}  # follower -> its session id on the leader
FIRST, LAST, EVERY = 1_100, 11_100, 500  # fetches parked replica.fetch.wait.max.ms


def _idle_topic() -> list[dict]:
    out = [
        event(
            "metadata",
            1_000,
            "c",
            topic="t",
            partition=p,
            leader=LEADER,
            leader_epoch=0,
            replicas=[1, 2, 3],
            isr=[1, 2, 3],
            replica_lag_time_max_ms=10_000,
        )
        for p in range(PARTITIONS)
    ]
    for ts in range(FIRST, LAST + 1, EVERY):
        for follower, sid in SESSIONS.items():
            for p in range(PARTITIONS):  # one request reads every partition of the session
                ev = event(
                    "fetch",
                    ts,
                    "c",
                    topic="t",
                    partition=p,
                    replica=follower,
                    fetch_offset=0,
                    leader_leo=0,
                    leader_epoch=0,
                    log_start_offset=0,
                )
                out.append({**ev, "session_id": sid})
    return out


def test_an_idle_topic_in_session_form_sends_its_sessions_reads():
    sent, former = session_published(_idle_topic(), HOLD_MS, STEP_MS)
    fetches = [e for e in sent if e["type"] == "fetch"]
    # One fetch per follower and partition: the one that shows it caught up in its session.
    assert sorted((e["replica"], e["partition"], e["ts"]) for e in fetches) == [
        (f, p, FIRST) for f in SESSIONS for p in range(PARTITIONS)
    ]
    sessions = [e for e in sent if e["type"] == "session"]
    assert {(e["replica"], e["leader"], e["session_id"]) for e in sessions} == {
        (f, LEADER, sid) for f, sid in SESSIONS.items()
    }
    for follower in SESSIONS:
        times = sorted(e["ts"] for e in sessions if e["replica"] == follower)
        # At most one per second (10 s of reads), the last read said exactly.
        assert 9 <= len(times) <= 12, times
        assert all(b - a >= 1_000 for a, b in pairwise(times)), times
        assert times[-1] == LAST, times
    assert former.restated == 0
    assert not [e for e in sent if e["type"] == "append"]


def test_counted_and_rates():
    evs = [
        {"type": "fetch", "ts": 100, "topic": "t"},
        {"type": "fetch", "ts": 3_999, "topic": "t"},
        {"type": "fetch", "ts": 4_000, "topic": "t"},  # after the window
        {"type": "fetch", "ts": 200, "topic": "other"},
        {"type": "append", "ts": 300, "topic": "t"},
        {"type": "session", "ts": 400, "replica": 2, "leader": 1, "session_id": 5},
        {"type": "session", "ts": 99, "replica": 2, "leader": 1, "session_id": 5},  # before it
        {"type": "heartbeat", "ts": 500},
    ]
    n = counted(evs, "t", 100, 4_000)
    assert n == Counter({"fetch": 2, "append": 1, "session": 1})
    # 2 partitions, RF 3 (2 followers each), 4 s
    assert rates(n, 2, 4.0) == {
        "fetch_per_follower_s": 2 / 4 / 4,
        "append_per_partition_s": 1 / 2 / 4,
        "session_per_partition_s": 1 / 2 / 4,
        "events_per_partition_s": 4 / 2 / 4,
    }


def test_under_the_judges_bursts_session_form_sends_no_more_than_compaction():
    """Bursts 3 s apart leave each follower about two idle seconds, in which compaction keeps
    about two fetches: the first at the new LEO, and the last read before the next append, which
    session form too must send (restated, so that lcu stays exact). Compaction sends no append
    (the followers' fetches tell each new LEO), and session form sends no more than compaction
    (it was 0.68 events per partition-second more, +29 %, when the form published a session's
    first read at once)."""
    r = simulated_bursty(3, 30, 3_000, seed=0)
    on, session = r["on"]["events_per_partition_s"], r["session"]["events_per_partition_s"]
    assert r["on"]["fetch_per_follower_s"] > 0.6  # the bursts ran: about two fetches each 3 s
    assert r["on"]["append_per_partition_s"] == 0
    assert session <= on, (session, on)


def test_reads_are_classed_by_the_leaders_leo_at_the_read_and_at_the_previous_one():
    # Follower 2 of partition 0: at the LEO (10 of 10), then below it after an append but at
    # the LEO of its previous read (10 of 15: credited), then at it again (15 of 15), then
    # below the LEO of its previous read (12 of 20 after 15: behind). Follower 3's first read
    # is below the LEO with no read before it: behind. A read outside [t0, t1) counts for its
    # successor's credit but not itself; another topic's reads not at all.
    def read(ts, replica, offset, leo, topic="t"):
        return event(
            "fetch",
            ts,
            "c",
            topic=topic,
            partition=0,
            replica=replica,
            fetch_offset=offset,
            leader_leo=leo,
        )

    events = [
        read(900, 2, 10, 10),
        read(1000, 2, 10, 15),
        read(1100, 2, 15, 15),
        read(1200, 2, 12, 20),
        read(1300, 3, 5, 20),
        read(1400, 2, 20, 20, topic="other"),
    ]
    assert read_classes(events, "t", 1000, 2000) == {"caught": 1, "credited": 1, "behind": 2}
    assert read_classes(events, "t", 0, 2000) == {"caught": 2, "credited": 1, "behind": 2}
