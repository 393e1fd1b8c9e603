"""Parse and validate the event contract (docs/events.md) in Spark SQL, on the JVM side.

Every field is first read as its raw JSON text, then cast; a field present but not castable is
"mistyped", absent is "missing". Each record gets either typed columns or a quarantine reason.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# field -> kind ("int", "str", "ints")
FIELDS = {
    "type": "str", "ts": "int", "cluster": "str", "topic": "str", "partition": "int",
    "replica": "int", "fetch_offset": "int", "leader_leo": "int", "leader_epoch": "int",
    "broker_epoch": "int", "log_start_offset": "int", "leader_hw": "int", "error": "str",
    "diverging_epoch": "int", "leader": "int", "replicas": "ints", "isr": "ints",
    "adding_replicas": "ints", "hw": "int", "min_insync_replicas": "int",
    "replica_lag_time_max_ms": "int", "broker": "int", "state": "str",
}
REQUIRED = {
    "fetch": ("topic", "partition", "replica", "fetch_offset", "leader_leo"),
    "append": ("topic", "partition", "leader_leo"),
    "metadata": ("topic", "partition", "leader", "leader_epoch", "replicas", "isr"),
    "broker": ("broker", "state"),
    "heartbeat": (),
}
NON_NEGATIVE = ("partition", "replica", "fetch_offset", "leader_leo", "leader_epoch",
                "log_start_offset", "hw", "broker")
AT_LEAST_ONE = ("min_insync_replicas", "replica_lag_time_max_ms")
BROKER_STATES = ("running", "fenced", "shutting_down")
PARTITIONED = ("fetch", "append", "metadata")

_RAW_SCHEMA = ", ".join(f"`{name}` string" for name in FIELDS) + ", `_corrupt_record` string"


def _typed(name: str) -> Column:
    raw = F.col(f"j.{name}")
    kind = FIELDS[name]
    if kind == "int":
        return F.expr(f"try_cast(j.`{name}` as bigint)")
    if kind == "ints":
        return F.from_json(raw, "array<int>")
    return raw


def _reason(max_future_ms: int) -> Column:
    """The first thing wrong with a record, or null when it is valid."""
    raw = lambda n: F.col(f"j.{n}")  # noqa: E731
    typed = lambda n: F.col(f"t_{n}")  # noqa: E731
    checks: list[tuple[Column, Column]] = [
        (F.col("j._corrupt_record").isNotNull(), F.lit("not a JSON object")),
        (raw("type").isNull(), F.lit("missing field: type")),
        (~raw("type").isin(*REQUIRED), F.concat(F.lit("unknown type: "), raw("type"))),
    ]
    for name in ("ts", "cluster"):
        checks.append((raw(name).isNull() | (raw(name) == ""), F.lit(f"missing field: {name}")))
    for event_type, names in REQUIRED.items():
        for name in names:
            checks.append(((raw("type") == event_type) & raw(name).isNull(),
                           F.lit(f"missing field for {event_type}: {name}")))
    for name, kind in FIELDS.items():
        if kind != "str":
            checks.append((raw(name).isNotNull() & typed(name).isNull(),
                           F.lit(f"mistyped field: {name} is not "
                                 f"{'an integer' if kind == 'int' else 'an array of integers'}")))
    for name in NON_NEGATIVE:
        checks.append((typed(name) < 0, F.lit(f"negative {name}")))
    for name in AT_LEAST_ONE:
        checks.append((typed(name) < 1, F.lit(f"{name} must be at least 1")))
    checks += [
        ((raw("type") == "broker") & ~raw("state").isin(*BROKER_STATES),
         F.concat(F.lit("unknown broker state: "), raw("state"))),
        (typed("ts") > (F.unix_millis(F.current_timestamp()) + F.lit(max_future_ms)),
         F.concat(F.lit("event time "), raw("ts"),
                  F.lit(f" is more than {max_future_ms} ms ahead of the wall clock"))),
    ]
    expr = F.lit(None).cast("string")
    for cond, reason in reversed(checks):
        expr = F.when(cond, reason).otherwise(expr)
    return expr


def parse_events(lines: DataFrame, *, max_future_ms: int, seq: Column | None = None) -> DataFrame:
    """`lines` has a string column `value`. Returns typed columns plus `raw`, `seq` and
    `reason` (null for a valid event)."""
    df = lines.select(
        F.col("value").alias("raw"),
        (seq if seq is not None else F.monotonically_increasing_id()).alias("seq"),
        F.from_json("value", _RAW_SCHEMA,
                    {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"}).alias("j"),
    )
    df = df.select("raw", "seq", "j", *[_typed(n).alias(f"t_{n}") for n in FIELDS])
    df = df.withColumn("reason", _reason(max_future_ms))
    return df.select("raw", "seq", "reason", *[F.col(f"t_{n}").alias(n) for n in FIELDS])


def quarantine_records(parsed: DataFrame) -> DataFrame:
    """Invalid records as (kind, payload) rows in the quarantine output format."""
    return parsed.where(F.col("reason").isNotNull()).select(
        F.lit("quarantine").alias("kind"),
        F.to_json(F.struct(
            F.col("raw"), F.col("reason"), F.lit("parse").alias("stage"),
            F.col("cluster"), F.col("ts"),
        ), {"ignoreNullFields": "false"}).alias("payload"),
    )


def valid_events(parsed: DataFrame, buckets: int) -> DataFrame:
    """Valid events with their bucket: a partition's events go to one bucket; broker and
    heartbeat events concern the whole cluster and go to every bucket."""
    bucket = F.when(F.col("type").isin(*PARTITIONED),
                    F.array(F.pmod(F.xxhash64("cluster", "topic", "partition"), F.lit(buckets))))
    bucket = bucket.otherwise(F.sequence(F.lit(0).cast("bigint"), F.lit(buckets - 1).cast("bigint")))
    return (parsed.where(F.col("reason").isNull())
            .drop("reason")
            .withColumn("bucket", F.explode(bucket))
            .withColumn("bucket", F.col("bucket").cast("int"))
            .withColumn("event_time", F.timestamp_millis(F.col("ts"))))
