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

from replmon.state.events import event
from replmon.streaming.collect.broker_log import BrokerLog
from replmon.streaming.collect.sessions import SessionForm
from tests.collect.test_versions import DATA, FIXTURES, _topics
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
