"""Why the cluster step is a fold on the driver (docs/design.md item 7): Spark refuses a second
stateful operator keyed by cluster after the bucket operator in one query. Should a Spark
version accept it, this test fails, and the choice is worth measuring again
(bench/cluster_operator.py)."""

from __future__ import annotations

import uuid

import pandas as pd
import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from replmon.streaming.query import monitor_outputs
from replmon.streaming.settings import Settings
from replmon.streaming.sources import file_source
from tests.streaming.helpers import write_events

pytestmark = pytest.mark.spark

T0 = 1_767_225_600_000


def cluster_func(key, frames, state):
    """Never called: the query is refused before it runs."""
    yield pd.DataFrame({"kind": [], "payload": []})


def test_spark_refuses_a_stateful_operator_by_cluster_after_the_buckets(spark, tmp_path):
    source_dir = write_events(tmp_path / "in", [{"type": "heartbeat", "ts": T0, "cluster": "c1"}])
    settings = Settings(input_path=str(source_dir), output_dir=str(tmp_path / "out"))
    buckets = monitor_outputs(file_source(spark, str(source_dir)), settings, partitions=2)
    # the buckets' alerts and activity, to one group per cluster, with the bucket operator's
    # output mode and timeout
    by_cluster = (
        buckets.where(F.col("kind").isin("alerts", "activity"))
        .withColumn("cluster", F.get_json_object("payload", "$.cluster"))
        .groupBy("cluster")
        .applyInPandasWithState(
            cluster_func, "kind string, payload string", "doc string", "append", "EventTimeTimeout"
        )
    )
    writer = (
        by_cluster.writeStream.queryName(f"test_chain_{uuid.uuid4().hex[:8]}")
        .outputMode("append")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .foreachBatch(lambda batch_df, batch_id: None)
        .trigger(availableNow=True)
    )
    with pytest.raises(AnalysisException) as refused:
        writer.start().stop()
    assert "Multiple applyInPandasWithStates are not supported" in str(refused.value)
