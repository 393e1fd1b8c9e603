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
        self, bootstrap: str, topic: str, options: dict[str, Any] | None = None, *, timeout_s: float
    ) -> None:  # timeout_s: --publish-timeout-s states its default (collect/cli.py)
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        self.topic, self.timeout_s = topic, timeout_s
        try:
            self.producer = KafkaProducer(
                bootstrap_servers=bootstrap.split(","),
                acks="all",
                enable_idempotence=True,
                linger_ms=LINGER_MS,
                **producer_timeouts(timeout_s),
                **(options or {}),
            )
        except KafkaError as e:
            raise PublishError(
                f"the metrics cluster {bootstrap} did not answer within {timeout_s:g}s: {e}"
            ) from e
        self.sent = 0
        self.stalled_since: float | None = None  # monotonic time the current stall began

    def send(self, events: list[dict]) -> None:
        """Send and wait for every acknowledgement; raises PublishError after timeout_s."""
        if not events:
            return
        from kafka.errors import KafkaError, KafkaTimeoutError

        started = time.monotonic()
        try:
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
        except KafkaError as e:
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
