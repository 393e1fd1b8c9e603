"""The query's wall-clock heartbeat and the `MonitorLagging` alert: pure functions of Spark's
progress reports (plain dicts) and the wall-clock time, passed in. No Spark, no I/O here: the
supervisor (streaming/supervise.py) reads the progress, the clock and writes the results.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from replmon.state import texts
from replmon.state.alerts import AlertRecord, alert_id, alert_record

ALERT_NAME = "MonitorLagging"  # its row (severity, cause, templates): state/alert_rules.py
CAUSE = "monitor"
# Query-level alerts are about replmon itself, not a monitored Kafka cluster: this is their
# `cluster` label, and the subject is "replmon/<query name>".
SELF_CLUSTER = "replmon"


@dataclass(frozen=True)
class Heartbeat:
    """One look at the query. Times are wall-clock ms since the epoch; None: not known yet."""

    query: str
    at_ms: int  # when this heartbeat was taken
    running: bool  # the query is active (not failed, not restarting)
    started_ms: int  # when the supervisor started (first query start)
    restarts: int  # query restarts since the supervisor started
    last_batch_id: int | None = None
    last_batch_ms: int | None = None  # when the last reported batch (or idle trigger) ran
    batch_duration_ms: int | None = None
    input_rows_per_s: float | None = None
    processed_rows_per_s: float | None = None
    last_input_rows: int | None = None
    event_time_max_ms: int | None = None  # newest event time of the last batch with input
    event_time_lag_ms: int | None = None  # wall clock at that batch minus that event time

    def as_fields(self) -> dict[str, str]:
        """Flat string fields (a Redis hash); unknown values are empty strings."""
        return {
            k: "" if v is None else str(int(v) if isinstance(v, bool) else v) for k, v in asdict(self).items()
        }


def parse_spark_time(text: str | None) -> int | None:
    """Spark's progress timestamps ('2026-11-23T12:00:00.123Z') to epoch ms."""
    if not text:
        return None
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def next_heartbeat(
    previous: Heartbeat, progress: dict[str, Any] | None, *, now_ms: int, running: bool, restarts: int
) -> Heartbeat:
    """Fold the latest progress report (StreamingQuery.lastProgress) into the heartbeat.
    Event-time figures only change on a batch that read input: an idle query is not behind."""
    hb = dict(asdict(previous), at_ms=now_ms, running=running, restarts=restarts)
    if progress:
        batch_ms = parse_spark_time(progress.get("timestamp"))
        rows = int(progress.get("numInputRows") or 0)
        hb.update(
            last_batch_id=progress.get("batchId"),
            last_batch_ms=batch_ms,
            batch_duration_ms=(progress.get("durationMs") or {}).get("triggerExecution"),
            input_rows_per_s=_rate(progress.get("inputRowsPerSecond")),
            processed_rows_per_s=_rate(progress.get("processedRowsPerSecond")),
            last_input_rows=rows,
        )
        newest = parse_spark_time((progress.get("eventTime") or {}).get("max"))
        if rows > 0 and newest is not None and batch_ms is not None:
            hb.update(event_time_max_ms=newest, event_time_lag_ms=max(0, batch_ms - newest))
    return Heartbeat(**hb)


def _rate(value) -> float | None:
    return None if value is None else round(float(value), 1)


def lagging_reason(hb: Heartbeat, *, stalled_after_ms: int, max_event_lag_ms: int) -> str | None:
    """Why the monitor is not keeping up, or None when it is.
    Stalled: no batch (nor idle trigger) reported for `stalled_after_ms`, counted from the last
    batch or, before the first one, from the supervisor's start. Behind: the newest event of the
    last batch with input was more than `max_event_lag_ms` old when that batch ran (0: off)."""
    since = hb.last_batch_ms if hb.last_batch_ms is not None else hb.started_ms
    silent_ms = hb.at_ms - since
    if silent_ms > stalled_after_ms:
        return texts.open_text(
            ALERT_NAME,
            "stalled",
            query=hb.query,
            silent=_seconds(silent_ms),
            limit=_seconds(stalled_after_ms),
            state="running" if hb.running else f"not running ({hb.restarts} restarts)",
        )
    if max_event_lag_ms and hb.event_time_lag_ms is not None and hb.event_time_lag_ms > max_event_lag_ms:
        return texts.open_text(
            ALERT_NAME,
            "behind",
            query=hb.query,
            lag=_seconds(hb.event_time_lag_ms),
            limit=_seconds(max_event_lag_ms),
        )
    return None


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.0f} s"


def subject(query: str) -> str:
    return f"{SELF_CLUSTER}/{query}"


def lagging_record(query: str, status: str, started_ms: int, ts: int, reason: str) -> AlertRecord:
    """An alert record in the format of every other alert (state/alerts.alert_record)."""
    subj = subject(query)
    return alert_record(
        alert_id(ALERT_NAME, subj, started_ms),
        ALERT_NAME,
        status,
        subj,
        (SELF_CLUSTER, None, None, None),
        started_ms,
        ts,
        reason,
        None,
        CAUSE,
    )


class LaggingAlert:
    """Fires once when the monitor starts lagging, resolves once when it is back."""

    def __init__(self, query: str) -> None:
        self.query = query
        self.started_ms: int | None = None

    def update(self, reason: str | None, now_ms: int) -> AlertRecord | None:
        """The transition this observation makes, if any."""
        if reason is not None and self.started_ms is None:
            self.started_ms = now_ms
            return lagging_record(self.query, "firing", now_ms, now_ms, reason)
        if reason is None and self.started_ms is not None:
            started, self.started_ms = self.started_ms, None
            return lagging_record(
                self.query,
                "resolved",
                started,
                now_ms,
                texts.close_text(ALERT_NAME, "keeping_up", query=self.query),
            )
        return None
