"""Turn engine output records into Redis script calls (pure: no I/O).

Each function returns a `ScriptCall`: which script, its KEYS and ARGV. Values are encoded as
strings: null -> '', booleans -> 'true'/'false', arrays -> compact JSON, numbers as decimal.
See docs/outputs.md for the records and docs/redis.md for the keys.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from replmon.sinks.errors import SinkWriteError
from replmon.sinks.keys import Keys, part, partition_member, replica_member
from replmon.state.status_records import PARTITION_POINT_FIELDS, REPLICA_POINT_FIELDS

ALERT_FIELDS = (
    "alert_id",
    "name",
    "status",
    "severity",
    "cluster",
    "topic",
    "partition",
    "replica",
    "subject",
    "started_ms",
    "ts",
    "reason",
)
# `updated`: an open alert's cause or counts changed (state/cluster.py); it replaces the firing
# record in the firing hashes and is never notified
ALERT_STATUSES = ("firing", "updated", "resolved")
QUARANTINE_FIELDS = ("stage", "reason", "cluster", "ts", "raw", "size", "sha256")
REPLICA_SERIES_FIELDS = REPLICA_POINT_FIELDS
PARTITION_SERIES_FIELDS = PARTITION_POINT_FIELDS
# a partition's point carries its ISR's size too (points_call)
_PARTITION_POINT_FIELDS = (*PARTITION_SERIES_FIELDS, "isr_size")
_ABSENT = object()  # a field the record does not have


class RecordError(SinkWriteError, ValueError):
    """A record lacks a field the key layout needs, or has a value outside the contract."""


@dataclass(frozen=True)
class ScriptCall:
    script: str  # a name in sinks.redis_sink.SCRIPTS
    keys: tuple[str, ...]
    args: tuple[str, ...]
    kind: str  # which record kind the call writes, for the WriteReport
    records: int = 1  # how many records it writes
    specs: tuple = ()  # apply_statuses: the StatusSpec of each record, in order
    known: tuple = ()  # apply_statuses: per record, whether its index adds and prune were left out


# One encoder, made once: json.dumps with separators builds one per call.
_compact = json.JSONEncoder(separators=(",", ":")).encode


def encode(value: Any) -> str:
    """A record value as the string Redis stores."""
    kind = type(value)
    if kind is int or kind is str:  # the common cases first (a bool is not an int here)
        return str(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def flatten(record: Mapping[str, Any], order: Iterable[str] = ()) -> list[str]:
    """Field/value pairs: the fields in `order` first, then any others sorted by name."""
    first = [f for f in order if f in record]
    rest = sorted(record.keys() - set(first))
    pairs: list[str] = []
    for field in (*first, *rest):
        pairs += [field, encode(record[field])]
    return pairs


def _need(record: Mapping[str, Any], kind: str, *fields: str) -> None:
    missing = [f for f in fields if record.get(f) is None]
    if missing:
        raise RecordError(f"{kind} record lacks {', '.join(missing)}: {dict(record)!r:.300}")


def _ts(record: Mapping[str, Any], kind: str) -> int:
    try:
        return int(record["ts"])
    except (TypeError, ValueError) as exc:
        raise RecordError(f"{kind} record has a non-integer ts: {record.get('ts')!r}") from exc


def _flag(value: Any) -> str:
    return "1" if value else "0"


@dataclass(frozen=True)
class StatusSpec:
    """One status record's writes: its hash and series, index adds, memberships, prune."""

    hash_key: str
    series_key: str
    ts: int
    hash_pairs: list[str]
    series_pairs: list[str]
    adds: list[tuple[str, str]]  # (set key, member)
    memberships: list[tuple[str, str, bool]]  # (set key, member, belongs)
    prune: tuple[str, str, str, list[str]] | None = None  # (replicas set, out-of-sync set, prefix, ids)


def replica_status_spec(keys: Keys, record: Mapping[str, Any]) -> StatusSpec:
    _need(record, "replica_status", "cluster", "topic", "partition", "replica", "ts")
    c, t, p, r = (record[f] for f in ("cluster", "topic", "partition", "replica"))
    return StatusSpec(
        keys.replica(c, t, p, r),
        keys.replica_series(c, t, p, r),
        _ts(record, "replica_status"),
        flatten(record),
        [a for f in REPLICA_SERIES_FIELDS if f in record for a in (f, encode(record[f]))],
        [
            (keys.clusters(), part(c)),
            (keys.topics(c), part(t)),
            (keys.partitions(c), partition_member(t, p)),
            (keys.topic_partitions(c, t), part(p)),
            (keys.replicas(c, t, p), part(r)),
            (keys.brokers(c), part(r)),
            (keys.broker_followers(c, r), partition_member(t, p)),
        ],
        # Kafka counts a follower outside the ISR as out of sync.
        [
            (keys.out_of_sync(c), replica_member(t, p, r), not record.get("in_isr", False)),
            (keys.broker_out_of_sync(c, r), partition_member(t, p), not record.get("in_isr", False)),
        ],
    )


def partition_status_spec(keys: Keys, record: Mapping[str, Any]) -> StatusSpec:
    _need(record, "partition_status", "cluster", "topic", "partition", "ts")
    c, t, p = (record[f] for f in ("cluster", "topic", "partition"))
    series = [a for f in PARTITION_SERIES_FIELDS if f in record for a in (f, encode(record[f]))]
    if isinstance(record.get("isr"), (list, tuple)):
        series += ["isr_size", str(len(record["isr"]))]
    member = partition_member(t, p)
    replicas = record.get("replicas")
    prune = None
    if isinstance(replicas, (list, tuple)):  # followers no longer assigned leave the indexes
        prune = (keys.replicas(c, t, p), keys.out_of_sync(c), f"{member}:", [part(r) for r in replicas])
    return StatusSpec(
        keys.partition(c, t, p),
        keys.partition_series(c, t, p),
        _ts(record, "partition_status"),
        flatten(record),
        series,
        [
            (keys.clusters(), part(c)),
            (keys.topics(c), part(t)),
            (keys.partitions(c), member),
            (keys.topic_partitions(c, t), part(p)),
        ],
        [
            (keys.under_replicated(c), member, bool(record.get("under_replicated"))),
            (keys.under_min_isr(c), member, bool(record.get("under_min_isr"))),
        ],
        prune,
    )


def status_call(
    kind: str, specs: list[StatusSpec], series_maxlen: int, known: list[bool] | None = None
) -> ScriptCall:
    """One APPLY_STATUSES call for `specs`; each key is passed once. `known`: per spec, whether
    the sink sent its index adds and prune before (they are left out; sinks/redis_sink.py)."""
    numbers: dict[str, int] = {}
    known = known or [False] * len(specs)

    def no(key: str) -> int:
        return numbers.setdefault(key, len(numbers) + 1)

    records = []
    for spec, sent in zip(specs, known, strict=True):
        prune: list = []
        if spec.prune is not None and not sent:
            replicas_key, out_of_sync_key, prefix, ids = spec.prune
            prune = [no(replicas_key), no(out_of_sync_key), prefix, *ids]
        records.append(
            _compact(
                [
                    no(spec.hash_key),
                    no(spec.series_key),
                    str(spec.ts),
                    spec.hash_pairs,
                    spec.series_pairs,
                    [] if sent else [x for key, member in spec.adds for x in (no(key), member)],
                    [x for key, member, on in spec.memberships for x in (no(key), member, _flag(on))],
                    prune,
                    1 if sent else 0,
                ]
            )
        )
    return ScriptCall(
        "apply_statuses",
        tuple(numbers),
        (str(series_maxlen), *records),
        kind,
        len(records),
        tuple(specs),
        tuple(known),
    )


def points_call(keys: Keys, points: list[Mapping[str, Any]], series_maxlen: int) -> ScriptCall:
    """One APPEND_POINTS call: the series points of healthy partitions (docs/outputs.md,
    `series_point`), each at entry id `{ts}-0` of its partition's or follower's series. The
    bulk of a busy batch's writes (three points per busy partition per stream.series_interval_ms):
    one pass per point, with no intermediate lists."""
    numbers: dict[str, int] = {}
    records = []
    for point in points:
        get: Callable[..., Any] = point.get
        c, t, p, r = get("cluster"), get("topic"), get("partition"), get("replica")
        if c is None or t is None or p is None or get("ts") is None:
            _need(point, "series_point", "cluster", "topic", "partition", "ts")
        fields: tuple[str, ...]
        if r is None:
            key = keys.partition_series(c, t, p)
            fields = _PARTITION_POINT_FIELDS
        else:
            key = keys.replica_series(c, t, p, r)
            fields = REPLICA_SERIES_FIELDS
        number = numbers.get(key)
        if number is None:
            number = numbers[key] = len(numbers) + 1
        pairs: list[str] = []
        for f in fields:
            value = get(f, _ABSENT)
            if value is not _ABSENT:
                pairs += (f, encode(value))
        records.append(_compact([number, str(_ts(point, "series_point")), pairs]))
    return ScriptCall(
        "append_points", tuple(numbers), (str(series_maxlen), *records), "series_point", len(records)
    )


def alert_call(keys: Keys, alert: Mapping[str, Any], seen_ttl_s: int, maxlen: int) -> ScriptCall:
    _need(alert, "alert", "alert_id", "status", "cluster")
    status = alert["status"]
    if status not in ALERT_STATUSES:
        raise RecordError(f"alert {alert['alert_id']} has status {status!r}, not one of {ALERT_STATUSES}")
    alert_id, cluster = str(alert["alert_id"]), alert["cluster"]
    body = json.dumps(dict(alert), separators=(",", ":"), sort_keys=True)
    seen = status if status != "updated" else f"updated-{alert['ts']}"  # an alert has many updates
    return ScriptCall(
        "write_alert",
        (
            keys.alert_seen(alert_id, seen),
            keys.alert_seen(alert_id, "resolved"),
            keys.alerts_stream(),
            keys.alerts_firing(),
            keys.alerts_firing_in(cluster),
        ),
        (
            alert_id,
            status,
            body,
            str(seen_ttl_s),
            str(maxlen),
            keys.alerts_channel(),
            *flatten(alert, ALERT_FIELDS),
        ),
        "alerts",
    )


def notify_call(keys: Keys, alert: Mapping[str, Any], seen_ttl_s: int, maxlen: int) -> ScriptCall:
    """The same alert transition on the on-call stream (only for records with `notify`)."""
    call = alert_call(keys, alert, seen_ttl_s, maxlen)
    alert_id, status, cluster = str(alert["alert_id"]), alert["status"], alert["cluster"]
    return ScriptCall(
        "write_alert",
        (
            keys.alert_seen(alert_id, f"notify-{status}"),
            keys.alert_seen(alert_id, "notify-resolved"),
            keys.alerts_notify_stream(),
            keys.alerts_notify_firing(),
            keys.alerts_notify_firing_in(cluster),
        ),
        (*call.args[:5], keys.alerts_notify_channel(), *call.args[6:]),
        "notified",
    )


def alert_order(alert: Mapping[str, Any]) -> tuple:
    """Write order within a batch: by event time, a firing before its resolve."""
    return (alert.get("ts") or 0, alert.get("status") == "resolved")


def quarantine_record_ids(batch_id: int, records: list[Mapping[str, Any]]) -> list[str]:
    """Deterministic ids, independent of row order: a digest of the batch id and the record,
    plus the occurrence number among identical records of the batch."""
    seen: Counter[str] = Counter()
    ids = []
    for record in records:
        digest = hashlib.sha1(
            json.dumps([batch_id, *(encode(record.get(f)) for f in QUARANTINE_FIELDS)]).encode()
        ).hexdigest()
        ids.append(f"{batch_id}-{digest[:20]}-{seen[digest]}")
        seen[digest] += 1
    return ids


def quarantine_call(
    keys: Keys, record: Mapping[str, Any], record_id: str, seen_ttl_s: int, maxlen: int
) -> ScriptCall:
    fields = flatten({**record, "id": record_id}, ("id", *QUARANTINE_FIELDS))
    return ScriptCall(
        "write_quarantine",
        (keys.quarantine_seen(record_id), keys.quarantine_stream(), keys.quarantine_count()),
        (str(seen_ttl_s), str(maxlen), *fields),
        "quarantine",
    )


def cluster_point_call(keys: Keys, cluster: str, ts: int, maxlen: int) -> ScriptCall:
    return ScriptCall(
        "cluster_point",
        (
            keys.cluster_series(cluster),
            keys.under_replicated(cluster),
            keys.under_min_isr(cluster),
            keys.out_of_sync(cluster),
            keys.alerts_firing_in(cluster),
        ),
        (str(ts), str(maxlen)),
        "cluster",
    )


def verdict_call(keys: Keys, verdict: Mapping[str, Any]) -> ScriptCall:
    """One broker's restart-gate verdict (state/restart_gate.py): the hash `restart_gate`."""
    _need(verdict, "verdict", "cluster", "broker", "verdict", "clock_ms")
    fields = {
        "cluster": verdict["cluster"],
        "broker": verdict["broker"],
        "verdict": verdict["verdict"],
        "clock_ms": int(verdict["clock_ms"]),
        "summary": verdict.get("summary", ""),
        "reasons": verdict.get("reasons", {}),
    }
    return ScriptCall(
        "write_verdict",
        (keys.restart_gate(verdict["cluster"], verdict["broker"]),),
        (str(fields["clock_ms"]), *flatten(fields, ("verdict", "clock_ms", "summary"))),
        "verdict",
    )
