"""The publish timeout: any positive --publish-timeout starts, and an unreachable metrics
cluster is a PublishError (exit 3, one line) within it, not a kafka-python traceback."""

from __future__ import annotations

import socket
import time

import pytest

from replmon.streaming.collect.publish import Publisher, PublishError


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


@pytest.mark.parametrize("timeout_s", [0.5, 3, 45])
def test_a_publish_timeout_below_kafka_pythons_request_timeout_starts(timeout_s):
    # kafka-python refused delivery_timeout_ms < linger_ms + request_timeout_ms (30 s by
    # default): a timeout below ~29 s was a KafkaConfigurationError traceback at start.
    started = time.monotonic()
    with pytest.raises(PublishError, match="did not answer within"):
        Publisher(f"127.0.0.1:{closed_port()}", "t", timeout_s=min(timeout_s, 3))
    assert time.monotonic() - started < 3 + 10
    from kafka.producer.record_accumulator import RecordAccumulator

    from replmon.streaming.collect.publish import LINGER_MS, producer_timeouts

    RecordAccumulator(linger_ms=LINGER_MS, **producer_timeouts(timeout_s))  # its own check passes
