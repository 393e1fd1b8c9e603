"""Replay a window of events as one Spark batch job, for the actual settings and every what-if
variant in the same pass.

The input (files, or the metrics topic bounded by record timestamps) is read once; every row is
paired with every variant, and `groupBy(variant, bucket).applyInPandas` runs the same rules
engine as the live query (`Bucket`, fed by the live adapter's `events_from_frames`) over all the
events of one bucket in event-time order. Between event-time steps it does what the live query
does between micro-batches (`Bucket.advance`) and samples the series the report plots.
"""

from __future__ import annotations

import bisect
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import Window as SqlWindow
from pyspark.sql import functions as F

from replmon.state.bucket import Bucket
from replmon.state.cluster import fold_batches
from replmon.state.events import TS
from replmon.streaming.parse import monitor_input, parse_events
from replmon.streaming.replay_window import Window
from replmon.streaming.settings import KafkaSource, Settings
from replmon.streaming.sources import kafka_options
from replmon.streaming.stateful import INPUT_COLUMNS, events_from_frames
from replmon.streaming.whatif import Variant

log = logging.getLogger(__name__)
REPLAY_SCHEMA = "variant int, kind string, payload string"
CARRIED = ("metadata", "broker")  # state that lasts: carried into the warm-up
CARRIED_SINCE_METADATA = ("fetch", "append")  # carried when not older than the metadata
SAMPLE_ALL_UP_TO = 64  # partitions per bucket sampled at every step


@dataclass(frozen=True)
class Narrow:
    """Only these clusters / topics / partitions (empty: all). Broker and heartbeat events of a
    selected cluster are always kept: they are the cluster's clock and broker states."""

    clusters: tuple = ()
    topics: tuple = ()
    partitions: tuple = ()


# -- input ------------------------------------------------------------------------------------
def file_lines(spark: SparkSession, path: str) -> DataFrame:
    """A JSON-lines file or a folder of them, as a batch (value, seq). `seq` keeps the order of
    the lines, so events with equal time and type replay in the order they were written."""
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"replmon: input path does not exist: {path}")
    reader = spark.read.format("text")
    if p.is_dir():
        reader = reader.option("recursiveFileLookup", "true")
    df = reader.load(str(p.resolve()))
    return df.select("value", F.monotonically_increasing_id().alias("seq"))


def kafka_lines(spark: SparkSession, conf: KafkaSource, window: Window, slack_ms: int) -> DataFrame:
    """The metrics topic as a batch bounded by record timestamps: from the metadata look-back
    before the warm-up to the end of the read, each widened by `slack_ms` (a record's timestamp
    is when it was produced, its event time may be a little earlier)."""
    opts = {
        k: v
        for k, v in kafka_options(conf).items()
        if k not in ("startingOffsets", "startingTimestamp", "maxOffsetsPerTrigger")
    }
    opts.update(
        {
            "startingTimestamp": str(max(0, window.carry_from_ms - slack_ms)),
            "endingTimestamp": str(window.read_to_ms + slack_ms),
            # a partition with nothing after the start time: read nothing, do not fail
            "startingOffsetsByTimestampStrategy": "latest",
        }
    )
    reader = spark.read.format("kafka")
    for key, value in opts.items():
        reader = reader.option(key, value)
    df = reader.load()
    seq = F.col("partition").cast("long") * F.lit(1 << 40) + F.col("offset")
    return df.select(F.col("value").cast("string").alias("value"), seq.alias("seq"))


def select_events(lines: DataFrame, window: Window, narrow: Narrow) -> DataFrame:
    """Parsed events to replay: those inside the read window, plus what the leader knew when the
    warm-up began, moved to the warm-up start: the last state of each broker and the last
    metadata of each partition from the look-back before it, and, since the leader epoch, ISR
    and assignment that metadata states began, the partition's last append and each follower's
    last fetch. The last two matter in session form (docs/events.md): an idle follower's progress
    is then said only by its session's reads, which count for a partition only after a fetch of
    its own that named the session."""
    parsed = parse_events(lines, seq=F.col("seq"))
    if narrow.clusters:
        parsed = parsed.where(F.col("cluster").isin(*narrow.clusters))
    partitioned = F.col("type").isin("fetch", "append", "metadata")
    if narrow.topics:
        parsed = parsed.where(~partitioned | F.col("topic").isin(*narrow.topics))
    if narrow.partitions:
        parsed = parsed.where(~partitioned | F.col("partition").isin(*narrow.partitions))
    ts = F.col("ts")
    inside = parsed.where(ts.between(window.read_from_ms, window.read_to_ms))
    before = parsed.where(
        F.col("type").isin(*CARRIED, *CARRIED_SINCE_METADATA)
        & ~F.col("malformed")
        & (ts >= window.carry_from_ms)
        & (ts < window.read_from_ms)
    )
    latest = SqlWindow.partitionBy("cluster", "type", "topic", "partition", "broker", "replica").orderBy(
        ts.desc(), F.col("seq").desc()
    )
    last = before.withColumn("_n", F.row_number().over(latest)).where("_n = 1").drop("_n")
    carried = (
        last.join(_partition_state_since(before), ["cluster", "topic", "partition"], "left")
        .where(~F.col("type").isin(*CARRIED_SINCE_METADATA) | (ts >= F.col("_since")))
        .drop("_since")
        .withColumn("ts", F.lit(window.read_from_ms).cast("bigint"))
    )
    return inside.unionByName(carried)


def _partition_state_since(before: DataFrame) -> DataFrame:
    """(cluster, topic, partition, _since): when the leader epoch, ISR and assignment of each
    partition's last metadata before the warm-up began, as far as the look-back shows. A fetch
    or an append older than that belongs to an earlier leader or ISR (an election, a shrink);
    the same metadata said again (a collector's restart) does not make it older."""
    metadata = before.where(F.col("type") == "metadata")
    said = F.struct("leader_epoch", "isr", "replicas")
    in_time = SqlWindow.partitionBy("cluster", "topic", "partition").orderBy("ts", "seq")
    changed = F.lag(said).over(in_time).isNull() | (F.lag(said).over(in_time) != said)
    return (
        metadata.withColumn("_changed", changed)
        .where("_changed")
        .groupBy("cluster", "topic", "partition")
        .agg(F.max("ts").alias("_since"))
    )


def newest_event_ms(lines: DataFrame) -> int:
    """The newest event time in the input (for --last without --to)."""
    row = parse_events(lines).where(~F.col("malformed")).agg(F.max("ts")).first()
    if row is None or row[0] is None:
        raise SystemExit("replmon replay: the input has no event with a time")
    return int(row[0])


# -- the job ----------------------------------------------------------------------------------
def replay_rows(events: DataFrame, settings: Settings, window: Window, variants: list[Variant]) -> DataFrame:
    stream = settings.stream
    spark = events.sparkSession
    rows = monitor_input(events, stream.buckets, stream.max_future_ms).select("bucket", *INPUT_COLUMNS)
    ids = spark.createDataFrame([(v.variant_id,) for v in variants], "variant int")
    func = make_replay_func(variants, window, stream.buckets)
    return rows.crossJoin(F.broadcast(ids)).groupBy("variant", "bucket").applyInPandas(func, REPLAY_SCHEMA)


def make_replay_func(variants: list[Variant], window: Window, buckets: int):
    by_id = {v.variant_id: v for v in variants}

    def func(key, pdf):  # (no type hints: applyInPandas would try to infer an eval type from them)
        variant = by_id[int(key[0])]
        bucket_id = int(key[1])
        quarantine: list = []
        events = events_from_frames([pdf[INPUT_COLUMNS]], quarantine, ignore=variant.ignore_event_fields)
        out = run_bucket(events, variant, window, Bucket(bucket_id, buckets), sample=variant.variant_id == 0)
        out["quarantine"] = quarantine + out["quarantine"] if variant.variant_id == 0 else []
        kinds, payloads = [], []
        for kind, records in out.items():
            kinds += [kind] * len(records)
            payloads += [json.dumps(r, separators=(",", ":")) for r in records]
        return pd.DataFrame(
            {
                "variant": pd.Series([variant.variant_id] * len(kinds), dtype="int32"),
                "kind": pd.Series(kinds, dtype=object),
                "payload": pd.Series(payloads, dtype=object),
            }
        )

    return func


def run_bucket(
    events: list[tuple[Any, ...]], variant: Variant, window: Window, bucket: Bucket, *, sample: bool
) -> dict[str, list[Any]]:
    """Feed one bucket's events through the engine in event-time steps; return its alert
    transitions, ISR exits and (when `sample`) the plotted series, as lists of dicts."""
    cfg = variant.config
    step = window.sample_ms(cfg.status_interval_ms, cfg.flap_window_ms)
    out: dict[str, list[Any]] = {  # alert records (state/alerts.py) and plain ones
        "alerts": [],
        "isr_exit": [],
        "replica_lag": [],
        "partition": [],
        "urp": [],
        "quarantine": [],
        "activity": [],
    }
    seen_exits: set = set()
    times = [e[TS] for e in events]
    i = 0
    boundary = (window.read_from_ms // step + 1) * step
    last = window.read_to_ms
    while True:
        j = bisect.bisect_left(times, boundary, lo=i)
        bucket.process(events[i:j], cfg, out["alerts"], out["quarantine"])
        bucket.advance(cfg, out["alerts"])
        out["activity"] += bucket.activity_reports()
        _record_exits(bucket, seen_exits, out["isr_exit"])
        if sample and window.start_ms - step <= boundary <= window.end_ms + step:
            _sample(bucket, boundary, cfg, out)
        i = j
        if i >= len(events) and boundary > last:
            break
        boundary += step
    return out


def _record_exits(bucket: Bucket, seen: set, out: list[dict[str, Any]]) -> None:
    """ISR exits since the last step, from the engine's flap bookkeeping (exit times per
    replica, kept for the flap window)."""
    for (cluster, topic, partition), watch in bucket.partitions.items():
        for replica, times in watch.exits.items():
            for t in times:
                key = (cluster, topic, partition, replica, t)
                if key not in seen:
                    seen.add(key)
                    out.append(
                        {
                            "cluster": cluster,
                            "topic": topic,
                            "partition": partition,
                            "replica": replica,
                            "ts": t,
                        }
                    )


def _sample(bucket: Bucket, at_ms: int, cfg, out: dict[str, list[dict[str, Any]]]) -> None:
    under = 0
    few = len(bucket.partitions) <= SAMPLE_ALL_UP_TO
    for watch in bucket.partitions.values():
        p = watch.leader
        if p.under_replicated:
            under += 1
        if not (few or watch.book.open):
            continue
        base = {"cluster": watch.cluster, "topic": watch.topic, "partition": watch.partition, "ts": at_ms}
        out["partition"].append(
            {
                **base,
                "isr": len(p.isr),
                "replicas": len(p.replicas),
                "hw": p.hw,
                "leader_leo": p.leader_leo,
                "under_replicated": p.under_replicated,
            }
        )
        for r in watch.replica_statuses(bucket.clusters[watch.cluster].config(cfg)):
            out["replica_lag"].append(
                {
                    **base,
                    "replica": r["replica"],
                    "lag_ms": r["lag_ms"] if r["last_caught_up_ms"] else None,
                    "lag_messages": r["lag_messages"],
                    "in_isr": r["in_isr"],
                    "limit_ms": p.config.replica_lag_time_max_ms,
                }
            )
    if bucket.partitions:
        out["urp"].append({"ts": at_ms, "under_replicated": under, "partitions": len(bucket.partitions)})


# -- results ----------------------------------------------------------------------------------
@dataclass
class ReplayResult:
    window: Window
    variants: list
    events: int = 0  # rows read for the window (one pass)
    records: dict = field(default_factory=dict)  # (variant_id, kind) -> list of dicts

    def of(self, variant_id: int, kind: str) -> list:
        return self.records.get((variant_id, kind), [])


def collect(rows: DataFrame, window: Window, variants: list[Variant], events: int) -> ReplayResult:
    """Run the job (one collect) and group its records by variant and kind."""
    result = ReplayResult(window, variants, events)
    for variant_id, kind, payload in rows.collect():
        result.records.setdefault((variant_id, kind), []).append(json.loads(payload))
    for v in variants:  # cluster-wide reasoning over every bucket's output, as the live query does
        alerts = result.records.pop((v.variant_id, "alerts"), [])
        activity = result.records.pop((v.variant_id, "activity"), [])
        alerts.sort(key=lambda r: (r.get("ts") or 0, json.dumps(r, sort_keys=True)))
        decided = fold_batches([(alerts, activity)], v.config)
        if decided:
            result.records[(v.variant_id, "alerts")] = decided
    for records in result.records.values():
        records.sort(key=lambda r: (r.get("ts") or 0, json.dumps(r, sort_keys=True)))
    return result
