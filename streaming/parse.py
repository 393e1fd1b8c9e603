"""Parse events (docs/events.md) in Spark SQL and route them to buckets.

The JVM side does only what must happen before the shuffle: the byte checks (a record value
arrives as bytes and becomes a string only once it is known to be valid UTF-8, within the
maximum record size and free of NUL bytes: any other byte sequence would make a string that
cannot cross into Python), one typed `from_json` (a record that is not JSON, or has a field of
the wrong JSON type, comes back flagged in `_corrupt_record`), the bucket, and the event time
for the watermark. The contract checks
(required fields, signs, known type and state) run vectorised on the Python side
(streaming/validate.py): as one large SQL expression referenced by several columns, they made
the optimiser inline it again and again and run out of memory planning each micro-batch.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from replmon.streaming.contract import (ARRAY_FIELDS, BROADCAST, DEFAULT_MAX_RECORD_BYTES, FIELDS,
                                        PARTITIONED, RAW_PREFIX_BYTES)

_SQL_TYPE = {"int": "bigint", "str": "string", "ints": "array<bigint>"}
_TYPED_SCHEMA = ", ".join(f"`{n}` {_SQL_TYPE[k]}" for n, k in FIELDS.items()) + \
    ", `_corrupt_record` string"
_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"}


def byte_problem(value: Column, max_record_bytes: int) -> Column:
    """Why a record's bytes cannot be read as text (null when they can): the first of
    no value, too large, not UTF-8, a NUL byte."""
    size = F.octet_length(value)
    return (F.when(value.isNull(), F.lit("empty record: no value"))
            .when(size > max_record_bytes,
                  F.concat(F.lit("record too large: "), size.cast("string"),
                           F.lit(f" bytes, more than stream.max_record_bytes ({max_record_bytes})")))
            .when(~F.is_valid_utf8(value), F.lit("not valid UTF-8"))
            .when(F.contains(value, F.unhex(F.lit("00"))), F.lit("contains a NUL byte")))


def parse_events(lines: DataFrame, *, seq: Column | None = None,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> DataFrame:
    """`lines` has a binary column `value` (a string column is taken as its UTF-8 bytes).
    Returns `raw` (the text; for a record whose bytes are bad, a bounded printable prefix),
    `seq`, `byte_problem`, `size` and `sha256` (both only where `byte_problem` is set),
    `malformed` and the typed fields of the contract (null where absent)."""
    value = F.col("value")
    if dict(lines.dtypes).get("value") != "binary":
        value = value.cast("binary")
    seq = seq if seq is not None else F.lit(0).cast("long")
    checked = lines.select(value.alias("bytes"), seq.alias("seq")).select(
        "bytes", "seq", byte_problem(F.col("bytes"), max_record_bytes).alias("byte_problem"))
    bad = F.col("byte_problem").isNotNull()
    text = F.when(~bad, F.col("bytes").cast("string"))
    prefix = F.make_valid_utf8(F.substring(F.col("bytes"), 1, RAW_PREFIX_BYTES).cast("string"))
    return (checked.select(
        F.when(bad, prefix).otherwise(text).alias("raw"),
        "seq", "byte_problem",
        F.when(bad, F.octet_length("bytes")).alias("size"),
        F.when(bad, F.sha2(F.col("bytes"), 256)).alias("sha256"),
        F.from_json(text, _TYPED_SCHEMA, _OPTIONS).alias("j"))
        .select("raw", "seq", "byte_problem", "size", "sha256",
                (bad | F.col("j._corrupt_record").isNotNull()).alias("malformed"),
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
