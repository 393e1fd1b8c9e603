"""Fetch sessions carry idle followers' progress (state/sessions.py, docs/events.md `session`):
each row's expected value is derived in its reason from the contract, not from the code."""

from __future__ import annotations

import itertools

import pytest

from replmon.state.bucket import Bucket, owner_bucket
from replmon.state.codec import decode, encode
from replmon.state.monitor import PartitionWatch
from replmon.state.sessions import NO_LEADER, NOT_A_SESSION, OWN_LEADER, SessionTable
from replmon.streaming.settings import monitor_config
from tests.state.test_monitor import T0, L, ev, meta, transitions

SID = 7


def fetch(ts, replica, offset, leo, sid=SID):
    return ev("fetch", ts, replica=replica, fetch_offset=offset, leader_leo=leo, session_id=sid)


def session(ts, replica, sid=SID, leader=1):
    return ev("session", ts, replica=replica, leader=leader, session_id=sid)


def idle(start, end, replicas=(2, 3), every=1000):
    """Both followers join session SID at the LEO (0) at `start`, then only their sessions read."""
    events = [fetch(start, r, 0, 0) for r in replicas]
    for t in range(start + every, end, every):
        events += [session(t, r) for r in replicas]
    return events


def run(events, cfg=None, buckets=1, bucket_id=0):
    cfg = cfg or monitor_config(replica_lag_time_max_ms=L)
    bucket, alerts, quarantine = Bucket(bucket_id, buckets), [], []
    bucket.process(events, cfg, alerts, quarantine)
    bucket.advance(cfg, alerts)
    return bucket, alerts, quarantine


@pytest.mark.parametrize(
    "replica, leader, sid, ts, reason",
    [
        (2, 1, 0, 5, NOT_A_SESSION),  # 0 is KIP-227's INVALID_SESSION_ID
        (2, -1, 3, 5, NO_LEADER),  # an offline leader reads nothing
        (1, 1, 3, 5, OWN_LEADER),  # a leader is no follower of itself
        (2, 1, 3, 4, "stale session"),  # not after the session's last read at 4: a resend
        (2, 1, 3, 10, None),  # after it: a new read
    ],
)
def test_a_session_read_is_refused_with_its_reason(replica, leader, sid, ts, reason):
    table = SessionTable({(2, 1, 3): [4]})  # session 3 of follower 2 from leader 1 last read at 4
    got = table.read(replica, leader, sid, ts)
    assert (got is None) if reason is None else got.startswith(reason)


def test_reads_kept_are_those_a_partition_may_still_ask_for():
    table = SessionTable({(2, 1, 3): [10, 20, 30, 40], (3, 1, 4): [5, 8]})
    # 30 and 40 may be asked for, and 20 is the newest read before 25; session 4, silent since
    # 8, is older than anything a partition still monitored can ask for (before 9)
    table.prune(25, 9)
    assert table.reads == {(2, 1, 3): [20, 30, 40]}
    assert table.last_read(2, 1, 3, 29) == 20 and table.last_read(2, 1, 3, 19) is None


def test_session_reads_keep_an_idle_partition_alive_and_its_silence_counts_from_the_last():
    # The followers join session 7 at +10 and the sessions read every second until +20 s; the
    # partition has no event of its own after +10. Heartbeats go on to +70 s. Its last event is
    # the last session read, +20 s - 1000 + 10 = +19010: TelemetryMissing at +19010 + 30 s + 1.
    events = [meta(T0), *idle(T0 + 10, T0 + 20_010)]
    events += [ev("heartbeat", T0 + s * 1000) for s in range(1, 71)]
    bucket, alerts, quarantine = run(events)
    assert quarantine == []
    assert ("firing", 49_011, "c1/t-0") in transitions(alerts, "TelemetryMissing")
    st = bucket.partitions[("c1", "t", 0)].leader.followers[2]
    assert (st.last_caught_up_ms, st.last_fetch_ms) == (T0 + 19_010, T0 + 19_010)


def test_the_session_form_of_an_idle_partition_says_what_its_fetches_say():
    # The same reads as fetch events (one per session read) and as session events: the same
    # alerts and the same follower state, whatever the bucket was asked in between.
    reads = range(T0 + 1010, T0 + 20_010, 1000)
    per_fetch = [meta(T0), *[fetch(T0 + 10, r, 0, 0) for r in (2, 3)]]
    per_fetch += [fetch(t, r, 0, 0) for t in reads for r in (2, 3)]
    sessions = [meta(T0), *idle(T0 + 10, T0 + 20_010)]
    tail = [ev("heartbeat", T0 + s * 1000) for s in range(1, 71)]
    a_bucket, a_alerts, _ = run(per_fetch + tail)
    b_bucket, b_alerts, _ = run(sessions + tail)
    assert a_alerts == b_alerts and a_alerts != []  # TelemetryMissing, stuck: the same in both
    for r in (2, 3):
        want = a_bucket.partitions[("c1", "t", 0)].leader.followers[r]
        got = b_bucket.partitions[("c1", "t", 0)].leader.followers[r]
        assert (got.last_caught_up_ms, got.last_fetch_ms, got.leo) == (
            want.last_caught_up_ms,
            want.last_fetch_ms,
            want.leo,
        )


def test_the_previous_fetch_credit_comes_from_the_last_session_read():
    # Session reads at +1010 ... +5010 with the followers at the LEO 0. An append at +5500 moves
    # the LEO to 10; follower 3 fetches offset 0 at +6000 (below the LEO) and then nothing.
    # Kafka: its fetch offset 0 >= lastFetchLeaderLogEndOffset 0, so lcu = lastFetchTimeMs =
    # +5010 (the last session read); out of sync at +5010 + L + 1 = +15011.
    events = [meta(T0), *idle(T0 + 10, T0 + 5_011)]
    events += [ev("append", T0 + 5_500, leader_leo=10), fetch(T0 + 5_501, 2, 10, 10)]
    events += [fetch(T0 + 6_000, 3, 0, 10)]
    events += [ev("heartbeat", T0 + s * 1000) for s in range(6, 30)]
    _, alerts, quarantine = run(events)
    assert quarantine == []
    assert transitions(alerts, "ReplicaOutOfSync") == [("firing", 15_011, "c1/t-0/3")]


def test_a_restated_session_read_is_nothing_new_and_not_a_stale_fetch():
    # The collector restates the last session read (+3010) before a change; the bucket took it
    # already (its deadline at +3010 asked): not quarantined, nothing changes.
    events = [meta(T0), *idle(T0 + 10, T0 + 3_011), fetch(T0 + 3_010, 2, 0, 0)]
    bucket, _, quarantine = run(events)
    assert quarantine == []
    assert bucket.partitions[("c1", "t", 0)].leader.followers[2].last_fetch_ms == T0 + 3_010


def test_a_follower_that_leaves_its_session_is_no_longer_carried():
    # Follower 2's fetch at +2000 names no session (session_id 0): the reads of session 7 after
    # that are not its own. Its last fetch stays at +2000.
    events = [meta(T0), *idle(T0 + 10, T0 + 1_011), fetch(T0 + 2_000, 2, 0, 0, sid=0)]
    events += [session(T0 + t, 2) for t in (3_000, 4_000)] + [session(T0 + 4_000, 3)]
    events += [ev("heartbeat", T0 + 15_000)]  # the partition's time passes +4000 (lateness 10 s)
    bucket, _, _ = run(events)
    watch = bucket.partitions[("c1", "t", 0)]
    bucket.statuses(monitor_config(replica_lag_time_max_ms=L), [], rows := [], force=True)
    by_replica = {r["replica"]: r for r in rows}
    assert by_replica[2]["last_fetch_ms"] == T0 + 2_000
    assert by_replica[3]["last_fetch_ms"] == T0 + 4_000  # still carried by session 7
    assert watch.leader.followers[2].session_id == 0


def test_a_bad_session_event_is_quarantined_once_per_cluster():
    events = [meta(T0), session(T0 + 10, 1, leader=1)]  # a broker fetching from itself
    found = []
    for b in range(3):
        _, _, quarantine = run(events, buckets=3, bucket_id=b)
        found += quarantine
    assert [q["reason"] for q in found] == [OWN_LEADER]
    assert owner_bucket("c1", 3) in range(3)


def test_a_partition_read_by_its_sessions_is_not_evicted():
    # stream.evict_after_ms 40 s: the partition's own last event is at +10, but its sessions
    # read until +60 s; it is evicted 40 s after the last read (+59010), at +99010.
    cfg = monitor_config(replica_lag_time_max_ms=L, evict_after_ms=40_000)
    events = [meta(T0), *idle(T0 + 10, T0 + 60_010)]
    events += [ev("heartbeat", T0 + s * 1000) for s in range(1, 120)]
    bucket, alerts, quarantine = Bucket(0, 1), [], []
    for s in range(0, 120, 5):  # micro-batches of 5 s
        batch = [e for e in events if T0 + s * 1000 <= e[1] < T0 + (s + 5) * 1000]
        bucket.process(batch, cfg, alerts, quarantine)
        bucket.advance(cfg, alerts)
        if s == 90:
            assert ("c1", "t", 0) in bucket.partitions
    assert ("c1", "t", 0) not in bucket.partitions
    gone = [a for a in alerts if a["status"] == "resolved" and "no longer monitored" in a["reason"]]
    assert gone and {a["ts"] for a in gone} == {T0 + 99_010}


def test_the_session_table_and_who_it_carries_survive_the_state_format():
    # A bucket saved between micro-batches and loaded again (state/codec.py) derives the same:
    # the reads after the save are taken from the restored table by the restored followers.
    cfg = monitor_config(replica_lag_time_max_ms=L)
    first = [meta(T0), *idle(T0 + 10, T0 + 3_011)]
    later = [session(T0 + t, r) for t in (3_010, 4_010) for r in (2, 3)]
    later += [ev("heartbeat", T0 + 20_000)]
    whole, _, _ = run(first + later)
    bucket, alerts, quarantine = Bucket(0, 1), [], []
    bucket.process(first, cfg, alerts, quarantine)
    bucket.advance(cfg, alerts)
    restored = decode(encode(bucket), bucket_id=0, buckets=1, cfg=cfg)
    assert restored.clusters["c1"].sessions.reads == bucket.clusters["c1"].sessions.reads != {}
    restored.process(later, cfg, alerts, quarantine)
    restored.advance(cfg, alerts)
    for r in (2, 3):
        want = whole.partitions[("c1", "t", 0)].leader.followers[r]
        got = restored.partitions[("c1", "t", 0)].leader.followers[r]
        assert (
            (got.session_id, got.last_fetch_ms) == (want.session_id, want.last_fetch_ms) == (SID, T0 + 4_010)
        )


def test_a_partition_its_sessions_carry_wakes_for_its_status_refresh_not_every_telemetry_gap(monkeypatch):
    # Sessions read every second for 15 min; micro-batches of 5 s. A partition whose own silence
    # is checked every alerts.telemetry_gap_ms (30 s) would be evaluated about 30 times; one its
    # sessions carry is evaluated when its healthy status repeats (stream.status_refresh_ms,
    # 5 min here: 3 times in 15 min) and a few times as it starts. Its statuses still repeat,
    # no more than one refresh period, a wave (a thirtieth of it) and a batch apart.
    cfg = monitor_config(replica_lag_time_max_ms=L, status_refresh_ms=300_000)
    assert cfg.telemetry_gap_ms == 30_000
    evaluated = []
    plain = PartitionWatch.evaluate

    def counted(self, now, *args):
        evaluated.append(now)
        return plain(self, now, *args)

    monkeypatch.setattr(PartitionWatch, "evaluate", counted)
    events = [meta(T0), *idle(T0 + 10, T0 + 900_010)]
    bucket, alerts, quarantine, statuses = Bucket(0, 1), [], [], []
    for s in range(0, 900, 5):
        batch = [e for e in events if T0 + s * 1000 <= e[1] < T0 + (s + 5) * 1000]
        bucket.process([*batch, ev("heartbeat", T0 + (s + 5) * 1000 - 1)], cfg, alerts, quarantine)
        bucket.advance(cfg, alerts)
        rows: list = []
        bucket.statuses(cfg, rows, [])
        statuses += [r["ts"] for r in rows]
    assert alerts == [] and quarantine == []
    assert len(evaluated) <= 8, [t - T0 for t in evaluated]
    assert len(statuses) >= 3 and all(b - a <= 315_000 for a, b in itertools.pairwise(statuses))
    assert 900_000 - (statuses[-1] - T0) <= 315_000 + 10_000  # (the last 10 s are not settled)


def test_a_noticed_silence_survives_the_state_format():
    # Both sessions fell silent at +19010 and were noticed (+49011 passed): a bucket saved and
    # loaded again does not wake their partitions a second time, and wakes them when they read.
    table = SessionTable({(2, 1, 7): [19_010], (3, 1, 7): [19_010]})
    assert table.silent(60_000, 30_000) == [((2, 1, 7), 49_011), ((3, 1, 7), 49_011)]
    restored = SessionTable.from_rows(table.to_rows())
    assert restored.noticed == table.noticed and restored.silent(70_000, 30_000) == []
    assert restored.read(2, 1, 7, 75_000) is None and restored.resumed == [((2, 1, 7), 75_000)]
