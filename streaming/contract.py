"""The event contract (docs/events.md) as data, shared by the Spark parser and the Python side.

No Spark here: the stateful step imports it on the workers.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# The Kafka topic the collector and the simulator publish events to and `replmon run` reads by
# default (kafka.subscribe).
METRICS_TOPIC = "replmon.fetch-metrics"

# field -> kind ("int", "str", "ints")
FIELDS = {
    "type": "str",
    "ts": "int",
    "cluster": "str",
    "topic": "str",
    "partition": "int",
    "replica": "int",
    "fetch_offset": "int",
    "leader_leo": "int",
    "leader_epoch": "int",
    "broker_epoch": "int",
    "log_start_offset": "int",
    "leader_hw": "int",
    "error": "str",
    "diverging_epoch": "int",
    "leader": "int",
    "replicas": "ints",
    "isr": "ints",
    "adding_replicas": "ints",
    "hw": "int",
    "min_insync_replicas": "int",
    "replica_lag_time_max_ms": "int",
    "broker": "int",
    "state": "str",
}
ARRAY_FIELDS = tuple(name for name, kind in FIELDS.items() if kind == "ints")
# How a parsed event travels from the JVM to the stateful step (parse.monitor_input): the fields
# every fetch and append may carry as columns of their own; the rest (a metadata or broker
# event's fields, a fetch's error, and the size and digest of a record whose bytes were bad)
# packed into one JSON object, `extra`, null for a row that has none of them. Every column
# costs the shuffle and the Arrow transfer of every row, also where it is null: with all the
# fields as columns, a Python step that only read its input reached about 50% of the stateless
# ceiling at 100k partitions, with these 58% (bench/throughput.py --floor; README).
COLUMN_FIELDS = (
    "type",
    "ts",
    "cluster",
    "topic",
    "partition",
    "replica",
    "fetch_offset",
    "leader_leo",
    "leader_epoch",
    "broker_epoch",
    "log_start_offset",
)
PACKED_FIELDS = (
    "error",
    "diverging_epoch",
    "leader",
    "replicas",
    "isr",
    "adding_replicas",
    "hw",
    "min_insync_replicas",
    "replica_lag_time_max_ms",
    "broker",
    "state",
    "size",
    "sha256",
)
REQUIRED = {
    "fetch": ("topic", "partition", "replica", "fetch_offset", "leader_leo"),
    "append": ("topic", "partition", "leader_leo"),
    "metadata": ("topic", "partition", "leader", "leader_epoch", "replicas", "isr"),
    "broker": ("broker", "state"),
    "heartbeat": (),
}
NON_NEGATIVE = (
    "partition",
    "replica",
    "fetch_offset",
    "leader_leo",
    "leader_epoch",
    "log_start_offset",
    "hw",
    "broker",
)
AT_LEAST_ONE = ("min_insync_replicas", "replica_lag_time_max_ms")
BROKER_STATES = ("running", "fenced", "shutting_down")
PARTITIONED = ("fetch", "append", "metadata")
BROADCAST = ("broker", "heartbeat")  # cluster-wide: delivered to every bucket
MALFORMED = "malformed"  # the parser's mark; malformed_reason() says what exactly
DEFAULT_MAX_RECORD_BYTES = 1 << 20  # stream.max_record_bytes: larger records are quarantined
RAW_PREFIX_BYTES = 1024  # a quarantine record keeps this much of the raw record, plus size and digest
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and _INT64[0] <= v <= _INT64[1]


def pack_extra(row: dict[str, Any]) -> str | None:
    """The `extra` column of a row (a dict of its fields) as parse.monitor_input packs it on the
    JVM: the PACKED_FIELDS it has, as a compact JSON object; None when it has none. For code
    that builds the stateful step's input without Spark (tests, benches); a Spark test checks
    that the JVM packs the same."""
    packed = {name: row[name] for name in PACKED_FIELDS if row.get(name) is not None}
    return json.dumps(packed, separators=(",", ":")) if packed else None


def malformed_reason(raw: str | None) -> str:
    """Why a record the JSON parser flagged is malformed: not a JSON object, or which field
    has the wrong JSON type."""
    try:
        obj = json.loads(raw) if raw is not None else None
    except (ValueError, RecursionError):
        return "not a JSON object"
    if not isinstance(obj, dict):
        return "not a JSON object"
    for name, kind in FIELDS.items():
        if name not in obj or obj[name] is None:
            continue
        v = obj[name]
        if kind == "int" and not _is_int(v):
            return f"mistyped field: {name} is not an integer"
        if kind == "ints" and not (isinstance(v, list) and all(_is_int(x) for x in v)):
            return f"mistyped field: {name} is not an array of integers"
        if kind == "str" and not isinstance(v, str):
            return f"mistyped field: {name} is not a string"
    return "mistyped field: a value has the wrong JSON type"


def describe(reason: str, raw: str | None) -> str:
    """The final reason text: a malformed record is examined to name what is wrong."""
    return malformed_reason(raw) if reason == MALFORMED else reason


def bounded_quarantine(record: dict[str, Any]) -> dict:
    """A quarantine record with its `raw` text cut to RAW_PREFIX_BYTES (UTF-8, never inside a
    character), the whole record's `size` in bytes and its `sha256` (kept when the parser set
    them from the record's bytes), and `raw_truncated`: whether `raw` is less than the record."""
    out = dict(record)
    data = (out.get("raw") or "").encode("utf-8", "surrogatepass")
    if out.get("size") is None or out.get("sha256") is None:
        out["size"], out["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    if len(data) > RAW_PREFIX_BYTES:
        data = data[:RAW_PREFIX_BYTES]
        out["raw"] = data.decode("utf-8", "ignore")
    out["raw_truncated"] = out["size"] > len(data)
    return out
