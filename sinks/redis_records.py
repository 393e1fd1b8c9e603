"""Turn engine output records into Redis script calls (pure: no I/O).

Each function returns a `ScriptCall`: which script, its KEYS and ARGV. Values are encoded as
strings: null -> '', booleans -> 'true'/'false', arrays -> compact JSON, numbers as decimal.
See docs/outputs.md for the records and docs/redis.md for the keys.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from sinks.errors import SinkWriteError
from sinks.keys import Keys, part, partition_member, replica_member

ALERT_FIELDS = (
    "alert_id", "name", "status", "severity", "cluster", "topic", "partition", "replica",
    "subject", "started_ms", "ts", "reason",
)
ALERT_STATUSES = ("firing", "resolved")
QUARANTINE_FIELDS = ("stage", "reason", "cluster", "ts", "raw")
REPLICA_SERIES_FIELDS = ("lag_ms", "lag_messages", "leo")
PARTITION_SERIES_FIELDS = ("hw", "leader_leo", "hw_stalled_ms")


class RecordError(SinkWriteError, ValueError):
    """A record lacks a field the key layout needs, or has a value outside the contract."""


@dataclass(frozen=True)
class ScriptCall:
    script: str  # a name in sinks.redis_sink.SCRIPTS
    keys: tuple[str, ...]
    args: tuple[str, ...]
    kind: str  # which record kind the call writes, for the WriteReport


def encode(value: Any) -> str:
    """A record value as the string Redis stores."""
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
    rest = sorted(f for f in record if f not in set(first))
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


def replica_status_call(keys: Keys, record: Mapping[str, Any], series_maxlen: int) -> ScriptCall:
    _need(record, "replica_status", "cluster", "topic", "partition", "replica", "ts")
    c, t, p, r = (record[f] for f in ("cluster", "topic", "partition", "replica"))
    ts = _ts(record, "replica_status")
    hash_args = flatten(record)
    series_args = [a for f in REPLICA_SERIES_FIELDS if f in record for a in (f, encode(record[f]))]
    index = [
        (keys.clusters(), part(c)), (keys.topics(c), part(t)),
        (keys.partitions(c), partition_member(t, p)), (keys.topic_partitions(c, t), part(p)),
        (keys.replicas(c, t, p), part(r)),
    ]
    # Kafka counts a follower outside the ISR as out of sync.
    membership = [(keys.out_of_sync(c), replica_member(t, p, r), not record.get("in_isr", False))]
    return _status_call(
        "replica_status", keys.replica(c, t, p, r), keys.replica_series(c, t, p, r),
        ts, series_maxlen, hash_args, series_args, index, membership,
    )


def partition_status_call(keys: Keys, record: Mapping[str, Any], series_maxlen: int) -> ScriptCall:
    _need(record, "partition_status", "cluster", "topic", "partition", "ts")
    c, t, p = (record[f] for f in ("cluster", "topic", "partition"))
    ts = _ts(record, "partition_status")
    series_args = [a for f in PARTITION_SERIES_FIELDS if f in record for a in (f, encode(record[f]))]
    if isinstance(record.get("isr"), (list, tuple)):
        series_args += ["isr_size", str(len(record["isr"]))]
    member = partition_member(t, p)
    index = [
        (keys.clusters(), part(c)), (keys.topics(c), part(t)),
        (keys.partitions(c), member), (keys.topic_partitions(c, t), part(p)),
    ]
    membership = [
        (keys.under_replicated(c), member, bool(record.get("under_replicated"))),
        (keys.under_min_isr(c), member, bool(record.get("under_min_isr"))),
    ]
    return _status_call(
        "partition_status", keys.partition(c, t, p), keys.partition_series(c, t, p),
        ts, series_maxlen, flatten(record), series_args, index, membership,
    )


def prune_replicas_call(keys: Keys, record: Mapping[str, Any]) -> ScriptCall | None:
    """Drop followers that left the assignment; None when the record lists no replicas."""
    replicas = record.get("replicas")
    if not isinstance(replicas, (list, tuple)):
        return None
    c, t, p = (record[f] for f in ("cluster", "topic", "partition"))
    return ScriptCall(
        "prune_replicas",
        (keys.partition(c, t, p), keys.replicas(c, t, p), keys.out_of_sync(c)),
        (str(_ts(record, "partition_status")), f"{partition_member(t, p)}:", *(part(r) for r in replicas)),
        "partition_status",
    )


def _status_call(kind, hash_key, series_key, ts, maxlen, hash_args, series_args, index, membership):
    set_keys: list[str] = []

    def key_number(key: str) -> str:
        if key not in set_keys:
            set_keys.append(key)
        return str(set_keys.index(key) + 3)  # KEYS 1 and 2 are the hash and the series

    index_args = [a for key, member in index for a in (key_number(key), member)]
    member_args = [a for key, member, on in membership for a in (key_number(key), member, _flag(on))]
    args = (
        str(ts), str(maxlen), str(len(hash_args)), str(len(series_args)), str(len(index)),
        *hash_args, *series_args, *index_args, *member_args,
    )
    return ScriptCall("apply_status", (hash_key, series_key, *set_keys), args, kind)


def alert_call(keys: Keys, alert: Mapping[str, Any], seen_ttl_s: int, maxlen: int) -> ScriptCall:
    _need(alert, "alert", "alert_id", "status", "cluster")
    status = alert["status"]
    if status not in ALERT_STATUSES:
        raise RecordError(f"alert {alert['alert_id']} has status {status!r}, not one of {ALERT_STATUSES}")
    alert_id, cluster = str(alert["alert_id"]), alert["cluster"]
    body = json.dumps(dict(alert), separators=(",", ":"), sort_keys=True)
    return ScriptCall(
        "write_alert",
        (
            keys.alert_seen(alert_id, status), keys.alert_seen(alert_id, "resolved"),
            keys.alerts_stream(), keys.alerts_firing(), keys.alerts_firing_in(cluster),
        ),
        (alert_id, status, body, str(seen_ttl_s), str(maxlen), keys.alerts_channel(),
         *flatten(alert, ALERT_FIELDS)),
        "alerts",
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


def quarantine_call(keys: Keys, record: Mapping[str, Any], record_id: str, seen_ttl_s: int,
                    maxlen: int) -> ScriptCall:
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
            keys.cluster_series(cluster), keys.under_replicated(cluster), keys.under_min_isr(cluster),
            keys.out_of_sync(cluster), keys.alerts_firing_in(cluster),
        ),
        (str(ts), str(maxlen)),
        "cluster",
    )
