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


# Spark tells a stop from a failure of a Python foreachBatch by matching the error's text with
# "py4j.protocol.Py4JJavaError: An error occurred while calling((.|\r\n|\r|\n)*)(<names>)"
# (StreamExecution.PROXY_ERROR). java.util.regex runs that group recursively, a few frames per
# character: on a long text (a Spark job's stack trace, tens of kB) the stream thread dies of
# StackOverflowError, neither stopped nor failed, and nothing restarts it. So what reaches Spark
# from foreachBatch is short; the whole error goes to the log.
PROXY_PREFIX = "Py4JJavaError: An error occurred while calling"
INTERRUPTIONS = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)
# a Spark job the stop cancelled says so instead (its batch's toArrow fails with it)
CANCELLATIONS = ("[SPARK_JOB_CANCELLED]", "cancelled because SparkContext was shut down")
MAX_ERROR_CHARS = 1000


class BatchFailed(RuntimeError):
    """A micro-batch's outputs failed: the short text Spark gets (the whole error is logged)."""


def short_error(exc: BaseException, batch_id: int) -> BatchFailed:
    """What foreachBatch raises to Spark for `exc`: a stop (an interruption anywhere in its text)
    keeps the form Spark recognises as one; any other failure keeps its last error line and a
    state-format refusal's marker (the supervisor's `fatal` looks for it), without the form."""
    from replmon.state.codec import StateFormatError

    text = str(exc)
    interrupted = next((name for name in INTERRUPTIONS if name in text), None)
    if interrupted is None and any(mark in text for mark in CANCELLATIONS):
        interrupted = INTERRUPTIONS[0]  # Spark counts it a stop only if a stop was asked for
    if interrupted is not None:
        said = f"py4j.protocol.{PROXY_PREFIX} foreachBatch.\n: {interrupted}"
        return BatchFailed(f"batch {batch_id} interrupted: {said}")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    marks = ("Error:", "Exception:", "Unavailable:")
    said = next(
        (line for line in reversed(lines) if any(m in line for m in marks)), lines[0] if lines else ""
    )
    parts = [f"batch {batch_id} failed: {type(exc).__name__}: {said[: MAX_ERROR_CHARS // 2]}"]
    at = text.find(StateFormatError.MARKER)
    if at >= 0 and StateFormatError.MARKER not in parts[0]:
        parts.append(text[at:].split("\n", 1)[0][: MAX_ERROR_CHARS // 2])
    return BatchFailed("\n".join(parts).replace(PROXY_PREFIX, "Py4JJavaError calling")[:MAX_ERROR_CHARS])


def guarded(on_batch):
    """`on_batch` as foreachBatch gets it: an error reaches Spark as `short_error`, in full in
    the log."""

    def run(batch_df, batch_id: int) -> None:
        try:
            on_batch(batch_df, batch_id)
        except Exception as exc:
            short = short_error(exc, batch_id)
            if "interrupted:" not in str(short):
                log.error("batch %d failed", batch_id, exc_info=exc)
            raise short from None

    return run


def start_query(
    spark: SparkSession,
    source: DataFrame,
    settings: Settings,
    on_batch,
    *,
    once: bool,
    name: str = "replmon",
    state_func=None,
) -> StreamingQuery:
    """Start the query; `on_batch(batch_df, batch_id)` receives every micro-batch. Buckets are
    keyed as the checkpoint records (a new checkpoint: spread evenly over the shuffle
    partitions; streaming/checkpoint.py). `state_func`: another stateful step (monitor_outputs;
    bench/realtime.py --floor)."""
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 200)  # 200: Spark's default
    keys = bucket_keys(settings.checkpoint_dir, settings.stream.buckets, partitions)
    writer = (
        monitor_outputs(source, settings, keys, state_func=state_func, partitions=partitions)
        .writeStream.queryName(name)
        .outputMode("append")
        .option("checkpointLocation", settings.checkpoint_dir)
        .foreachBatch(guarded(on_batch))
    )
    if once:
        writer = writer.trigger(availableNow=True)
    elif settings.spark.trigger_interval:
        writer = writer.trigger(processingTime=settings.spark.trigger_interval)
    query = writer.start()
    log.info("query %s started (checkpoint %s)", name, settings.checkpoint_dir)
    return query
