"""The metrics topic: kafka-python, acks=all, idempotent, keyed cluster/topic/partition.

`--publish-timeout-s` bounds every wait on the metrics cluster: reaching it at start, a send
blocked on metadata, and the acknowledgements of one step. A wait longer than a few seconds
is logged when it starts and when the topic takes events again; past the timeout the step
fails with PublishError (`replmon collect` exits 3, its checkpoint still before the step).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from replmon.state.events import record_key

log = logging.getLogger(__name__)
LINGER_MS = 5
STALL_S = 5.0  # a step unacknowledged this long (or half the timeout, if less) is logged


class PublishError(RuntimeError):
    """The metrics topic did not take the events in time."""


class Fenced(PublishError):
    """Another collector with the same transactional id started: this one must stop publishing."""


def encode(ev: dict[str, Any]) -> bytes:
    return json.dumps(ev, separators=(",", ":"), sort_keys=True).encode()


def producer_timeouts(timeout_s: float) -> dict[str, int]:
    """kafka-python's timeouts for one publish timeout. It refuses a delivery timeout below
    linger + request timeout, and its request timeout defaults to 30 s: a produce request
    waits at most the publish timeout, and a record is given up just after it."""
    timeout_ms = max(1, round(timeout_s * 1000))
    request_ms = min(30_000, timeout_ms)
    return {
        "max_block_ms": timeout_ms,
        "request_timeout_ms": request_ms,
        "delivery_timeout_ms": timeout_ms + LINGER_MS + 1000,
        "bootstrap_timeout_ms": timeout_ms,
    }


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
        from kafka.errors import KafkaError

        self.topic, self.timeout_s, self.transactional = topic, timeout_s, bool(transactional_id)
        self._bootstrap, self._options, self._transactional_id = bootstrap, options or {}, transactional_id
        if transactional_id:
            options = {**(options or {}), "transactional_id": transactional_id}
        try:
            self.producer = KafkaProducer(
                bootstrap_servers=bootstrap.split(","),
                acks="all",
                enable_idempotence=True,
                linger_ms=LINGER_MS,
                # the cluster's own settings (its startup timeout as bootstrap_timeout_ms, its
                # security) over the timeouts derived from --publish-timeout-s
                **{**producer_timeouts(timeout_s), **(options or {})},
            )
        except KafkaError as e:
            raise PublishError(
                f"the metrics cluster {bootstrap} did not answer within {timeout_s:g}s: {e}"
            ) from e
        self.sent = 0
        self.stalled_since: float | None = None  # monotonic time the current stall began
        self._epoch: tuple[int, int] | None = None
        if self.transactional:
            self.producer.init_transactions()  # fences (and aborts) the previous holder of the id
            self._epoch = self._producer_epoch()

    def send(self, events: list[dict]) -> None:
        """Send and wait for every acknowledgement; raises PublishError after timeout_s."""
        if not events:
            return
        from kafka.errors import KafkaError, KafkaTimeoutError, ProducerFencedError

        started = time.monotonic()
        try:
            if self.transactional:
                self.producer.begin_transaction()
            futures = [
                self.producer.send(self.topic, key=record_key(e).encode(), value=encode(e)) for e in events
            ]
            while True:
                left = self.timeout_s - (time.monotonic() - started)
                try:
                    self.producer.flush(timeout=max(0.0, min(left, STALL_S, self.timeout_s / 2)))
                    break
                except KafkaTimeoutError:
                    if left <= 0:
                        raise
                    self._stalled(started)
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
                f"events within {self.timeout_s:g}s: {e}"
            ) from e
        self.sent += len(events)
        if self.stalled_since is not None:
            log.warning(
                "the metrics topic %r takes events again, after %.1f s",
                self.topic,
                time.monotonic() - self.stalled_since,
            )
            self.stalled_since = None

    def _stalled(self, started: float) -> None:
        if self.stalled_since is None:
            self.stalled_since = started
            log.warning(
                "the metrics topic %r has acknowledged nothing for %.1f s; waiting up to "
                "--publish-timeout-s %gs",
                self.topic,
                time.monotonic() - started,
                self.timeout_s,
            )

    def close(self, abandon: bool = False) -> None:
        """Close the producer. abandon: the events not acknowledged are given up (their lines
        are after the checkpoint, a restart publishes them) instead of waited for."""
        from kafka.errors import KafkaError

        if abandon:
            # kafka-python's close() flushes first and raises when that times out, and its
            # __del__ would try again at exit: force the sender closed, which fails what waits.
            sender = getattr(self.producer, "_sender", None)
            if sender is not None:
                sender.force_close()
        try:
            self.producer.close(timeout=5)
        except KafkaError as e:
            log.warning("the metrics producer closed with events not acknowledged (%s)", e)

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
