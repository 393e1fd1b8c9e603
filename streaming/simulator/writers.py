"""Where simulated events go: JSON-lines files, or a Kafka topic through a producer handed in.

Events are dicts (from the model) or ready JSON lines (from `scale`); both are accepted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from replmon.state.events import record_key

from .events import Event, encode

if TYPE_CHECKING:
    from kafka import KafkaProducer

log = logging.getLogger(__name__)

EVENTS_FILE = Path("events") / "part-00000.jsonl"
TRUTH_FILE = Path("truth.jsonl")


class Producer(Protocol):
    """The part of kafka-python's KafkaProducer used here (a fake that records sends will do)."""

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None) -> Any: ...
    def flush(self, timeout: float | None = None) -> None: ...


def _line_and_key(event: Event | str) -> tuple[str, str]:
    if isinstance(event, str):
        return event, record_key(json.loads(event))
    return encode(event), record_key(event)


def write_events(out_dir: Path, events: Iterable[Event | str]) -> int:
    """Write DIR/events/part-00000.jsonl (the events come in ts order); returns the count."""
    path = out_dir / EVENTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as f:
        chunk: list[str] = []
        for event in events:
            chunk.append(event if isinstance(event, str) else encode(event))
            if len(chunk) == 10_000:
                f.write("\n".join(chunk) + "\n")
                count += len(chunk)
                chunk = []
        if chunk:
            f.write("\n".join(chunk) + "\n")
            count += len(chunk)
    log.info("wrote %d events to %s", count, path)
    return count


def write_truth(out_dir: Path, records: Iterable[dict]) -> int:
    path = out_dir / TRUTH_FILE
    out_dir.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, separators=(",", ":")))
            f.write("\n")
            count += 1
    log.info("wrote %d truth records to %s", count, path)
    return count


def publish(events: Iterable[Event | str], producer: Producer, topic: str) -> int:
    """Send every event to `topic` (key `cluster/topic/partition`, or `cluster`; value the JSON),
    then flush."""
    count = 0
    for event in events:
        line, key = _line_and_key(event)
        producer.send(topic, value=line.encode("utf-8"), key=key.encode("utf-8"))
        count += 1
    producer.flush()
    log.info("sent %d events to topic %s", count, topic)
    return count


def kafka_producer(bootstrap: str, **settings: Any) -> KafkaProducer:
    """A kafka-python producer with acks=all (settings override the defaults)."""
    from kafka import KafkaProducer

    config = {"acks": "all", "linger_ms": 20, "batch_size": 256 * 1024, "compression_type": None}
    config.update(settings)
    return KafkaProducer(bootstrap_servers=bootstrap, **config)


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1) -> bool:
    """Create the events topic with the admin client; False if it already exists."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="replmon-simulate")
    try:
        admin.create_topics(
            {topic: {"num_partitions": partitions, "replication_factor": replication_factor}},
            wait_for_metadata=True,
        )
        log.info("created topic %s (%d partitions, RF %d)", topic, partitions, replication_factor)
        return True
    except TopicAlreadyExistsError:
        log.info("topic %s already exists", topic)
        return False
    finally:
        admin.close()
