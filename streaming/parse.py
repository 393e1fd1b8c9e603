"""Parse events (docs/events.md) in Spark SQL and route them to buckets.

The JVM side does only what must happen before the shuffle: one typed `from_json` (a record
that is not JSON, or has a field of the wrong JSON type, comes back flagged in
`_corrupt_record`), the bucket, and the event time for the watermark. The contract checks
(required fields, signs, known type and state) run vectorised on the Python side
(streaming/validate.py): as one large SQL expression referenced by several columns, they made
the optimiser inline it again and again and run out of memory planning each micro-batch.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from replmon.streaming.contract import ARRAY_FIELDS, BROADCAST, FIELDS, PARTITIONED

_SQL_TYPE = {"int": "bigint", "str": "string", "ints": "array<bigint>"}
_TYPED_SCHEMA = ", ".join(f"`{n}` {_SQL_TYPE[k]}" for n, k in FIELDS.items()) + \
    ", `_corrupt_record` string"
_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"}


def parse_events(lines: DataFrame, *, seq: Column | None = None) -> DataFrame:
    """`lines` has a string column `value`. Returns `raw`, `seq`, `malformed` and the typed
    fields of the contract (null where absent)."""
    return (lines.select(
        F.col("value").alias("raw"),
        (seq if seq is not None else F.lit(0).cast("long")).alias("seq"),
        F.from_json("value", _TYPED_SCHEMA, _OPTIONS).alias("j"))
        .select("raw", "seq", F.col("j._corrupt_record").isNotNull().alias("malformed"),
                *[F.col(f"j.{n}").alias(n) for n in FIELDS]))


def monitor_input(parsed: DataFrame, buckets: int, max_future_ms: int) -> DataFrame:
    """Rows for the stateful step, with their bucket and event time.

    A partition's events go to one bucket; broker and heartbeat events concern the whole
    cluster and go to every bucket. Anything else (malformed records, unknown types) is hashed
    to one bucket and quarantined there. Only well-formed events whose time is not beyond
    `max_future_ms` from the wall clock get an event time, so a bad record can never move the
    watermark.
    """
    ok = ~F.col("malformed")
    broadcast = ok & F.col("type").isin(*BROADCAST) & F.col("cluster").isNotNull()
    every = F.sequence(F.lit(0).cast("bigint"), F.lit(buckets - 1).cast("bigint"))
    one = F.array(F.pmod(F.xxhash64("cluster", "topic", "partition", "type"), F.lit(buckets)))
    one = F.when(F.col("type").isin(*PARTITIONED),
                 F.array(F.pmod(F.xxhash64("cluster", "topic", "partition"), F.lit(buckets))))\
        .otherwise(one)
    in_time = F.col("ts") <= F.unix_millis(F.current_timestamp()) + F.lit(max_future_ms)
    # Array columns cross into pandas two orders of magnitude slower than strings (measured:
    # 500k rows with them 150 s, without 7 s), so they travel as "1,2,3".
    for name in ARRAY_FIELDS:
        parsed = parsed.withColumn(name, F.array_join(F.col(name).cast("array<string>"), ","))
    return (parsed
            .withColumn("bucket", F.explode(F.when(broadcast, every).otherwise(one)))
            .withColumn("bucket", F.col("bucket").cast("int"))
            .withColumn("event_time", F.when(ok & in_time, F.timestamp_millis(F.col("ts")))))
