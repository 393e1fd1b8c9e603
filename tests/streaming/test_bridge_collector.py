"""The driver handles a micro-batch with the cyclic garbage collector paused
(streaming/stateful.collector_paused), and leaves it as it found it, also when the batch fails."""

from __future__ import annotations

import gc
import json

import pyarrow as pa
import pytest

from replmon.streaming.bridge import OutputRouter


class Batch:
    def __init__(self, rows, fail: bool = False):
        self.rows, self.fail = rows, fail

    def toArrow(self):
        if self.fail:
            raise RuntimeError("the Spark job failed")
        kinds, payloads = zip(*self.rows, strict=True) if self.rows else ((), ())
        return pa.table({"kind": pa.array(kinds, pa.string()), "payload": pa.array(payloads, pa.string())})


class Sink:
    def __init__(self):
        self.collector_on = []

    def write_batch(self, batch_id, alerts, partition_status, replica_status, quarantine, **_):
        self.collector_on.append(gc.isenabled())


POINT = {"cluster": "c1", "topic": "t", "partition": 0, "replica": None, "ts": 1000, "hw": 5}


@pytest.mark.parametrize("enabled", [True, False])
def test_a_batch_runs_with_the_collector_paused_and_leaves_it_as_it_was(enabled):
    sink = Sink()
    router = OutputRouter(None, sink)
    (gc.enable if enabled else gc.disable)()
    try:
        router(Batch([("series_point", json.dumps(POINT))]), 0)
        assert sink.collector_on == [False]
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError, match="the Spark job failed"):
            router(Batch([], fail=True), 1)
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
