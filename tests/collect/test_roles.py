"""`replmon collect --role`: a broker collector publishes only its request logs' events, the
cluster role only the Admin API's events and the heartbeats, and together they publish what one
`--role all` collector publishes over the same logs and the same Admin answers."""

from __future__ import annotations

import pytest

from replmon.streaming.cli import build_parser
from replmon.streaming.cli_flags import UsageError
from replmon.streaming.collect import cli as collect_cli
from replmon.streaming.collect.collector import Collector, source_name
from tests.collect.lines import TOPIC_ID, fetch_line, produce_line
from tests.collect.test_collector import PACE, Clock, Recorder, T

BROKER_FENCED = {"type": "broker", "ts": 0, "cluster": "c", "broker": 3, "state": "fenced"}


class Admin:
    """Answers as the Admin API would: topic t1's id, and one change (broker 3 fenced)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def name_of(self, topic_id):
        return self.names.get(topic_id)

    def ask(self):
        return "answers"

    def changes(self, answers, now_ms):
        self.names[TOPIC_ID] = "t1"  # a broker collector needs this much of the Admin API
        return [dict(BROKER_FENCED, ts=now_ms)]


def make(tmp_path, role, logs, rec, clock, name):
    return Collector(
        "c",
        {b: str(p) for b, p in logs.items()},
        Admin(),
        rec,
        tmp_path / name,
        hold_ms=1000,
        heartbeat_ms=1000,
        clock=clock,
        **{**PACE, "role": role},
    )


def lines_of(broker):
    """A produce on the broker's partition 0 and a follower fetch that reads it (at T+299)."""
    return [
        produce_line(T + 200, 0, 9, total=10, queue=0, local=0),
        fetch_line(T + 300, 4 - broker, requested=[(0, 10)], responded=[(0, 100, 11)], total=2, queue=0),
    ]


def without_ts_order(events):
    return sorted(sorted(e.items()) for e in events)


def test_per_broker_collectors_and_the_cluster_role_publish_what_one_collector_does(tmp_path):
    logs = {}
    for b in (1, 2):
        logs[b] = tmp_path / f"kafka-request-{b}.log"
        logs[b].write_text("")
    clock = Clock(T)
    single, split = Recorder(), Recorder()
    collectors = [make(tmp_path, "all", logs, single, clock, "all")]
    collectors += [make(tmp_path, "broker", {b: logs[b]}, split, clock, f"b{b}") for b in logs]
    collectors += [make(tmp_path, "cluster", {}, split, clock, "cluster")]
    for c in collectors:
        c.start()
        c.poll_admin()  # each asks the Admin API: names for all, events only where published
    for b, log in logs.items():
        log.write_text("\n".join(lines_of(b)) + "\n")
    clock.ms = T + 2000
    for c in collectors:
        c.step()
    kinds = sorted(e["type"] for e in single.sent)
    assert kinds == ["append", "append", "broker", "fetch", "fetch", "heartbeat"], single.sent
    assert without_ts_order(split.sent) == without_ts_order(single.sent)


@pytest.mark.parametrize(
    ("role", "published"),
    [
        ("broker", {"append", "fetch"}),  # no Admin events, no heartbeats: the cluster role sends them
        ("cluster", {"broker", "heartbeat"}),  # reads no request log
    ],
)
def test_each_role_publishes_only_its_part(tmp_path, role, published):
    log = tmp_path / "kafka-request.log"
    log.write_text("")
    rec, clock = Recorder(), Clock(T)
    c = make(tmp_path, role, {1: log} if role == "broker" else {}, rec, clock, role)
    c.start()
    c.poll_admin()
    log.write_text("\n".join(lines_of(1)) + "\n")
    clock.ms = T + 2000
    c.step()
    assert {e["type"] for e in rec.sent} == published


def test_each_source_has_its_own_checkpoint_and_transactional_name(tmp_path):
    # Collectors of one cluster may share a state dir (tests, a host with two brokers): their
    # checkpoints must not overwrite each other, and two broker collectors must not fence each other.
    names = {
        source_name("c", "all", [1, 2]),
        source_name("c", "cluster", []),
        source_name("c", "broker", [2]),
    }
    assert names == {"c", "c-cluster", "c-broker-2"}
    assert source_name("c", "broker", [1]) != source_name("c", "broker", [2])
    c = make(tmp_path, "broker", {2: tmp_path / "x.log"}, Recorder(), Clock(T), "s")
    assert c.checkpoint_path.name == "checkpoint-c-broker-2.json"


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--role", "cluster", "--request-log", "1=/x"], "--role cluster reads no request log"),
        (["--role", "broker"], "--role broker wants --request-log"),
        ([], "--role all wants --request-log"),
    ],
)
def test_the_role_and_the_request_logs_must_agree(flags, error):
    args = build_parser().parse_args(["collect", "--cluster", "c", "--bootstrap", "b:9092", *flags])
    with pytest.raises(UsageError, match=error):
        collect_cli.run(args)
