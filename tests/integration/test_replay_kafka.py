"""`replmon replay` over the local Kafka broker: the metrics topic read as a batch bounded by
record timestamps gives, for a window, the alert transitions and ids the live query gave (the
live query reads the same topic in micro-batches of at most 2,000 records)."""

from __future__ import annotations

import json
import time
import uuid
from operator import itemgetter
from pathlib import Path

import pytest

from replmon.streaming.bridge import OutputRouter
from replmon.streaming.cli import main as replmon
from replmon.streaming.query import start_query
from replmon.streaming.settings import Settings
from replmon.streaming.sources import kafka_source
from tests.integration.test_kafka_to_redis import delete_topics
from tests.streaming.helpers import await_end, read_outputs

pytestmark = [pytest.mark.services, pytest.mark.spark]


def simulate(args: list[str]) -> int:
    """`replmon simulate ...`"""
    return replmon(["simulate", *args])


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_a_kafka_window_replay_matches_the_live_run(spark, kafka_bootstrap, spark_kafka_jars, tmp_path):
    from replmon.streaming import cli

    topic = f"it-replay-{uuid.uuid4().hex[:10]}"
    # Event times a few minutes in the past: the records' timestamps (when they were produced,
    # now) are within the replay's --kafka-time-slack of them.
    start_ms = (int(time.time() * 1000) - 300_000) // 1000 * 1000
    assert (
        simulate(
            [
                "--scenario",
                "paused_and_slow",
                "--to",
                "kafka",
                "--metrics-bootstrap",
                kafka_bootstrap,
                "--metrics-topic",
                topic,
                "--create-topic",
                "--partitions",
                "3",
                "--start",
                str(start_ms),
                "--output",
                str(tmp_path / "sim"),
            ]
        )
        == 0
    )
    try:
        settings = Settings(
            kafka={
                "bootstrap_servers": kafka_bootstrap,
                "subscribe": topic,
                "starting_offsets": "earliest",
                "max_offsets_per_trigger": 2000,
            },
            spark={"checkpoint_dir": str(tmp_path / "checkpoint")},
            stream={"buckets": 4},
            output_dir=str(tmp_path / "live"),
        )
        router = OutputRouter(settings.output_dir, None)
        query = start_query(
            spark,
            kafka_source(spark, settings.kafka),
            settings,
            router,
            once=True,
            name=f"it_replay_{uuid.uuid4().hex[:8]}",
        )
        await_end(query, 300)
        live = read_outputs(tmp_path / "live")["alerts"]

        config = tmp_path / "replmon.toml"
        config.write_text(
            f'[kafka]\nsubscribe = "{topic}"\n[stream]\nbuckets = 4\n'
            f"[spark]\njars = {json.dumps(spark_kafka_jars)}\n"
        )
        t1, t2 = start_ms + 30_000, start_ms + 90_000
        assert (
            cli.main(
                [
                    "replay",
                    "--config",
                    str(config),
                    "--metrics-bootstrap",
                    kafka_bootstrap,
                    "--from",
                    str(t1),
                    "--to",
                    str(t2),
                    "--output",
                    str(tmp_path / "replay"),
                ]
            )
            == 0
        )
    finally:
        delete_topics(kafka_bootstrap, [topic])
    replayed = _jsonl(tmp_path / "replay" / "alerts.jsonl")
    key = itemgetter("alert_id", "status", "ts", "name", "subject")
    expected = sorted(key(r) for r in live if t1 <= r["ts"] <= t2)
    assert expected, "the window must hold transitions"
    assert sorted(key(r) for r in replayed) == expected
    open_live = {r["alert_id"] for r in live if r["status"] == "firing" and r["ts"] < t1} - {
        r["alert_id"] for r in live if r["status"] == "resolved" and r["ts"] < t1
    }
    assert {r["alert_id"] for r in _jsonl(tmp_path / "replay" / "firing_at_start.jsonl")} == open_live
