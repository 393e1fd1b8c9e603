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
PROMISED = {"3.4.1", "3.9.1", "4.3.1"}


def test_every_promised_version_has_a_fixture():
    assert set(FIXTURES) >= PROMISED, sorted(PROMISED - set(FIXTURES))


def _read(label: str):
    d = DATA / label
    facts = json.loads((d / "facts.json").read_text())
    names = {facts["topic_id"]: facts["topic"]} if facts.get("topic_id") else {}
    logs, events = {}, {}
    for b in facts["brokers"]:
        bl = BrokerLog("fixture", b, names.get, wanted=lambda t: t == facts["topic"], tz=UTC)
        lines = gzip.decompress((d / f"broker-{b}.log.gz").read_bytes()).decode().splitlines()
        events[b] = [ev for line in lines for ev in bl.events(line)]
        logs[b] = bl
    return facts, logs, events


@pytest.mark.parametrize("label", FIXTURES)
def test_fixture_parses_to_the_recorded_facts(label):
    facts, logs, events = _read(label)
    parts = facts["partitions"]
    assert len(parts) == 4 and all(len(p["replicas"]) == 3 for p in parts.values())

    for b, bl in logs.items():
        assert bl.counts["bad line"] == 0, (b, bl.counts)
        assert not [k for k in bl.counts if k.startswith("warning")], (b, bl.counts)
        assert bl.counts["lines"] > 0

    for p, want in parts.items():
        leader, end = want["leader"], want["end_offset"]
        followers = set(want["replicas"]) - {leader}
        assert want["acked_offsets"] and max(want["acked_offsets"]) + 1 == end  # the facts agree
        # Only the leader answers follower fetches; each follower fetched every partition.
        for b, evs in events.items():
            mine = [e for e in evs if e["type"] == "fetch" and e["partition"] == int(p)]
            if b != leader:
                assert mine == [], (p, b)
                continue
            assert {e["replica"] for e in mine} == followers, (p, leader)
            for f in followers:
                seq = [e for e in mine if e["replica"] == f]
                offsets = [e["fetch_offset"] for e in seq]
                assert offsets == sorted(offsets), (p, f, offsets)  # a follower's fetch offset only grows
                assert all(e["fetch_offset"] <= e["leader_leo"] <= end for e in seq), (p, f)
                # Caught up at the end: the last fetch read the whole log, as the end offsets say.
                assert (seq[-1]["fetch_offset"], seq[-1]["leader_leo"]) == (end, end), (p, f, seq[-1])
                assert all("error" not in e for e in seq), (p, f)
                assert {e.get("leader_epoch", want["leader_epoch"]) for e in seq} == {want["leader_epoch"]}
                assert all(e["topic"] == facts["topic"] for e in seq)
        # Appends: on the leader only, each at a batch's first offset the producer was acked.
        appends = [
            e for b, evs in events.items() for e in evs if e["type"] == "append" and e["partition"] == int(p)
        ]
        assert appends and all(e["leader_leo"] - 1 in want["acked_offsets"] for e in appends), p
        assert {e["leader_leo"] for e in appends} <= set(range(1, end + 1))
        assert appends[0]["leader_leo"] == 1  # the first batch starts the log
        assert all(e in events[leader] for e in appends), (
            "an append on a broker that does not lead the partition"
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

    def __init__(self, error=KeyError("endpoint_type")):
        self.error, self.asked = error, []
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
