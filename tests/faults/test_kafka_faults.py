"""Through the real Kafka source, Spark and Redis: a metrics topic with several partitions read
a few hundred records per micro-batch gives the same alerts as the same events read from a file
in one batch, poison records in the topic are all quarantined and counted, and Redis holds each
alert transition exactly once."""

from __future__ import annotations

import os
import uuid
from collections import Counter

import pytest
import redis

from replmon.sinks.keys import Keys
from replmon.streaming.bridge import OutputRouter
from replmon.streaming.query import start_query
from replmon.streaming.redis_out import build_redis_sink
from replmon.streaming.settings import Settings
from replmon.streaming.simulator import scenarios
from replmon.streaming.simulator.model import simulate
from replmon.streaming.simulator.writers import create_topic, kafka_producer, publish, write_events
from replmon.streaming.sources import kafka_source
from tests.streaming.helpers import exactly_once, read_outputs, run_once, transition_key

pytestmark = [pytest.mark.spark, pytest.mark.services]

MAX_RECORD_BYTES = 4096
# (key, value): what a broken or hostile producer may put on the metrics topic
POISON = [
    (b"sim", b'{"type":"heartbeat","ts":1767225600001,"cluster":"s\xffim"}'),
    (b"sim", os.urandom(64) + b"\xff"),
    (b"sim", b'\xff\xfe\x00\x01{"type":"heartbeat","ts":1,"cluster":"sim"}'),
    (b"sim", b'{"type":"heartbeat","ts":1767225600002,"cluster":"a\x00b"}'),
    (b"sim", b'{"type":"heartbeat","ts":1767225600003,"cluster":"' + b"x" * 10_000 + b'"}'),
    (b"sim", None),  # a tombstone: no value at all
]


def transitions(alerts: list[dict]) -> list[tuple]:
    return sorted((a["alert_id"], a["status"], int(a["ts"]), a["reason"]) for a in alerts)


def test_small_batches_from_a_partitioned_topic_give_the_one_batch_alerts(
    spark, kafka_bootstrap, redis_url, tmp_path
):
    events, _ = simulate(scenarios.get("demo"), seed=0)
    topic = f"replmon.faults-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=4)
    producer = kafka_producer(kafka_bootstrap)
    publish(events, producer, topic)
    for key, value in POISON:
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()

    # The reference: the same events from a file, all in one micro-batch.
    write_events(tmp_path / "file", events)
    reference = run_once(
        spark,
        tmp_path / "file" / "events",
        tmp_path / "file-out",
        rules={"replica_lag_time_max_ms": 10_000},
        stream={"buckets": 4},
    )
    assert len(reference["alerts"]) > 10 and reference["quarantine"] == []

    prefix = f"faults{uuid.uuid4().hex[:8]}"
    settings = Settings(
        kafka={
            "bootstrap_servers": kafka_bootstrap,
            "subscribe": topic,
            "starting_offsets": "earliest",
            "max_offsets_per_trigger": 1000,
        },
        redis={"url": redis_url, "prefix": prefix},
        spark={"checkpoint_dir": str(tmp_path / "ckpt")},
        rules={"replica_lag_time_max_ms": 10_000},
        stream={"buckets": 4, "max_record_bytes": MAX_RECORD_BYTES},
        output_dir=str(tmp_path / "kafka-out"),
    )
    router = OutputRouter(settings.output_dir, build_redis_sink(settings.redis))
    query = start_query(
        spark,
        kafka_source(spark, settings.kafka),
        settings,
        router,
        once=True,
        name=f"faults_{uuid.uuid4().hex[:8]}",
    )
    try:
        query.awaitTermination(600)
        assert not query.isActive, "the availableNow run ends"
        assert query.exception() is None
        batches = len(query.recentProgress)
    finally:
        query.stop()
    got = read_outputs(tmp_path / "kafka-out")

    assert batches >= 30, "the input was cut into many micro-batches"
    assert transitions(got["alerts"]) == transitions(reference["alerts"])
    reasons = Counter(q["reason"].split(":")[0] for q in got["quarantine"])
    assert sum(reasons.values()) == len(POISON), reasons
    assert not any(q["reason"].startswith("late") for q in got["quarantine"])

    client = redis.Redis.from_url(redis_url)
    keys = Keys(prefix)
    assert int(client.get(keys.quarantine_count())) == len(POISON)
    in_redis = [
        {k.decode(): v.decode() for k, v in fields.items()}
        for _, fields in client.xrange(keys.alerts_stream())
    ]
    pairs = [transition_key(a) for a in in_redis if exactly_once(a)]
    assert len(pairs) == len(set(pairs)), "no transition twice"
    assert sorted(pairs) == sorted(transition_key(a) for a in got["alerts"] if exactly_once(a))
