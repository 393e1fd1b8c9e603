"""The event contract's Spark side: the schema, the columns an event travels in to the stateful
step, the quarantine record. The contract itself (fields, types, bounds, required fields) is
declared once in state/events.py; the parser and the checks take them from there.

No Spark here: the stateful step imports it on the workers.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from replmon.state.events import COMMON, EVENT_FIELDS, FIELDS, TYPES

# The Kafka topic the collector and the simulator publish events to and `replmon run` reads by
# default (kafka.subscribe).
METRICS_TOPIC = "replmon.fetch-metrics"

# The Spark SQL schema of a parsed record (parse.parse_events), from the declaration.
_SQL_TYPE = {"int": "bigint", "str": "string", "ints": "array<bigint>"}
SPARK_SCHEMA = ", ".join(f"`{n}` {_SQL_TYPE[f.kind]}" for n, f in FIELDS.items())
# How a parsed event travels from the JVM to the stateful step (parse.monitor_input): the fields
# every fetch and append may carry as columns of their own; the rest (a metadata or broker
# event's fields, a fetch's error, and the size and digest of a record whose bytes were bad)
# packed into one JSON object, `extra`, null for a row that has none of them. Every column
# costs the shuffle and the Arrow transfer of every row, also where it is null: with all the
# fields as columns, a Python step that only read its input reached about 50% of the stateless
# ceiling at 100k partitions, with these 58% (bench/throughput.py --floor; docs/performance.md).
# A fetch's `error` and `diverging_epoch` are rare (a failed fetch) and travel packed.
_RARE = ("error", "diverging_epoch")
_FETCH_OR_APPEND = {*COMMON, *(n for t in ("fetch", "append") for n in TYPES[t].required + TYPES[t].optional)}
COLUMN_FIELDS = tuple(n for n in EVENT_FIELDS if n in _FETCH_OR_APPEND and n not in _RARE)
PACKED_FIELDS = (*(n for n in EVENT_FIELDS if n not in COLUMN_FIELDS and n != "raw"), "size", "sha256")
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
    for name, f in FIELDS.items():
        if name not in obj or obj[name] is None:
            continue
        v, kind = obj[name], f.kind
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
