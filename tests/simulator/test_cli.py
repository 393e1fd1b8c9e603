"""`replmon simulate`: files, and Kafka through a producer that records what it is sent."""

from __future__ import annotations

import json

from replmon.streaming.cli import main as replmon
from replmon.streaming.simulator import writers

from .runs import run


class RecordingProducer:
    """Stands in for kafka-python's KafkaProducer: keeps (topic, key, value) of every send."""

    def __init__(self):
        self.sent, self.flushed, self.closed = [], 0, False

    def send(self, topic, value=None, key=None):
        self.sent.append((topic, key, value))

    def flush(self, timeout=None):
        self.flushed += 1

    def close(self):
        self.closed = True


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_files_hold_the_events_in_ts_order_and_the_truth(tmp_path):
    assert (
        replmon(["simulate", "--scenario", "paused_and_slow", "--seed", "0", "--output", str(tmp_path)]) == 0
    )
    events = _lines(tmp_path / "events" / "part-00000.jsonl")
    truth = _lines(tmp_path / "truth.jsonl")
    assert (events, truth) == run("paused_and_slow", 0)
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
    assert {r["kind"] for r in truth} == {"fault", "isr_change", "out_of_sync", "hw", "partition"}


def test_cluster_name_and_start_time_can_be_given(tmp_path):
    assert (
        replmon(
            [
                "simulate",
                "--scenario",
                "steady",
                "--cluster",
                "east",
                "--start",
                "1970-01-01T00:00:05Z",
                "--output",
                str(tmp_path),
            ]
        )
        == 0
    )
    events = _lines(tmp_path / "events" / "part-00000.jsonl")
    assert events[0]["ts"] == 5000 and {e["cluster"] for e in events} == {"east"}


def test_scale_scenario_writes_lines_and_an_empty_truth(tmp_path):
    args = [
        "--scenario",
        "scale",
        "--scale-partitions",
        "5",
        "--scale-duration",
        "2s",
        "--output",
        str(tmp_path),
    ]
    assert replmon(["simulate", *args]) == 0
    events = _lines(tmp_path / "events" / "part-00000.jsonl")
    assert len(events) == 3 + 5 + 2 + 2 * 10 * 5 * 3  # brokers, metadata, heartbeats, 10 rounds/s x 3
    assert (tmp_path / "truth.jsonl").read_text() == ""


def test_usage_errors_are_a_return_code(tmp_path, capsys):
    assert replmon(["simulate", "--scenario", "nope", "--output", str(tmp_path)]) == 2
    assert replmon(["simulate", "--scenario", "demo"]) == 2  # files need --output
    err = capsys.readouterr().err
    assert "replmon simulate: --scenario: unknown 'nope'" in err
    assert "replmon simulate: --output DIR is required with --to file" in err


def test_publish_keys_partition_events_by_cluster_topic_partition():
    producer = RecordingProducer()
    events, _ = run("steady")
    assert writers.publish(events, producer, "replmon.fetch-metrics") == len(events)
    assert producer.flushed == 1
    for (topic, key, value), event in zip(producer.sent, events, strict=True):
        assert topic == "replmon.fetch-metrics" and json.loads(value) == event
        expected = (
            "sim"
            if event["type"] in ("broker", "heartbeat")
            else f"sim/{event['topic']}/{event['partition']}"
        )
        assert key == expected.encode()


def test_publish_takes_ready_json_lines_too():
    producer = RecordingProducer()
    line = '{"type":"append","ts":1,"cluster":"c","topic":"t","partition":3,"leader_leo":9}'
    writers.publish([line, '{"type":"heartbeat","ts":2,"cluster":"c"}'], producer, "x")
    assert producer.sent == [
        ("x", b"c/t/3", line.encode()),
        ("x", b"c", b'{"type":"heartbeat","ts":2,"cluster":"c"}'),
    ]


def test_to_kafka_creates_the_topic_sends_everything_and_still_writes_the_truth(tmp_path, monkeypatch):
    producer = RecordingProducer()
    created = []
    monkeypatch.setattr(writers, "kafka_producer", lambda bootstrap, **kw: producer)
    monkeypatch.setattr(writers, "create_topic", lambda *args: created.append(args))
    rc = replmon(
        [
            "simulate",
            "--scenario",
            "paused_and_slow",
            "--to",
            "kafka",
            "--metrics-bootstrap",
            "k:9092",
            "--metrics-topic",
            "ev",
            "--create-topic",
            "--partitions",
            "6",
            "--output",
            str(tmp_path),
        ]
    )
    assert rc == 0
    assert created == [("k:9092", "ev", 6, 1)]
    events, truth = run("paused_and_slow", 0)
    assert [json.loads(v) for _, _, v in producer.sent] == events
    assert producer.flushed == 1 and producer.closed
    assert _lines(tmp_path / "truth.jsonl") == truth
    assert not (tmp_path / "events").exists()


def test_to_kafka_goes_where_run_reads_when_no_flag_says(tmp_path, monkeypatch):
    # The settings' kafka section is where `replmon run` reads: without --metrics-bootstrap and
    # --metrics-topic, the events go there (docs/cli.md).
    for name in ("REPLMON_CONFIG", "REPLMON_KAFKA__BOOTSTRAP_SERVERS", "REPLMON_KAFKA__SUBSCRIBE"):
        monkeypatch.delenv(name, raising=False)
    producer = RecordingProducer()
    created, bootstraps = [], []
    monkeypatch.setattr(
        writers, "kafka_producer", lambda bootstrap, **kw: bootstraps.append(bootstrap) or producer
    )
    monkeypatch.setattr(writers, "create_topic", lambda *args: created.append(args))
    config = tmp_path / "replmon.toml"
    config.write_text('[kafka]\nbootstrap_servers = "metrics:9092"\nsubscribe = "fetches"\n')
    argv = ["simulate", "--scenario", "steady", "--to", "kafka", "--create-topic", "--config", str(config)]
    assert replmon(argv) == 0
    assert created == [("metrics:9092", "fetches", 3, 1)] and bootstraps == ["metrics:9092"]
    assert {topic for topic, _, _ in producer.sent} == {"fetches"}
    assert replmon(["simulate", "--scenario", "steady", "--to", "kafka"]) == 0  # no settings: the defaults
    assert bootstraps[-1] == "localhost:9092" and producer.sent[-1][0] == "replmon.fetch-metrics"
