"""The restart gate's key (docs/redis.md): one hash per broker, replaced only by a newer clock."""

from __future__ import annotations

import json

from replmon.sinks.keys import Keys
from replmon.sinks.redis_sink import RedisSink
from tests.sinks import records as r


def test_a_verdict_is_written_and_an_older_one_never_replaces_it(redis_client):
    sink = RedisSink(redis_client)
    key = Keys().restart_gate("c1", 3)
    assert key == "replmon:restart-gate:c1:3"
    report = sink.write_batch(2, [], [], [], [], verdicts=[r.verdict(clock_ms=2_000, answer="safe")])
    assert report.verdicts_written == 1
    stored = {k.decode(): v.decode() for k, v in redis_client.hgetall(key).items()}
    assert stored["verdict"] == "safe" and stored["clock_ms"] == "2000" and stored["broker"] == "3"
    assert json.loads(stored["reasons"])["under_min_isr"]["examples"] == ["orders-0"]
    # a replayed older batch: the newer verdict stays
    report = sink.write_batch(1, [], [], [], [], verdicts=[r.verdict(clock_ms=1_000, answer="not_safe")])
    assert report.verdicts_written == 0
    assert redis_client.hget(key, "verdict") == b"safe"
    sink.write_batch(3, [], [], [], [], verdicts=[r.verdict(clock_ms=3_000, answer="not_safe")])
    assert redis_client.hget(key, "verdict") == b"not_safe"
