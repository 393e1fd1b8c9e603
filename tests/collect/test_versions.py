"""Request logs of real Kafka brokers, one fixture per version (tests/collect/data/<label>/),
parsed by replmon collect's broker-log reader and checked against what the Admin API and the
producer's acks said at capture time (facts.json), not against the parser's own output.

Each fixture was recorded by tests/collect/record_version.py from a 3-broker cluster started
from Maven Central's jars (deploy/local/services.sh with REPLMON_KAFKA_VERSION): one topic of
4 partitions, replication factor 3, a few seconds of acks=all records, then a wait until the
followers had caught up. docs/real-cluster.md's support table lists them.
"""

from __future__ import annotations

import gzip
import json
from datetime import UTC
from pathlib import Path

import pytest

from replmon.streaming.collect.admin import describe_cluster
from replmon.streaming.collect.broker_log import BrokerLog
from replmon.streaming.collect.requestlog import TESTED_VERSIONS
from tests.collect.lines import TOPIC_ID, fetch_line, heartbeat_line, produce_line

DATA = Path(__file__).resolve().parent / "data"
FIXTURES = sorted(p.name for p in DATA.iterdir() if (p / "facts.json").exists()) if DATA.exists() else []
# The versions docs/real-cluster.md promises, each with its fixture: a fixture that goes
# missing fails here rather than shrinking the promise without a word.
STARTUP_ERRORS = {
    "UNKNOWN_LEADER_EPOCH",
    "NOT_LEADER_OR_FOLLOWER",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "UNKNOWN_TOPIC_ID",
}
PROMISED = {
    "3.4.1",
    "3.5.2",
    "3.6.2",
    "3.7.2",
    "3.9.1",
    "3.9.1-zk-ibp3.0",
    "4.0.2",
    "4.1.2",
    "4.2.1",
    "4.3.1",
    "4.4.0",
}


def test_every_promised_version_has_a_fixture():
    assert set(FIXTURES) >= PROMISED, sorted(PROMISED - set(FIXTURES))


def _topics(facts: dict) -> list[dict]:
    """The fixture's topics: the kafka-python one (with the acked offsets) and, when Kafka's
    Java producer ran, its own."""
    main = {k: facts[k] for k in ("topic", "topic_id", "partitions")}
    return [main] + ([facts["java_topic"]] if facts.get("java_topic") else [])


def _read(label: str):
    d = DATA / label
    facts = json.loads((d / "facts.json").read_text())
    topics = _topics(facts)
    names = {t["topic_id"]: t["topic"] for t in topics if t.get("topic_id")}
    wanted = {t["topic"] for t in topics}
    logs, events = {}, {}
    for b in facts["brokers"]:
        bl = BrokerLog("fixture", b, names.get, wanted=lambda t: t in wanted, tz=UTC)
        lines = gzip.decompress((d / f"broker-{b}.log.gz").read_bytes()).decode().splitlines()
        events[b] = [ev for line in lines for ev in bl.events(line)]
        logs[b] = bl
    return facts, logs, events


def _check_partition(events: dict, topic: str, partition: int, want: dict) -> None:
    leader, end = want["leader"], want["end_offset"]
    followers = set(want["replicas"]) - {leader}
    assert len(want["replicas"]) == 3
    for b, evs in events.items():
        mine = [e for e in evs if e["topic"] == topic and e["partition"] == partition]
        fetches = [e for e in mine if e["type"] == "fetch"]
        appends = [e for e in mine if e["type"] == "append"]
        if b != leader:  # only the leader answers follower fetches and appends
            assert fetches == [] and appends == [], (topic, partition, b)
            continue
        assert {e["replica"] for e in fetches} == followers, (topic, partition, leader)
        for f in followers:
            seq = [e for e in fetches if e["replica"] == f]
            offsets = [e["fetch_offset"] for e in seq]
            assert offsets == sorted(offsets), (topic, partition, f, offsets)  # it only grows
            assert all(e["fetch_offset"] <= e["leader_leo"] <= end for e in seq), (topic, partition, f)
            # The recorder waited 3 s after the last record: the caught-up follower's fetches then
            # wait up to 500 ms each (replica.fetch.wait.max.ms) and name no partition, and the
            # leader reads every partition of the session on each (sessions.py).
            assert sum(e["fetch_offset"] == end for e in seq) >= 3, (topic, partition, f, seq[-3:])
            # Caught up at the end: the last fetch read the whole log, as the end offsets say.
            assert (seq[-1]["fetch_offset"], seq[-1]["leader_leo"]) == (end, end), (
                topic,
                partition,
                f,
                seq[-1],
            )
            # A follower can ask before the leader has taken its leadership (topic creation):
            # such errors come first, and only these.
            errors = [e.get("error") for e in seq]
            assert errors == sorted(errors, key=lambda x: x is None), (topic, partition, f, errors)
            assert set(errors) <= {None, *STARTUP_ERRORS}, (topic, partition, f, errors)
            assert {e.get("leader_epoch", want["leader_epoch"]) for e in seq} == {want["leader_epoch"]}
        # The first batch starts the log (Java's sticky partitioner may leave a partition empty).
        assert [e["leader_leo"] for e in appends[:1]] == ([1] if end else []), (topic, partition)
        assert all(1 <= e["leader_leo"] <= end for e in appends), (topic, partition)
        if "acked_offsets" in want:  # each append starts at a record the producer was acked for
            assert max(want["acked_offsets"]) + 1 == end  # the facts agree with each other
            assert all(e["leader_leo"] - 1 in want["acked_offsets"] for e in appends), (topic, partition)


@pytest.mark.parametrize("label", FIXTURES)
def test_fixture_parses_to_the_recorded_facts(label):
    facts, logs, events = _read(label)
    for b, bl in logs.items():
        flagged = [k for k in bl.counts if any(w in k for w in ("bad", "unreadable", "warning", "missing"))]
        assert not flagged, (b, dict(bl.counts))
        assert bl.counts["lines"] > 0
    topics = _topics(facts)
    assert len(topics[0]["partitions"]) == 4 and all(
        p["end_offset"] for p in topics[0]["partitions"].values()
    )
    for t in topics:
        for p, want in t["partitions"].items():
            _check_partition(events, t["topic"], int(p), want)
    seen = {(e["topic"], e["partition"]) for evs in events.values() for e in evs}
    assert seen == {(t["topic"], int(p)) for t in topics for p in t["partitions"]}
    if facts.get("java_topic"):
        assert (
            sum(p["end_offset"] for p in facts["java_topic"]["partitions"].values())
            == facts["java_topic"]["records"]
        )


@pytest.mark.parametrize("label", FIXTURES)
def test_fixture_request_versions_are_tested_ones(label):
    """The fixture's FETCH and PRODUCE versions (read from its JSON headers when it was recorded)
    are in the table the reader warns against, so a new version shows up as a warning there."""
    facts = json.loads((DATA / label / "facts.json").read_text())
    seen = facts["request_versions_seen"]
    assert any("(replica fetcher)" in k for k in seen), seen
    for key in seen:
        api, version = key.split()[:2]
        assert int(version[1:]) in TESTED_VERSIONS[api], key


def _with_version(line: str, version) -> str:
    head, body = line.split("Completed request:", 1)
    obj = json.loads(body)
    if version is None:
        del obj["requestHeader"]["requestApiVersion"]
    else:
        obj["requestHeader"]["requestApiVersion"] = version
    return head + "Completed request:" + json.dumps(obj)


@pytest.mark.parametrize("version, shown", [(99, "FETCH v99"), (None, "FETCH v?"), (11, "FETCH v11")])
def test_an_untested_request_version_is_read_counted_and_shown_once(caplog, version, shown):
    bl = BrokerLog("c", 1, {TOPIC_ID: "t1"}.get)
    tested = fetch_line(1000, 2, epoch=0, requested=[(0, 5)], responded=[(0, 0, 5)], response_session=7)
    line = _with_version(tested, version)
    with caplog.at_level("WARNING", logger="replmon.streaming.collect.broker_log"):
        evs = [bl.events(line), bl.events(line.replace("[1000]", "[1500]"))]
    # Read as the tested versions are: the same events as the tested line gives.
    assert evs[0] == BrokerLog("c", 1, {TOPIC_ID: "t1"}.get).events(tested) and evs[0]
    key = f"warning: untested request version {shown}"
    assert bl.counts[key] == 2
    warned = [r.getMessage() for r in caplog.records if shown in r.getMessage()]
    assert len(warned) == 1 and "Completed request:" in warned[0]  # once, with the example line


def test_tested_versions_are_not_warned():
    bl = BrokerLog("c", 1, {TOPIC_ID: "t1"}.get)
    bl.events(fetch_line(1000, 2, epoch=0, requested=[(0, 5)], responded=[(0, 0, 5)], response_session=7))
    bl.events(produce_line(1100, 0, 5))
    bl.events(heartbeat_line(1200, 2))
    assert bl.counts["lines"] == 3
    assert not [k for k in bl.counts if k.startswith("warning")], bl.counts


class _OldBrokerAdmin:
    """kafka-python 3.0.12's KafkaAdminClient as it behaves against Kafka 2.8-3.6 (seen on a
    3.4.1 cluster): describe_cluster raises KeyError('endpoint_type') on the v0 answer, and its
    private Metadata helper answers with node_id keys."""

    def __init__(self, error: Exception | None = None):
        self.error, self.asked = error or KeyError("endpoint_type"), []
        self._manager = self

    def describe_cluster(self):
        raise self.error

    def run(self, coro, *args):
        self.asked.append((coro, args))
        return coro(*args)

    def _get_cluster_metadata(self, topics):
        return {"cluster_id": "c", "controller_id": 2, "brokers": [{"node_id": 1, "host": "h", "port": 1}]}


def test_describe_cluster_of_a_pre_3_7_broker_asks_metadata():
    old = _OldBrokerAdmin()
    got = describe_cluster(old)
    assert got["controller_id"] == 2 and [b["broker_id"] for b in got["brokers"]] == [1]
    assert old.asked == [(old._get_cluster_metadata, ([],))]
    with pytest.raises(KeyError):  # any other KeyError is not this one
        describe_cluster(_OldBrokerAdmin(KeyError("brokers")))
