"""AlertmanagerSink: posts replmon's notified alerts to Prometheus Alertmanager's v2 API.

`POST /api/v2/alerts` takes a list of postable alerts: `labels`, `annotations`, `startsAt`,
`endsAt`, `generatorURL`. An alert is identified by its label set; posting it again refreshes
it, posting it with an `endsAt` in the past resolves it, and an alert that is not refreshed
resolves by itself after `resolve_timeout` (5 min by default), so the sink re-posts every
firing alert every `resend_interval_s` (well within it) until it resolves.

Only transitions with `notify` true are posted (docs/alerts.md: root causes and the critical
consequences that always page; silenced alerts are not). Posting is idempotent, so a replayed
micro-batch posts the same alerts again harmlessly. The sink only sends: after `retries` it
raises SinkUnavailable and the batch is replayed from the checkpoint.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveFloat, field_validator

from replmon.sinks.errors import SinkUnavailable, SinkWriteError

log = logging.getLogger(__name__)

# The labels of an alert record: what Alertmanager receives and what a silence matches
# (sinks/silences.py), one list.
LABELS = (
    "alertname",
    "cluster",
    "topic",
    "partition",
    "replica",
    "broker",
    "severity",
    "caused_by",
    "root_cause_id",
    "alert_id",
)


class AlertmanagerSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str  # e.g. http://127.0.0.1:9093 (no path)
    resend_interval_s: PositiveFloat = 60.0  # must stay well below Alertmanager's resolve_timeout
    timeout_s: PositiveFloat = 5.0
    retries: NonNegativeInt = 3
    backoff_s: PositiveFloat = 0.5
    generator_url: str = ""  # a link back (e.g. the Grafana dashboard)

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"alertmanager url must start with http:// or https://, got {url!r}")
        return url.rstrip("/")


def alert_labels(alert: Mapping) -> dict[str, str]:
    """The labels of an alert record, in LABELS' order. Values are strings; a null one is left
    out (Alertmanager treats an empty label as absent)."""
    values = {label: alert.get(label) for label in LABELS}
    values["alertname"] = alert.get("name")
    # the alert's root: grouping by it puts a root cause and its consequences together
    values["root_cause_id"] = alert.get("caused_by") or alert.get("alert_id")
    return {k: str(v) for k, v in values.items() if v is not None and v != ""}


def rfc3339(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def to_postable(alert: Mapping, generator_url: str = "") -> dict:
    """One replmon alert record as Alertmanager's postableAlert (pure): alert_labels, and the
    cause as an annotation (it may change during an episode; an alert's labels may not)."""
    labels = alert_labels(alert)
    annotations = {"summary": alert["reason"], "subject": alert["subject"]}
    if alert.get("cause"):
        annotations["cause"] = alert["cause"]
    body = {"labels": labels, "annotations": annotations, "startsAt": rfc3339(alert["started_ms"])}
    if alert["status"] == "resolved":
        body["endsAt"] = rfc3339(max(alert["ts"], alert["started_ms"]))
    if generator_url:
        body["generatorURL"] = generator_url
    return body


class AlertmanagerSink:
    """Posts notified transitions and keeps re-posting firing ones until they resolve."""

    def __init__(
        self,
        settings: AlertmanagerSettings,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._sleep = sleep
        self._clock = clock
        self._firing: dict[str, dict] = {}  # alert_id -> postable
        self._last_post = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def send(self, alerts: Iterable[Mapping]) -> int:
        """Post the notified transitions of one batch (plus every firing alert when a resend
        is due). Returns how many alerts were posted."""
        batch = []
        with self._lock:
            for alert in alerts:
                if alert["status"] == "updated" and alert["alert_id"] in self._firing:
                    # a notified alert's cause or counts moved: Alertmanager takes the new
                    # annotations for the same labels and notifies nobody again
                    body = to_postable(dict(alert, status="firing"), self._settings.generator_url)
                    body["labels"] = self._firing[alert["alert_id"]]["labels"]
                    self._firing[alert["alert_id"]] = body
                    batch.append(body)
                    continue
                if not alert.get("notify"):
                    continue
                body = to_postable(alert, self._settings.generator_url)
                if alert["status"] == "firing":
                    self._firing[alert["alert_id"]] = body
                else:
                    self._firing.pop(alert["alert_id"], None)
                batch.append(body)
            if self._clock() - self._last_post >= self._settings.resend_interval_s:
                posted = {id(b) for b in batch}
                batch += [b for b in self._firing.values() if id(b) not in posted]
        if batch:
            self._post(batch)
        return len(batch)

    def restore(self, alerts: Iterable[Mapping]) -> int:
        """Take over the firing alerts a previous run notified (the Redis sink's
        `alerts:notify:firing` hash), so that a restart keeps re-posting them."""
        with self._lock:
            for alert in alerts:
                if alert.get("status") == "firing" and alert["alert_id"] not in self._firing:
                    self._firing[alert["alert_id"]] = to_postable(alert, self._settings.generator_url)
            return len(self._firing)

    def resend(self) -> int:
        """Re-post every firing alert (Alertmanager resolves alerts it stops hearing about)."""
        with self._lock:
            batch = list(self._firing.values())
        if batch:
            self._post(batch)
        return len(batch)

    def firing(self) -> list[str]:
        with self._lock:
            return sorted(self._firing)

    def start(self) -> None:
        """Re-post firing alerts from a background thread while no batch runs."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._resend_loop, name="alertmanager-resend", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._settings.timeout_s * 2)

    def _resend_loop(self) -> None:
        while not self._stop.wait(self._settings.resend_interval_s / 2):
            if self._clock() - self._last_post >= self._settings.resend_interval_s:
                try:
                    self.resend()
                except SinkUnavailable as exc:  # the next batch or round tries again
                    log.warning("alertmanager resend failed: %s", exc)

    def _post(self, batch: list[dict]) -> None:
        s = self._settings
        data = json.dumps(batch).encode()
        for attempt in range(s.retries + 1):
            request = urllib.request.Request(
                f"{s.url}/api/v2/alerts",
                data=data,
                method="POST",
                headers={"Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=s.timeout_s) as response:
                    response.read()
                self._last_post = self._clock()
                log.info("posted %d alerts to Alertmanager", len(batch))
                return
            except urllib.error.HTTPError as exc:
                if exc.code == 400:  # Alertmanager refused the payload: a bug, not an outage
                    raise SinkWriteError(f"Alertmanager refused the alerts: {exc.read()[:500]!r}") from exc
                error: Exception = exc
            except (urllib.error.URLError, OSError) as exc:
                error = exc
            if attempt < s.retries:
                log.warning(
                    "Alertmanager post failed (%s), attempt %d of %d", error, attempt + 1, s.retries + 1
                )
                self._sleep(s.backoff_s * 2**attempt)
        raise SinkUnavailable(f"Alertmanager at {s.url} unreachable after {s.retries + 1} attempts: {error}")
