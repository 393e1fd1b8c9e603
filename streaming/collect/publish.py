"""The metrics topic: kafka-python, acks=all, idempotent, keyed cluster/topic/partition."""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger(__name__)


class PublishError(RuntimeError):
    """The metrics topic did not take the events in time."""


class Fenced(PublishError):
    """Another collector with the same transactional id started: this one must stop publishing."""


def event_key(ev: dict[str, Any]) -> str:
    """docs/events.md: `cluster/topic/partition`, `cluster` alone for broker and heartbeat."""
    if "topic" in ev and "partition" in ev:
        return f"{ev['cluster']}/{ev['topic']}/{ev['partition']}"
    return ev["cluster"]


def encode(ev: dict[str, Any]) -> bytes:
    return json.dumps(ev, separators=(",", ":"), sort_keys=True).encode()


class Publisher:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        options: dict[str, Any] | None = None,
        *,
        timeout_s: float,
        transactional_id: str | None = None,
    ) -> None:  # timeout_s: --publish-timeout-s states its default (collect/cli.py)
        """With a transactional_id each send is one transaction, and starting a producer with the
        same id fences this one (KIP-98): of two collectors of one source, only the newest writes."""
        from kafka import KafkaProducer

        self.topic, self.timeout_s, self.transactional = topic, timeout_s, bool(transactional_id)
        if transactional_id:
            options = {**(options or {}), "transactional_id": transactional_id}
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap.split(","),
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            max_block_ms=int(timeout_s * 1000),
            delivery_timeout_ms=int(timeout_s * 1000) + 1000,
            **(options or {}),
        )
        self.sent = 0
        if self.transactional:
            self.producer.init_transactions()  # fences (and aborts) the previous holder of the id

    def send(self, events: list[dict]) -> None:
        """Send and wait for every acknowledgement; raises PublishError after timeout_s."""
        if not events:
            return
        from kafka.errors import KafkaError, ProducerFencedError

        try:
            if self.transactional:
                self.producer.begin_transaction()
            futures = [
                self.producer.send(self.topic, key=event_key(e).encode(), value=encode(e)) for e in events
            ]
            self.producer.flush(timeout=self.timeout_s)
            for f in futures:
                f.get(timeout=1)
            if self.transactional:
                self.producer.commit_transaction()
        except ProducerFencedError as e:
            raise Fenced(
                f"another collector started with this one's transactional id ({e}); it publishes now"
            ) from e
        except KafkaError as e:
            raise PublishError(
                f"the metrics topic {self.topic!r} did not take {len(events)} "
                f"events within {self.timeout_s:.0f}s: {e}"
            ) from e
        self.sent += len(events)

    def close(self) -> None:
        self.producer.close(timeout=5)
