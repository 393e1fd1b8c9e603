"""RedisSink: writes one micro-batch of engine outputs to Redis.

`foreachBatch` is at-least-once, so every write is idempotent (sinks/lua.py): a replayed
batch writes nothing twice. The index sets a status joins are written the first time this
process writes its hash (`RedisSink._indexed`), and again when Redis says the hash was gone.
The sink only sends: it pipelines script calls in chunks, retries a chunk a bounded number of
times when Redis cannot be reached, then raises SinkUnavailable so that the Spark batch fails
and is replayed. It never drops a record silently.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import redis
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, PositiveInt, field_validator
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    NoPermissionError,
    ReadOnlyError,
    ResponseError,
)

from replmon.sinks import lua
from replmon.sinks import redis_records as rec
from replmon.sinks.errors import SinkAuthError, SinkUnavailable, SinkWriteError
from replmon.sinks.keys import DEFAULT_PREFIX, Keys

log = logging.getLogger(__name__)

SCRIPTS = {
    "apply_statuses": lua.APPLY_STATUSES,
    "append_points": lua.APPEND_POINTS,
    "write_alert": lua.WRITE_ALERT,
    "write_quarantine": lua.WRITE_QUARANTINE,
    "cluster_point": lua.CLUSTER_POINT,
    "write_verdict": lua.WRITE_VERDICT,
}

# Worth another try: the server is unreachable, timed out, loading, or a replica mid-failover.
RETRYABLE = (redis.ConnectionError, redis.TimeoutError, ReadOnlyError)
# Never worth another try (AuthenticationError is a ConnectionError, so it is checked first).
AUTH_FAILURES = (AuthenticationError, AuthorizationError, NoPermissionError)


class RedisSinkSettings(BaseModel):
    """How the sink writes. Stream lengths are approximate bounds (XADD MAXLEN ~)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prefix: str = DEFAULT_PREFIX
    alerts_maxlen: PositiveInt = 100_000
    series_maxlen: PositiveInt = 4_096  # per replica/partition series stream
    cluster_series_maxlen: PositiveInt = 100_000
    quarantine_maxlen: PositiveInt = 10_000
    seen_ttl_s: PositiveInt = 7 * 24 * 3600  # how long a replay is recognised as one
    chunk_size: PositiveInt = 2_000  # records per pipeline round trip
    statuses_per_call: PositiveInt = 100  # status records per script run (Redis is busy meanwhile)
    retries: NonNegativeInt = 3  # further attempts of a chunk after the first
    backoff_initial_s: PositiveFloat = 0.2
    backoff_max_s: PositiveFloat = 5.0
    cluster_series: bool = Field(default=True, description="append a point of counts per cluster")
    # status hashes whose index adds this process remembers having sent (about 150 B each; a
    # cluster of 100k partitions of RF 3 has 300k); the oldest is forgotten first, and a
    # forgotten one costs only its adds sent again
    indexed_max: PositiveInt = 500_000

    @field_validator("prefix")
    @classmethod
    def _prefix_is_a_key_part(cls, prefix: str) -> str:
        Keys(prefix)  # raises ValueError with the reason
        return prefix


@dataclass(frozen=True)
class WriteReport:
    """What one write_batch did. 'skipped' means already written, or older than stored."""

    batch_id: int
    alerts_written: int = 0
    alerts_skipped: int = 0
    partition_status_written: int = 0
    partition_status_skipped: int = 0
    replica_status_written: int = 0
    replica_status_skipped: int = 0
    quarantine_written: int = 0
    quarantine_skipped: int = 0
    alerts_notified: int = 0
    series_points_written: int = 0
    cluster_points_written: int = 0
    indexes_rewritten: int = 0  # status records sent again with their index adds (their hash was gone)
    verdicts_written: int = 0
    round_trips: int = 0

    @property
    def written(self) -> int:
        return (
            self.alerts_written
            + self.partition_status_written
            + self.replica_status_written
            + self.quarantine_written
        )

    @property
    def skipped(self) -> int:
        return (
            self.alerts_skipped
            + self.partition_status_skipped
            + self.replica_status_skipped
            + self.quarantine_skipped
        )


class RedisSink:
    """Writes micro-batches to Redis through the given client (see sinks.redis_client)."""

    def __init__(
        self,
        client: redis.Redis,
        settings: RedisSinkSettings | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self._settings = settings or RedisSinkSettings()
        self._keys = Keys(self._settings.prefix)
        self._sleep = sleep
        self._scripts = {name: client.register_script(src) for name, src in SCRIPTS.items()}
        # status hash key -> the replicas its index was last pruned to (partition statuses; None
        # for a replica's): its index adds are sent once per process, the prune when they change
        self._indexed: dict[str, tuple | None] = {}

    @property
    def client(self) -> redis.Redis:
        return self._client

    @property
    def keys(self) -> Keys:
        return self._keys

    def write_batch(
        self,
        batch_id: int,
        alerts: list[dict],
        partition_status: list[dict],
        replica_status: list[dict],
        quarantine: list[dict],
        clocks: dict[str, int] | None = None,
        series_points: list[dict] | None = None,
        verdicts: list[dict] | None = None,
    ) -> WriteReport:
        """Write one micro-batch; safe to call again with the same batch. `clocks`: each
        cluster's newest event time in the batch beyond its records' (a healthy cluster whose
        statuses did not change still gets its cluster series point). `series_points`: the
        healthy partitions' points (docs/outputs.md). `verdicts`: the restart gate's, one per
        broker (state/restart_gate.py)."""
        counts: Counter[str] = Counter()
        lost: list[rec.ScriptCall] = []
        for chunk in _round_trips(
            self._calls(
                batch_id,
                alerts,
                partition_status,
                replica_status,
                quarantine,
                clocks or {},
                series_points,
                verdicts or [],
            ),
            self._settings.chunk_size,
        ):
            results = self._execute(batch_id, chunk)
            counts["round_trips"] += 1
            for call, result in zip(chunk, results, strict=True):
                if call.script == "apply_statuses":
                    result = _status_results(result)
                    lost += self._remember_indexed(call, result)
                _count(counts, call, result)
        if lost:  # hashes that were gone from Redis: their records again, with their index adds
            self._execute(batch_id, lost)
            counts["round_trips"] += 1
            counts["indexes_rewritten"] += sum(call.records for call in lost)
            for call in lost:
                self._remember_indexed(call, [(1, 0, 0)] * call.records)
        report = WriteReport(batch_id=batch_id, **counts)
        log.info(
            "batch %d: wrote %d records, skipped %d (replayed or older), %d series points",
            batch_id,
            report.written,
            report.skipped,
            report.series_points_written,
        )
        return report

    def _known(self, spec: rec.StatusSpec) -> bool:
        """Whether this process sent the hash's index adds (and its prune, to these replicas)."""
        if spec.hash_key not in self._indexed:
            return False
        return spec.prune is None or self._indexed[spec.hash_key] == tuple(spec.prune[3])

    def _remember_indexed(self, call: rec.ScriptCall, result) -> list[rec.ScriptCall]:
        """Note the hashes whose index adds went out (or were out already); the records whose
        hash was gone though their adds were left out, as one call with the adds."""
        again = []
        for spec, known, (_, _, wanted) in zip(call.specs, call.known, result, strict=True):
            if known and wanted:
                self._indexed.pop(spec.hash_key, None)
                again.append(spec)
            elif not known:
                self._indexed[spec.hash_key] = tuple(spec.prune[3]) if spec.prune is not None else None
        while len(self._indexed) > self._settings.indexed_max:
            del self._indexed[next(iter(self._indexed))]  # the oldest
        if not again:
            return []
        return [rec.status_call(call.kind, again, self._settings.series_maxlen)]

    def _calls(
        self, batch_id, alerts, partition_status, replica_status, quarantine, clocks, series_points, verdicts
    ) -> Iterator[rec.ScriptCall]:
        s, keys = self._settings, self._keys
        for kind, records, spec in (
            ("partition_status", partition_status, rec.partition_status_spec),
            ("replica_status", replica_status, rec.replica_status_spec),
        ):
            for group in _chunks(records, s.statuses_per_call):
                specs = [spec(keys, record) for record in group]
                yield rec.status_call(kind, specs, s.series_maxlen, [self._known(x) for x in specs])
        for alert in sorted(alerts, key=rec.alert_order):
            yield rec.alert_call(keys, alert, s.seen_ttl_s, s.alerts_maxlen)
            if alert.get("notify"):
                yield rec.notify_call(keys, alert, s.seen_ttl_s, s.alerts_maxlen)
        ids = rec.quarantine_record_ids(batch_id, quarantine)
        for record, record_id in zip(quarantine, ids, strict=True):
            yield rec.quarantine_call(keys, record, record_id, s.seen_ttl_s, s.quarantine_maxlen)
        if s.cluster_series:
            newest = _newest_per_cluster(partition_status, replica_status, alerts, series_points or [])
            for cluster, ts in clocks.items():
                newest[cluster] = max(ts, newest.get(cluster, ts))
            for cluster, ts in sorted(newest.items()):
                yield rec.cluster_point_call(keys, cluster, ts, s.cluster_series_maxlen)
        for verdict in verdicts:
            yield rec.verdict_call(keys, verdict)
        # Last: the bulk of a busy batch, and no alert waits on a healthy partition's points.
        for group in _chunks(series_points or [], s.statuses_per_call):
            yield rec.points_call(keys, group, s.series_maxlen)

    def _execute(self, batch_id: int, chunk: list[rec.ScriptCall]) -> list[Any]:
        """One pipeline round trip, retried with capped exponential backoff."""
        s = self._settings
        for attempt in range(s.retries + 1):
            try:
                pipe = self._client.pipeline(transaction=False)
                for call in chunk:
                    self._scripts[call.script](keys=call.keys, args=call.args, client=pipe)
                return pipe.execute()
            except AUTH_FAILURES as exc:
                raise SinkAuthError(f"batch {batch_id}: Redis refused the sink's user: {exc}") from exc
            except RETRYABLE as exc:
                if attempt == s.retries:
                    raise SinkUnavailable(
                        f"batch {batch_id}: Redis unreachable after {attempt + 1} attempts: {exc}"
                    ) from exc
                delay = min(s.backoff_max_s, s.backoff_initial_s * 2**attempt)
                log.warning(
                    "batch %d: Redis write failed (%s), attempt %d of %d, retrying in %.2fs",
                    batch_id,
                    exc,
                    attempt + 1,
                    s.retries + 1,
                    delay,
                )
                self._sleep(delay)
            except ResponseError as exc:
                if _is_acl_refusal(exc):  # a command inside a script the user may not run
                    raise SinkAuthError(
                        f"batch {batch_id}: the sink's Redis user lacks a permission: {exc}"
                    ) from exc
                raise SinkWriteError(f"batch {batch_id}: Redis refused a write: {exc}") from exc
        raise AssertionError("unreachable")


def _is_acl_refusal(exc: ResponseError) -> bool:
    text = str(exc)
    return "NOPERM" in text or "can't run this command" in text or "no permissions to access" in text


def _newest_per_cluster(*kinds: list[dict]) -> dict[str, int]:
    """The newest event time of each cluster in the batch: where its counts point goes."""
    newest: dict[str, int] = {}
    for records in kinds:
        for record in records:
            cluster, ts = record.get("cluster"), record.get("ts")
            if cluster is not None and ts is not None:
                newest[cluster] = max(int(ts), newest.get(cluster, int(ts)))
    return newest


def _status_results(reply: str | bytes) -> list[tuple[int, int, int]]:
    """APPLY_STATUSES' reply (sinks/lua.py): (applied, point appended, index wanted) per record."""
    text = reply.decode() if isinstance(reply, bytes) else reply
    return [(int(text[i]), int(text[i + 1]), int(text[i + 2])) for i in range(0, len(text), 3)]


def _count(counts: Counter[str], call: rec.ScriptCall, result: Any) -> None:
    if call.script == "apply_statuses":
        for applied, appended, _ in result:
            counts[f"{call.kind}_{'written' if applied else 'skipped'}"] += 1
            counts["series_points_written"] += appended
    elif call.script == "append_points":
        counts["series_points_written"] += result
    elif call.kind == "notified":
        counts["alerts_notified"] += int(bool(result))
    elif call.script in ("write_alert", "write_quarantine"):
        counts[f"{call.kind}_{'written' if result else 'skipped'}"] += 1
    elif call.script == "cluster_point":
        counts["cluster_points_written"] += result
    elif call.script == "write_verdict":
        counts["verdicts_written"] += result


def _round_trips(calls: Iterable[rec.ScriptCall], size: int) -> Iterator[list[rec.ScriptCall]]:
    """Group calls into pipelines of about `size` records."""
    chunk: list[rec.ScriptCall] = []
    records = 0
    for call in calls:
        chunk.append(call)
        records += call.records
        if records >= size:
            yield chunk
            chunk, records = [], 0
    if chunk:
        yield chunk


T = TypeVar("T")


def _chunks(items: list[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
