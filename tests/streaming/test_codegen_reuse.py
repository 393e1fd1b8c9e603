"""Spark compiles the monitor query's code once, not in every micro-batch: a batch that compiles
the parse stage anew pays Janino and the JIT again (streaming/parse.py wall_clock_ms)."""

from __future__ import annotations

import json
from itertools import pairwise

from replmon.streaming.query import monitor_outputs
from replmon.streaming.settings import Settings
from replmon.streaming.sources import file_source

T = 1_767_225_600_000
BATCHES = 5


def _read_only(key, frames, state):
    for frame in frames:
        len(frame)
    state.update((b"x",))
    yield from ()


def compilations_per_batch(spark, tmp_path) -> list[int]:
    src = tmp_path / "in"
    src.mkdir()
    for b in range(BATCHES):
        lines = [
            {
                "type": "fetch",
                "ts": T + b * 1000 + i,
                "cluster": "c",
                "topic": "t",
                "partition": i % 4,
                "replica": 2,
                "leader": 1,
                "leader_epoch": 1,
                "fetch_offset": i,
                "leader_leo": i,
            }
            for i in range(20)
        ]
        (src / f"{b:03}.json").write_text("".join(json.dumps(x) + "\n" for x in lines))
    settings = Settings(spark={"checkpoint_dir": str(tmp_path / "ckpt")})
    metric = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    counts: list[int] = []
    query = (
        monitor_outputs(file_source(spark, str(src), 1), settings, state_func=_read_only)
        .writeStream.option("checkpointLocation", str(tmp_path / "ckpt"))
        .foreachBatch(lambda df, _: (df.toArrow(), counts.append(metric.getCount())))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None
    return [b - a for a, b in pairwise(counts)]


def test_later_batches_compile_next_to_nothing(spark, tmp_path):
    # one data batch per file, then the no-data batch that ends an availableNow run: the
    # compilations each data batch after the first one added (with the parse stage compiled per
    # batch, 2-3 each)
    per_batch = compilations_per_batch(spark, tmp_path)[: BATCHES - 1]
    assert len(per_batch) == BATCHES - 1
    assert sum(per_batch) < len(per_batch), per_batch
