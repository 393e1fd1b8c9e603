"""The metrics topic: kafka-python, acks=all, idempotent, keyed cluster/topic/partition."""

from __future__ import annotations

import json
import logging
import time
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
        self._bootstrap, self._options, self._transactional_id = bootstrap, options or {}, transactional_id
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
        self._epoch: tuple[int, int] | None = None
        if self.transactional:
            self.producer.init_transactions()  # fences (and aborts) the previous holder of the id
            self._epoch = self._producer_epoch()

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
                self._epoch = self._producer_epoch()
        except KafkaError as e:
            if isinstance(e, ProducerFencedError) or (self.transactional and self._fenced()):
                raise Fenced(
                    f"another collector started with this one's transactional id "
                    f"{self._transactional_id!r} ({e}); it publishes now"
                ) from e
            raise PublishError(
                f"the metrics topic {self.topic!r} did not take {len(events)} "
                f"events within {self.timeout_s:.0f}s: {e}"
            ) from e
        self.sent += len(events)

    def _producer_epoch(self) -> tuple[int, int]:
        # kafka-python keeps the producer's id and epoch only on its transaction manager
        pe = self.producer._transaction_manager.producer_id_and_epoch
        return pe.producer_id, pe.epoch

    def _fenced(self, wait_s: float = 10.0) -> bool:
        """Has another producer taken this transactional id? A fence that meets this producer's
        commit can come back as an unknown server error (Kafka 4.3.1's coordinator: "transition
        to ONGOING while it already a pending state PREPARE_EPOCH_FENCE"), so ask the coordinator
        for the id's producer epoch, for up to wait_s while the fence completes. Unanswered (the
        metrics cluster is down), it is no fence."""
        from kafka.admin import KafkaAdminClient

        admin = None
        deadline = time.monotonic() + wait_s
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=self._bootstrap.split(","),
                request_timeout_ms=5000,
                **{k: v for k, v in self._options.items() if k in KafkaAdminClient.DEFAULT_CONFIG},
            )
            while True:
                now = admin.describe_transactions([self._transactional_id])[self._transactional_id]
                if (now.producer_id, now.producer_epoch) != self._epoch:
                    return True
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.5)
        except Exception as e:  # noqa: BLE001 - no answer is no evidence of a fence
            log.warning("cannot ask whether %s was fenced (%s)", self._transactional_id, e)
            return False
        finally:
            if admin is not None:
                admin.close()

    def close(self) -> None:
        self.producer.close(timeout=5)
