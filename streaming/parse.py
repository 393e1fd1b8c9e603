"""Parse events (docs/events.md) in Spark SQL and route them to buckets.

Everything that decides whether a record is valid happens here, on the JVM, before the
shuffle: the byte checks (a record value arrives as bytes and becomes a string only once it is
known to be valid UTF-8, within the maximum record size and free of NUL bytes: any other byte
sequence would make a string that cannot cross into Python), one typed `from_json` (a record
that is not JSON, or has a field of the wrong JSON type, comes back flagged in
`_corrupt_record`), and the contract checks (required fields, signs, known type and state, event
time not too far ahead): `contract_reason`, computed once per row in a projection of its own
and referenced from there. Then the bucket and the event time. Only a row that breaks the
contract keeps its raw text: valid events cross into Python without it (it was about a third
of the shuffled bytes). streaming/validate.py is the same checks in Python, the
reference the tests compare this with.
"""

from __future__ import annotations

import functools
import operator

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from replmon.state.events import (
    AT_LEAST_ONE,
    BROADCAST,
    BROKER_STATES,
    FIELDS,
    NON_NEGATIVE,
    PARTITIONED,
    REQUIRED,
)
from replmon.state.sessions import NO_LEADER, NOT_A_SESSION, OWN_LEADER
from replmon.streaming.contract import (
    DEFAULT_MAX_RECORD_BYTES,
    MALFORMED,
    PACKED_FIELDS,
    RAW_PREFIX_BYTES,
    SPARK_SCHEMA,
)

_TYPED_SCHEMA = SPARK_SCHEMA + ", `_corrupt_record` string"
_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"}


def byte_problem(value: Column, max_record_bytes: int) -> Column:
    """Why a record's bytes cannot be read as text (null when they can): the first of
    no value, too large, not UTF-8, a NUL byte."""
    size = F.octet_length(value)
    return (
        F.when(value.isNull(), F.lit("empty record: no value"))
        .when(
            size > max_record_bytes,
            F.concat(
                F.lit("record too large: "),
                size.cast("string"),
                F.lit(f" bytes, more than stream.max_record_bytes ({max_record_bytes})"),
            ),
        )
        .when(~F.is_valid_utf8(value), F.lit("not valid UTF-8"))
        .when(F.contains(value, F.unhex(F.lit("00"))), F.lit("contains a NUL byte"))
    )


def parse_events(
    lines: DataFrame, *, seq: Column | None = None, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> DataFrame:
    """`lines` has a binary column `value` (a string column is taken as its UTF-8 bytes).
    Returns `raw` (the text; for a record whose bytes are bad, a bounded printable prefix),
    `seq`, `byte_problem`, `size` and `sha256` (both only where `byte_problem` is set),
    `malformed` and the typed fields of the contract (null where absent)."""
    value = F.col("value")
    if dict(lines.dtypes).get("value") != "binary":
        value = value.cast("binary")
    seq = seq if seq is not None else F.lit(0).cast("long")
    checked = lines.select(value.alias("bytes"), seq.alias("seq")).select(
        "bytes", "seq", byte_problem(F.col("bytes"), max_record_bytes).alias("byte_problem")
    )
    bad = F.col("byte_problem").isNotNull()
    text = F.when(~bad, F.col("bytes").cast("string"))
    prefix = F.make_valid_utf8(F.substring(F.col("bytes"), 1, RAW_PREFIX_BYTES).cast("string"))
    return checked.select(
        F.when(bad, prefix).otherwise(text).alias("raw"),
        "seq",
        "byte_problem",
        F.when(bad, F.octet_length("bytes")).alias("size"),
        F.when(bad, F.sha2(F.col("bytes"), 256)).alias("sha256"),
        F.from_json(text, _TYPED_SCHEMA, _OPTIONS).alias("j"),
    ).select(
        "raw",
        "seq",
        "byte_problem",
        "size",
        "sha256",
        (bad | F.col("j._corrupt_record").isNotNull()).alias("malformed"),
        *[F.col(f"j.{n}").alias(n) for n in FIELDS],
    )


def contract_reason(max_future_ms: int) -> Column:
    """Why a parsed row breaks the contract (docs/events.md), null when it does not: the first
    failing check, in the order and words of streaming/validate.py (the Python reference the
    tests compare this with). A malformed record's reason is MALFORMED: the stateful step names
    what exactly is wrong from its raw text (contract.malformed_reason)."""
    kind, cluster, ts = F.col("type"), F.col("cluster"), F.col("ts")
    reason = (
        F.when(F.col("byte_problem").isNotNull(), F.col("byte_problem"))
        .when(F.col("malformed"), F.lit(MALFORMED))
        .when(kind.isNull(), F.lit("missing field: type"))
        .when(~kind.isin(*REQUIRED), F.concat(F.lit("unknown type: "), kind))
        .when(ts.isNull(), F.lit("missing field: ts"))
        .when(cluster.isNull() | (cluster == ""), F.lit("missing field: cluster"))
    )
    for event_type, names in REQUIRED.items():
        for name in names:
            reason = reason.when(
                (kind == event_type) & F.col(name).isNull(), F.lit(f"missing field for {event_type}: {name}")
            )
    for name in NON_NEGATIVE:
        reason = reason.when(F.col(name) < 0, F.lit(f"negative {name}"))
    for name in AT_LEAST_ONE:
        reason = reason.when(F.col(name) < 1, F.lit(f"{name} must be at least 1"))
    state = F.col("state")
    reason = reason.when(
        (kind == "broker") & state.isNotNull() & ~state.isin(*BROKER_STATES),
        F.concat(F.lit("unknown broker state: "), state),
    )
    session = kind == "session"
    reason = (
        reason.when(session & (F.col("session_id") == 0), F.lit(NOT_A_SESSION))
        .when(session & (F.col("leader") < 0), F.lit(NO_LEADER))
        .when(session & (F.col("replica") == F.col("leader")), F.lit(OWN_LEADER))
    )
    return reason.when(
        ts > wall_clock_ms() + F.lit(max_future_ms),
        F.concat(
            F.lit("event time "),
            ts.cast("string"),
            F.lit(f" is more than {max_future_ms} ms ahead of the wall clock"),
        ),
    )


def wall_clock_ms() -> Column:
    """The wall clock in epoch ms, read as a row is checked. Not current_timestamp(): a
    streaming query fixes that per micro-batch as a literal in the generated code, so every batch
    compiled the parse stage's code anew (Janino, then the JIT: about 3 compilations a batch)
    instead of reusing it. The same expression every batch keeps the code the same."""
    return F.expr("CAST(reflect('java.lang.System', 'currentTimeMillis') AS BIGINT)")


def _keyed(bucket: Column, keys: list[int] | None) -> Column:
    """The grouping key (int) of a bucket number (bigint, 0-based)."""
    if keys is None or keys == list(range(len(keys))):
        return bucket.cast("int")
    return F.element_at(F.array(*[F.lit(int(k)) for k in keys]), (bucket + 1).cast("int"))


def monitor_input(
    parsed: DataFrame, buckets: int, max_future_ms: int, keys: list[int] | None = None
) -> DataFrame:
    """Rows for the stateful step, with their bucket, event time and `reason`: why the row
    breaks the contract, null for a valid event. The `bucket` column holds each bucket's
    grouping key: `keys[b]` for bucket b (streaming/checkpoint.bucket_keys), else b itself.

    A partition's events go to one bucket; broker and heartbeat events concern the whole
    cluster and go to every bucket. A row that breaks the contract is hashed to one bucket and
    quarantined there, once; it alone keeps its `raw` text (what quarantine shows): a valid
    event's raw text is dropped here, before the shuffle, so the bulk of the input crosses into
    Python without it. The fields a fetch or an append may carry are columns; the others are
    packed into one JSON column, `extra` (contract.PACKED_FIELDS, contract.pack_extra). Only
    valid events get an event time (a record from too far in the future is not valid), so a
    bad record can never move the watermark.
    """
    # `reason` is computed in a projection of its own and referenced from there (the optimiser
    # keeps a non-trivial expression that is used several times in its own projection).
    checked = parsed.withColumn("reason", contract_reason(max_future_ms))
    ok = F.col("reason").isNull()
    broadcast = ok & F.col("type").isin(*BROADCAST)
    every = F.sequence(F.lit(0).cast("bigint"), F.lit(buckets - 1).cast("bigint"))
    one = F.array(F.pmod(F.xxhash64("cluster", "topic", "partition", "type"), F.lit(buckets)))
    one = F.when(
        ok & F.col("type").isin(*PARTITIONED),
        F.array(F.pmod(F.xxhash64("cluster", "topic", "partition"), F.lit(buckets))),
    ).otherwise(one)
    # The rare fields travel packed in one JSON column (contract.PACKED_FIELDS): a column costs
    # every row, null or not. (Array columns would also cross into pandas two orders of
    # magnitude slower than strings: 500k rows with them 150 s, without 7 s.)
    present = functools.reduce(operator.or_, [F.col(n).isNotNull() for n in PACKED_FIELDS])
    extra = F.when(present, F.to_json(F.struct(*PACKED_FIELDS), {"ignoreNullFields": "true"}))
    return (
        checked.withColumn("raw", F.when(~ok, F.col("raw")))
        .withColumn("extra", extra)
        .withColumn("bucket", F.explode(F.when(broadcast, every).otherwise(one)))
        .withColumn("bucket", _keyed(F.col("bucket"), keys))
        .withColumn("event_time", F.when(ok, F.timestamp_millis(F.col("ts"))))
    )
