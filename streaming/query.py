"""The streaming query: source -> parse/validate -> watermark -> stateful buckets -> outputs."""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from replmon.streaming.checkpoint import bucket_keys, buckets_per_task
from replmon.streaming.parse import monitor_input, parse_events
from replmon.streaming.settings import Settings
from replmon.streaming.stateful import INPUT_COLUMNS, OUTPUT_SCHEMA, STATE_SCHEMA, make_state_func

log = logging.getLogger(__name__)


def monitor_outputs(
    source: DataFrame,
    settings: Settings,
    keys: list[int] | None = None,
    state_func=None,
    partitions: int | None = None,
) -> DataFrame:
    """All outputs as (kind, payload) rows: alerts, statuses, and quarantine from both the
    parse stage and the stateful stage (one pass over the source). `keys`: each bucket's
    grouping key (streaming/checkpoint.bucket_keys), None for the bucket number itself.
    `state_func`: another function for the stateful step (bench/throughput.py's floor).
    `partitions`: the session's shuffle partitions (default: the settings')."""
    stream = settings.stream
    parsed = parse_events(source, seq=F.col("seq"), max_record_bytes=stream.max_record_bytes)
    rows = (
        monitor_input(parsed, stream.buckets, stream.max_future_ms, keys)
        .withWatermark("event_time", f"{stream.watermark_delay_ms} milliseconds")
        .select("bucket", "event_time", *INPUT_COLUMNS)
    )
    # a Python worker runs one task at a time: it keeps the decoded buckets of one task at most
    kept = buckets_per_task(
        keys if keys is not None else list(range(stream.buckets)),
        partitions or settings.spark.shuffle_partitions,
    )
    func = state_func or make_state_func(
        settings.monitor_config(), stream.buckets, profile_dir=stream.profile_dir, keys=keys, kept=kept
    )
    return rows.groupBy("bucket").applyInPandasWithState(
        func, OUTPUT_SCHEMA, STATE_SCHEMA, "append", "EventTimeTimeout"
    )


def start_query(
    spark: SparkSession, source: DataFrame, settings: Settings, on_batch, *, once: bool, name: str = "replmon"
) -> StreamingQuery:
    """Start the query; `on_batch(batch_df, batch_id)` receives every micro-batch. Buckets are
    keyed as the checkpoint records (a new checkpoint: spread evenly over the shuffle
    partitions; streaming/checkpoint.py)."""
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 200)  # 200: Spark's default
    keys = bucket_keys(settings.checkpoint_dir, settings.stream.buckets, partitions)
    writer = (
        monitor_outputs(source, settings, keys, partitions=partitions)
        .writeStream.queryName(name)
        .outputMode("append")
        .option("checkpointLocation", settings.checkpoint_dir)
        .foreachBatch(on_batch)
    )
    if once:
        writer = writer.trigger(availableNow=True)
    elif settings.spark.trigger_interval:
        writer = writer.trigger(processingTime=settings.spark.trigger_interval)
    query = writer.start()
    log.info("query %s started (checkpoint %s)", name, settings.checkpoint_dir)
    return query
