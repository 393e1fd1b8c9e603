"""The metrics topic: kafka-python, acks=all, idempotent, keyed cluster/topic/partition."""

from __future__ import annotations

import json
import logging
from typing import Any

from replmon.state.events import record_key

log = logging.getLogger(__name__)


class PublishError(RuntimeError):
    """The metrics topic did not take the events in time."""


def encode(ev: dict[str, Any]) -> bytes:
    return json.dumps(ev, separators=(",", ":"), sort_keys=True).encode()


class Publisher:
    def __init__(
        self, bootstrap: str, topic: str, options: dict[str, Any] | None = None, *, timeout_s: float
    ) -> None:  # timeout_s: --publish-timeout-s states its default (collect/cli.py)
        from kafka import KafkaProducer

        self.topic, self.timeout_s = topic, timeout_s
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

    def send(self, events: list[dict]) -> None:
        """Send and wait for every acknowledgement; raises PublishError after timeout_s."""
        if not events:
            return
        from kafka.errors import KafkaError

        try:
            futures = [
                self.producer.send(self.topic, key=record_key(e).encode(), value=encode(e)) for e in events
            ]
            self.producer.flush(timeout=self.timeout_s)
            for f in futures:
                f.get(timeout=1)
        except KafkaError as e:
            raise PublishError(
                f"the metrics topic {self.topic!r} did not take {len(events)} "
                f"events within {self.timeout_s:.0f}s: {e}"
            ) from e
        self.sent += len(events)

    def close(self) -> None:
        self.producer.close(timeout=5)
