"""The collector's session form (`replmon collect --session-form`, streaming/collect/sessions.py)
on the request logs of real brokers, one fixture per version 3.4-4.4 (tests/collect/data): the
fetch sessions the logs show become `session` events named by their real session ids, fewer
fetch events go out, and the engine decides the same on both forms (the differential test's
check, tests/state/test_session_form.py)."""

from __future__ import annotations

import gzip
import json
from datetime import UTC

import pytest

from replmon.state.bucket import Bucket
from replmon.state.events import TIE_RANK, event
from replmon.streaming.collect.broker_log import BrokerLog
from replmon.streaming.collect.compact import Compactor, published
from replmon.streaming.collect.sessions import SessionForm, per_partition
from replmon.streaming.settings import monitor_config
from replmon.streaming.simulator.cluster import ClusterSpec, TopicSpec
from replmon.streaming.simulator.faults import BrokerCrash, PausedFollower
from replmon.streaming.simulator.model import simulate
from tests.collect.test_versions import DATA, FIXTURES, _topics
from tests.state.test_monitor_vs_truth import as_tuple
from tests.state.test_session_form import RESOLUTION_MS, agree

LAG_MS = 30_000  # the fixtures' brokers ran with Kafka's default replica.lag.time.max.ms


def _events(label: str, session_ids: bool) -> tuple[list[dict], list[tuple]]:
    """The fixture's events as `replmon collect` makes them, with the metadata the Admin API
    reported (facts.json) at their start; and its (follower, leader) pairs."""
    facts = json.loads((DATA / label / "facts.json").read_text())
    topics = _topics(facts)
    names = {t["topic_id"]: t["topic"] for t in topics if t.get("topic_id")}
    wanted = {t["topic"] for t in topics}
    events: list[dict] = []
    for b in facts["brokers"]:
        bl = BrokerLog("fixture", b, names.get, wanted=lambda t: t in wanted, tz=UTC)
        bl.session_ids = session_ids
        lines = gzip.decompress((DATA / label / f"broker-{b}.log.gz").read_bytes()).decode().splitlines()
        events += [ev for line in lines for ev in bl.events(line)]
    start = min(e["ts"] for e in events) - 1
    pairs = []
    for t in topics:
        for p, want in t["partitions"].items():
            events.append(
                event(
                    "metadata",
                    start,
                    "fixture",
                    topic=t["topic"],
                    partition=int(p),
                    leader=want["leader"],
                    leader_epoch=want["leader_epoch"],
                    replicas=want["replicas"],
                    isr=want["replicas"],
                    replica_lag_time_max_ms=LAG_MS,
                )
            )
            pairs += [(r, want["leader"]) for r in want["replicas"] if r != want["leader"]]
    events.sort(key=lambda e: e["ts"])
    return events, pairs


@pytest.mark.parametrize("label", FIXTURES)
def test_a_real_brokers_fetch_sessions_say_the_same(label):
    per_partition, pairs = _events(label, session_ids=False)
    named, _ = _events(label, session_ids=True)
    former = SessionForm(RESOLUTION_MS, session_key=None)
    compact = former.release(named) + former.finish()
    sessions = [e for e in compact if e["type"] == "session"]
    ids = {e["session_id"] for e in named if e.get("session_id")}
    # the recorder's followers fetched through incremental sessions (Kafka's default since 1.1)
    assert sessions and ids and {e["session_id"] for e in sessions} <= ids
    assert {(e["replica"], e["leader"]) for e in sessions} <= set(pairs)
    fetches = sum(e["type"] == "fetch" for e in per_partition)
    sent = sum(e["type"] == "fetch" for e in compact)
    assert former.dropped > 0 and sent == fetches - former.dropped + former.restated < fetches / 2
    agree(per_partition, compact, LAG_MS)


def _metadata(ts: int, partition: int) -> dict:
    return event(
        "metadata",
        ts,
        "c",
        topic="t",
        partition=partition,
        leader=1,
        leader_epoch=0,
        replicas=[1, 2],
        isr=[1, 2],
        replica_lag_time_max_ms=10_000,
    )


def _fetch(ts: int, offset: int, partition: int = 0) -> dict:
    """Follower 2's fetch at the leader LEO `offset`, in its session 7 on leader 1."""
    ev = event(
        "fetch", ts, "c", topic="t", partition=partition, replica=2, fetch_offset=offset, leader_leo=offset
    )
    return {**ev, "session_id": 7}


def _append(ts: int, leo: int, partition: int = 0) -> dict:
    return event("append", ts, "c", topic="t", partition=partition, leader_leo=leo)


def _form(events: list[dict]) -> list[dict]:
    """The session form of `events`, in event-time order (ties in the contract's order)."""
    former = SessionForm(1000, session_key=None)
    return sorted(former.release(events) + former.finish(), key=lambda e: (e["ts"], TIE_RANK[e["type"]]))


def _sent(events: list[dict]) -> list[tuple]:
    return [(e["type"], e["ts"], e.get("partition")) for e in _form(events) if e["type"] != "metadata"]


def test_a_read_between_bursts_that_is_restated_before_its_flush_sends_no_session_event():
    """Bursts a second apart, one idle read of the follower between two (as compaction leaves
    them under the judge's acks=all load): each such read must be restated as a fetch before
    the next append (lcu stays exact), so a `session` event for it would only repeat it. Then
    the partition idles for a second: its session's last read goes out."""
    events = [_metadata(0, 0), _fetch(100, 100)]
    for k, idle in enumerate((600, 1405, 2405)):
        burst, leo = 900 + 1000 * k, 110 + 10 * k
        events += [_fetch(idle, leo - 10), _append(burst, leo), _fetch(burst + 5, leo)]
    events += [_fetch(3405, 130), _fetch(3905, 130), _fetch(4405, 130)]  # then silent
    assert _sent(events) == [
        ("fetch", 100, 0),
        ("fetch", 600, 0),  # restated before the append
        ("append", 900, 0),
        ("fetch", 905, 0),
        ("fetch", 1405, 0),
        ("append", 1900, 0),
        ("fetch", 1905, 0),
        ("fetch", 2405, 0),
        ("append", 2900, 0),
        ("fetch", 2905, 0),
        ("session", 4405, None),  # the last read before the silence, once for its resolution
    ]
    # one `session` event in all, not one per idle read as well as its restated fetch; and the
    # engine decides on this what it decides on every fetch
    agree(events, _form(events), 10_000)


def test_a_held_read_that_another_partition_still_needs_is_published():
    """One read of a session of two idle partitions; an append to one restates that one's read,
    but the other's progress is still only in the session's read: it goes out, at its time."""
    events = [_metadata(0, 0), _metadata(0, 1), _fetch(100, 100, 0), _fetch(100, 50, 1)]
    events += [_fetch(600, 100, 0), _fetch(600, 50, 1), _append(900, 110, 0)]
    assert _sent(events) == [
        ("fetch", 100, 0),
        ("fetch", 100, 1),
        ("fetch", 600, 0),
        ("session", 600, None),
        ("append", 900, 0),
    ]
    agree(events, _form(events), 10_000)


def test_a_held_read_goes_out_when_the_release_watermark_passes_its_flush_time():
    """In the collector's steps a silent session's held read goes out as soon as the release
    watermark says no read up to its flush time is still to come, with nothing else released."""
    former = SessionForm(1000, session_key=None)
    former.release([_metadata(0, 0), _fetch(100, 100)], now_ms=100)
    assert former.release([_fetch(600, 100)], now_ms=600) == []  # held: its flush time is 1600
    assert former.release([], now_ms=1599) == []
    assert [(e["type"], e["ts"]) for e in former.release([], now_ms=1600)] == [("session", 600)]
    assert former.release([], now_ms=5000) == [] and former.finish() == []


def test_a_silent_followers_read_that_a_session_event_gave_is_not_restated_late():
    """A follower of an idle partition stops fetching (a paused broker: Kafka keeps it in the
    ISR, it is at the LEO), and its session's last read goes out as a `session` event. When the
    partition changes 20 s later (another broker crashes: a new ISR), that read is not restated
    as a fetch: the engine took it from the session event, published steps before, and a fetch
    20 s old would come behind the partition's newer events, and a live monitor would
    quarantine it as late. The engine decides the same as on the compacted events."""
    lag_ms = 10_000
    spec = ClusterSpec(
        name="p",
        topics=(TopicSpec(name="idle", partitions=3, produce_rate=0.0),),
        duration_ms=80_000,
        faults=(
            PausedFollower(topic="idle", partition=0, replica=2, start_ms=10_000, duration_ms=40_000),
            BrokerCrash(broker=3, start_ms=30_000, restart_after_ms=20_000),
        ),
        replica_lag_time_max_ms=lag_ms,
    )
    events, _ = simulate(spec, seed=0)
    compacted = published(events, Compactor(default_lag_ms=lag_ms), 1500, 200)
    former = SessionForm(1000, per_partition)
    sent = published(events, Compactor(default_lag_ms=lag_ms), 1500, 200, former)
    assert former.said > 0  # the paused follower's last read, on each change after its silence
    assert _late_in_a_live_monitor(sent, lag_ms) == []
    agree(compacted, sent, lag_ms)


def _late_in_a_live_monitor(published: list[dict], lag_ms: int) -> list[str]:
    """The engine fed the events in the order they were published, in micro-batches of 50
    (each sorted by event time, as the streaming step sorts one): what it quarantines as late."""
    cfg = monitor_config(replica_lag_time_max_ms=lag_ms, compaction_resolution_ms=1000)
    bucket, quarantine = Bucket(0, 1), []
    for i in range(0, len(published), 50):
        chunk = sorted(published[i : i + 50], key=lambda e: (e["ts"], TIE_RANK[e["type"]]))
        got: list = []
        bucket.process([as_tuple(e) for e in chunk], cfg, got, quarantine)
        bucket.advance(cfg, got)
    return [q["reason"] for q in quarantine if q["reason"].startswith("late")]
