"""Consume the Redis alert stream and keep one Grafana region annotation per alert episode.

    replmon grafana-annotations            (settings: REPLMON_ANNOTATIONS__* and REPLMON_GRAFANA__*,
                                            read by streaming/settings.py's loaders)

A separate process from the streaming query: Grafana being slow or down never holds up the
Redis writes or the query. It reads `<prefix>:alerts` as a member of a consumer group, so it
resumes where the group stopped, several processes share the work, and an entry is
acknowledged only once Grafana holds its annotation. Entries a crashed member left pending are
taken over with XAUTOCLAIM after `claim_idle_ms`.

Idempotent by alert id: the annotation id is kept in Redis (`<prefix>:grafana:annotation:<id>`,
with a TTL), and when that is missing (lost, expired, or a crash between create and save) the
annotation is looked up in Grafana by its `alert_id:<id>` tag before one is created. A short
per-alert lock stops two members from creating the same episode at the same moment. Firing and
resolve commute: whichever arrives first creates the annotation, the resolve closes it.
"""

from __future__ import annotations

import json
import logging
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import redis
from pydantic import (
    BaseModel,
    ConfigDict,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    SecretStr,
    field_validator,
)

from replmon.sinks.grafana import GrafanaSettings, connect
from replmon.sinks.grafana_annotation_api import AnnotationApi, AnnotationRefused, GrafanaUnavailable
from replmon.sinks.grafana_annotations import (
    AlertRecordError,
    Annotation,
    Transition,
    create_body,
    patch_for,
    transition,
)
from replmon.sinks.keys import Keys
from replmon.sinks.redis_client import RedisConnectionSettings
from replmon.sinks.redis_sink import RedisSinkSettings

log = logging.getLogger(__name__)
# One stream entry as redis-py returns it: (entry id, {field: value}), undecoded; the fields are
# None for a pending entry that MAXLEN trimmed from the stream.
Entry = tuple[bytes, dict[bytes, bytes] | None]

RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class AnnotationConsumerSettings(BaseModel):
    """The consumer's side: its Redis, its group, its pace. Grafana's side is GrafanaSettings.
    The one statement of these settings and their defaults; the settings loader fills it from
    REPLMON_ANNOTATIONS__* (streaming/settings.load_annotation_settings): a sink reads no
    environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # The Redis the sink writes: redis_<name> is RedisConnectionSettings' <name>, and its default.
    redis_url: str = RedisConnectionSettings.model_fields["url"].default  # no password in it
    redis_username: str | None = None
    redis_password: SecretStr | None = None
    redis_ssl_ca_certs: str | None = None  # with a rediss:// url
    redis_ssl_certfile: str | None = None
    redis_ssl_keyfile: str | None = None
    key_prefix: str = RedisSinkSettings.model_fields["prefix"].default  # the Redis sink's prefix
    group: str = "grafana-annotations"
    consumer: str = socket.gethostname()  # a restarted member with the same name resumes its own entries
    start_id: str = "0"  # where a new group starts: '0' the whole stream, '$' new entries only
    count: PositiveInt = 100  # entries per read
    block_ms: PositiveInt = 2_000  # how long a read waits for new entries
    claim_idle_ms: PositiveInt = 60_000  # entries pending this long on another member are taken over
    lock_ms: PositiveInt = (
        120_000  # per-alert lock while its annotation is written (> a slow Grafana's retries)
    )
    retries: NonNegativeInt = 2  # further attempts of a Grafana call before backing off
    backoff_initial_s: PositiveFloat = 0.5
    backoff_max_s: PositiveFloat = 30.0
    mapping_ttl_s: PositiveInt = 30 * 24 * 3600  # how long alert id -> annotation id is kept
    dashboard_uid: str | None = None  # None: organization annotations (shown by tag on every board)
    quarantine_maxlen: PositiveInt = RedisSinkSettings.model_fields[
        "quarantine_maxlen"
    ].default  # the sink's stream

    @field_validator("key_prefix")
    @classmethod
    def _prefix_is_a_key_part(cls, prefix: str) -> str:
        Keys(prefix)
        return prefix

    @field_validator("start_id")
    @classmethod
    def _start_id(cls, value: str) -> str:
        if value != "$" and not all(p.isdigit() for p in value.split("-", 1)):
            raise ValueError("start_id is '0', '$' or a stream id such as 1700000000000-0")
        return value


def redis_connection(settings: AnnotationConsumerSettings) -> RedisConnectionSettings:
    """The consumer's Redis connection: its redis_<name> settings, by name."""
    prefix = "redis_"
    return RedisConnectionSettings(
        **{
            name.removeprefix(prefix): getattr(settings, name)
            for name in AnnotationConsumerSettings.model_fields
            if name.startswith(prefix)
        },
        client_name=f"replmon-annotations-{settings.consumer}",
    )


@dataclass
class PollReport:
    """What one poll did. `outage` means Grafana could not be reached: entries stay pending."""

    read: int = 0
    created: int = 0
    closed: int = 0
    unchanged: int = 0  # already in Grafana as it should be (replays, restarts)
    quarantined: int = 0
    trimmed: int = 0  # pending entries the stream no longer holds (MAXLEN trimming)
    deferred: int = 0  # another member holds the alert's lock
    outage: bool = False


class AnnotationConsumer:
    def __init__(
        self,
        client: redis.Redis,
        api: AnnotationApi,
        settings: AnnotationConsumerSettings,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = client
        self._api = api
        self._s = settings
        self._keys = Keys(settings.key_prefix)
        self._stream = self._keys.alerts_stream()
        self._sleep = sleep
        self._clock = clock
        self._claim_cursor = "0-0"
        self._release = client.register_script(RELEASE_LOCK)
        self._group_ready = False

    # --- the loop -----------------------------------------------------------------------
    def run(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        """Poll until should_stop(); back off (bounded) while Grafana or Redis is out. Auth errors raise."""
        delay = self._s.backoff_initial_s
        while not should_stop():
            try:
                report = self.poll_once()
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if isinstance(exc, redis.AuthenticationError):
                    raise
                log.warning("Redis unreachable (%s); next try in %.1fs", exc, delay)
                self._sleep(delay)
                delay = min(self._s.backoff_max_s, delay * 2)
                continue
            if report.outage:
                log.warning(
                    "Grafana unreachable: %d entries stay pending; next try in %.1fs", report.read, delay
                )
                self._sleep(delay)
                delay = min(self._s.backoff_max_s, delay * 2)
            else:
                delay = self._s.backoff_initial_s
                if report.deferred:
                    self._sleep(self._s.backoff_initial_s)

    def poll_once(self, block: bool = True) -> PollReport:
        """Handle this member's pending entries, then reclaimed ones, then new ones."""
        self._ensure_group()
        report = PollReport()
        try:
            entries = self._own_pending() or self._reclaim() or self._read_new(block)
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            log.warning(
                "consumer group %s on %s is gone (the stream was deleted?); creating it again",
                self._s.group,
                self._stream,
            )
            self._group_ready = False
            return report
        for entry_id, fields in entries:
            report.read += 1
            if not self._handle(entry_id, fields, report):
                break  # Grafana is out: the rest stay pending, in order
        return report

    def _ensure_group(self) -> None:
        if self._group_ready:
            return
        try:
            self._redis.xgroup_create(self._stream, self._s.group, id=self._s.start_id, mkstream=True)
            log.info("created consumer group %s on %s at %s", self._s.group, self._stream, self._s.start_id)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    def _own_pending(self) -> list[Entry]:
        """Entries delivered to this member and not acknowledged (before a restart, or an outage)."""
        return self._read("0", block=None)

    def _reclaim(self) -> list[Entry]:
        """Entries another member left pending for claim_idle_ms (it crashed or hangs)."""
        answer = self._redis.xautoclaim(
            self._stream,
            self._s.group,
            self._s.consumer,
            self._s.claim_idle_ms,
            start_id=self._claim_cursor,
            count=self._s.count,
        )
        cursor, claimed = answer[0], answer[1]
        deleted = answer[2] if len(answer) > 2 else []
        self._claim_cursor = cursor.decode() if isinstance(cursor, bytes) else cursor
        if deleted:  # claimed ids the stream no longer holds: nothing left to annotate
            log.warning(
                "%d pending alert entries were trimmed from %s before annotation: %s",
                len(deleted),
                self._stream,
                deleted[:5],
            )
            self._redis.xack(self._stream, self._s.group, *deleted)
        if claimed:
            log.info("took over %d pending alert entries from other members", len(claimed))
        return claimed

    def _read_new(self, block: bool) -> list[Entry]:
        return self._read(">", block=self._s.block_ms if block else None)

    def _read(self, start: str, block: int | None) -> list[Entry]:
        # RESP2, this client's protocol: [[stream, [(id, fields), ...]]], or [] when nothing came
        # (redis-py types the answer as the union of its RESP2 and RESP3 shapes)
        answer = cast(
            "list[tuple[bytes, list[Entry]]]",
            self._redis.xreadgroup(
                self._s.group, self._s.consumer, {self._stream: start}, count=self._s.count, block=block
            ),
        )
        return answer[0][1] if answer else []

    # --- one entry ------------------------------------------------------------------------
    def _handle(self, entry_id: bytes, fields: dict[bytes, bytes] | None, report: PollReport) -> bool:
        """False if Grafana is out (the entry stays pending); True when the entry is done with."""
        if not fields:  # pending, but trimmed from the stream meanwhile
            report.trimmed += 1
            log.warning("alert entry %s was trimmed from %s before annotation", entry_id, self._stream)
            self._ack(entry_id)
            return True
        status = {k.decode() if isinstance(k, bytes) else k: v for k, v in fields.items()}.get("status")
        if status in ("updated", b"updated"):
            # an open alert's cause or counts changed: the region it drew stands as it is
            self._ack(entry_id)
            return True
        try:
            t = transition(fields)
        except AlertRecordError as exc:
            self._quarantine(entry_id, fields, str(exc), report)
            return True
        token = uuid.uuid4().hex
        lock = self._keys.grafana_annotation_lock(t.alert_id)
        if not self._redis.set(lock, token, nx=True, px=self._s.lock_ms):
            report.deferred += 1
            return True  # stays pending; handled on a later poll
        try:
            outcome = self._with_retries(lambda: self._apply(t))
        except GrafanaUnavailable as exc:
            log.warning("alert %s (%s): %s", t.alert_id, t.status, exc)
            report.outage = True
            return False
        except AnnotationRefused as exc:
            self._quarantine(entry_id, fields, str(exc), report)
            return True
        finally:
            self._release(keys=[lock], args=[token])
        setattr(report, outcome, getattr(report, outcome) + 1)
        self._ack(entry_id)
        return True

    def _apply(self, t: Transition) -> str:
        """Make Grafana hold the annotation `t` implies. Returns created | closed | unchanged."""
        current = self._remembered(t.alert_id) or self._api.find(t.alert_id)
        if current is None:
            body = create_body(t, self._s.dashboard_uid)
            annotation_id = self._api.create(body)
            self._remember(t.alert_id, Annotation(annotation_id, body["time"], body["timeEnd"], body["text"]))
            log.info("alert %s: created annotation %d (%s)", t.alert_id, annotation_id, t.status)
            return "created"
        patch = patch_for(current, t)
        if patch is None:
            self._remember(t.alert_id, current)
            return "unchanged"
        self._api.patch(current.id, patch)
        self._remember(t.alert_id, Annotation(current.id, current.time, patch["timeEnd"], patch["text"]))
        log.info("alert %s: closed annotation %d", t.alert_id, current.id)
        return "closed"

    def _with_retries(self, call: Callable[[], str]) -> str:
        for attempt in range(self._s.retries + 1):
            try:
                return call()
            except GrafanaUnavailable:
                if attempt == self._s.retries:
                    raise
                self._sleep(min(self._s.backoff_max_s, self._s.backoff_initial_s * 2**attempt))
        raise AssertionError("unreachable")

    # --- Redis bookkeeping ----------------------------------------------------------------
    def _remembered(self, alert_id: str) -> Annotation | None:
        raw = self._redis.get(self._keys.grafana_annotation(alert_id))
        if raw is None:
            return None
        try:
            d = json.loads(raw)
            return Annotation(int(d["id"]), int(d["time"]), int(d["time_end"]), str(d["text"]))
        except (ValueError, KeyError, TypeError):
            log.warning(
                "alert %s: unreadable annotation mapping %r; looking it up in Grafana", alert_id, raw[:100]
            )
            return None

    def _remember(self, alert_id: str, a: Annotation) -> None:
        value = json.dumps({"id": a.id, "time": a.time, "time_end": a.time_end, "text": a.text})
        self._redis.set(self._keys.grafana_annotation(alert_id), value, ex=self._s.mapping_ttl_s)

    def _ack(self, entry_id) -> None:
        self._redis.xack(self._stream, self._s.group, entry_id)

    def _quarantine(self, entry_id, fields, reason: str, report: PollReport) -> None:
        """Set the entry aside with the reason (the sink's quarantine stream) and acknowledge it."""
        entry = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        raw = json.dumps(
            {
                (k.decode() if isinstance(k, bytes) else k): (
                    v.decode(errors="replace") if isinstance(v, bytes) else v
                )
                for k, v in (fields or {}).items()
            }
        )
        cluster = fields.get(b"cluster", fields.get("cluster", b"")) if fields else b""
        pipe = self._redis.pipeline(transaction=True)
        pipe.xadd(
            self._keys.quarantine_stream(),
            {
                "id": f"grafana-annotations-{entry}",
                "stage": "grafana-annotations",
                "reason": reason,
                "cluster": cluster,
                "ts": str(int(self._clock() * 1000)),
                "raw": raw,
            },
            maxlen=self._s.quarantine_maxlen,
            approximate=True,
        )
        pipe.incr(self._keys.quarantine_count())
        pipe.xack(self._stream, self._s.group, entry_id)
        pipe.execute()
        report.quarantined += 1
        log.error("alert entry %s set aside in %s: %s", entry, self._keys.quarantine_stream(), reason)


def build(
    settings: AnnotationConsumerSettings,
    grafana: GrafanaSettings,
    sleep: Callable[[float], None] = time.sleep,
) -> AnnotationConsumer:
    """The consumer of `settings`, writing to the Grafana of `grafana`."""
    from replmon.sinks.redis_client import build_client

    client = build_client(redis_connection(settings))
    return AnnotationConsumer(client, AnnotationApi(connect(grafana), grafana.url), settings, sleep=sleep)


def serve(consumer: AnnotationConsumer, once: bool = False) -> int:
    """`replmon grafana-annotations`: run until SIGTERM/SIGINT, or with `once` until nothing is
    pending (1 if Grafana was unavailable then). Raises GrafanaAuthError and Redis's
    AuthenticationError: no retry mends those."""
    import signal

    stopping = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.append(True))
    if once:
        while (report := consumer.poll_once(block=False)).read > report.deferred and not report.outage:
            pass
        return 1 if report.outage else 0
    consumer.run(should_stop=lambda: bool(stopping))
    return 0
