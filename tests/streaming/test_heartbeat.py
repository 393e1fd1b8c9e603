"""The heartbeat and MonitorLagging decisions, pure: progress dicts as Spark reports them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from replmon.state.alerts import SEVERITY, alert_id
from replmon.streaming.heartbeat import (
    Heartbeat,
    LaggingAlert,
    lagging_reason,
    next_heartbeat,
    parse_spark_time,
)

T = 1_795_000_000_000  # a wall-clock ms
START = Heartbeat(query="replmon", at_ms=T, running=True, started_ms=T, restarts=0)


def progress(batch_id, at_ms, rows, event_max_ms=None, duration_ms=800):
    def iso(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

    p = {
        "batchId": batch_id,
        "timestamp": iso(at_ms),
        "numInputRows": rows,
        "inputRowsPerSecond": 120.0,
        "processedRowsPerSecond": 150.5,
        "durationMs": {"triggerExecution": duration_ms},
    }
    if event_max_ms is not None:
        p["eventTime"] = {"max": iso(event_max_ms), "watermark": iso(0)}
    return p


def test_spark_timestamps_parse_to_epoch_ms():
    assert parse_spark_time("2026-11-23T12:00:00.123Z") == 1_795_435_200_123
    assert parse_spark_time(None) is None


def test_a_batch_with_input_sets_the_event_time_lag_from_the_batch_time():
    hb = next_heartbeat(
        START, progress(4, T + 5_000, 100, event_max_ms=T + 2_000), now_ms=T + 6_000, running=True, restarts=0
    )
    assert (hb.last_batch_id, hb.last_batch_ms, hb.batch_duration_ms) == (4, T + 5_000, 800)
    assert (hb.event_time_max_ms, hb.event_time_lag_ms) == (T + 2_000, 3_000)
    assert (hb.input_rows_per_s, hb.processed_rows_per_s, hb.at_ms) == (120.0, 150.5, T + 6_000)


def test_an_idle_trigger_keeps_the_last_event_time_lag():
    # No input: nothing is behind; the lag of the last batch that read something stands.
    busy = next_heartbeat(
        START, progress(4, T + 5_000, 100, event_max_ms=T + 2_000), now_ms=T + 6_000, running=True, restarts=0
    )
    idle = next_heartbeat(busy, progress(5, T + 60_000, 0), now_ms=T + 61_000, running=True, restarts=0)
    assert idle.last_batch_ms == T + 60_000 and idle.last_input_rows == 0
    assert idle.event_time_lag_ms == 3_000


def test_no_progress_yet_keeps_what_was_known():
    hb = next_heartbeat(START, None, now_ms=T + 1_000, running=False, restarts=2)
    assert hb.last_batch_ms is None and (hb.running, hb.restarts, hb.at_ms) == (False, 2, T + 1_000)
    assert hb.as_fields()["last_batch_ms"] == "" and hb.as_fields()["running"] == "0"


LIMITS = dict(stalled_after_ms=60_000, max_event_lag_ms=300_000)


@pytest.mark.parametrize(
    "hb, expected, why",
    [
        (START, None, "just started: nothing is late yet"),
        (
            Heartbeat("replmon", T + 61_000, True, T, 0),
            "completed no batch for 61 s",
            "no batch since the start, past the limit",
        ),
        (Heartbeat("replmon", T + 59_000, True, T, 0), None, "no batch yet, but within the limit"),
        (
            Heartbeat("replmon", T + 200_000, False, T, 3, last_batch_ms=T + 100_000),
            "query not running (3 restarts)",
            "restarting: stopped for 100 s",
        ),
        (
            Heartbeat("replmon", T + 20_000, True, T, 0, last_batch_ms=T + 10_000, event_time_lag_ms=301_000),
            "301 s behind the wall clock",
            "events too old",
        ),
        (
            Heartbeat("replmon", T + 20_000, True, T, 0, last_batch_ms=T + 10_000, event_time_lag_ms=300_000),
            None,
            "exactly at the lag limit is not behind",
        ),
    ],
)
def test_lagging_reason(hb, expected, why):
    reason = lagging_reason(hb, **LIMITS)
    if expected is None:
        assert reason is None, why
    else:
        assert reason is not None and expected in reason, why


def test_event_lag_check_can_be_switched_off():
    hb = Heartbeat("replmon", T + 20_000, True, T, 0, last_batch_ms=T + 10_000, event_time_lag_ms=10**9)
    assert lagging_reason(hb, stalled_after_ms=60_000, max_event_lag_ms=0) is None


def test_lagging_fires_once_and_resolves_once_with_a_stable_id():
    alert = LaggingAlert("replmon")
    fired = alert.update("stalled", T)
    assert alert.update("still stalled", T + 10_000) is None
    resolved = alert.update(None, T + 20_000)
    assert alert.update(None, T + 30_000) is None
    expected_id = alert_id("MonitorLagging", "replmon/replmon", T)
    assert (fired["alert_id"], fired["status"], fired["ts"], fired["reason"]) == (
        expected_id,
        "firing",
        T,
        "stalled",
    )
    assert (resolved["alert_id"], resolved["status"], resolved["started_ms"], resolved["ts"]) == (
        expected_id,
        "resolved",
        T,
        T + 20_000,
    )
    assert set(fired) == {
        "alert_id",
        "name",
        "status",
        "severity",
        "cluster",
        "topic",
        "partition",
        "replica",
        "broker",
        "subject",
        "started_ms",
        "ts",
        "reason",
        "cause",
        "caused_by",
        "root_cause",
        "notify",
        "silenced_by",
    }
    assert fired["notify"] is True and fired["root_cause"] is True, "replmon down always pages"
    again = alert.update("stalled again", T + 40_000)
    assert again["alert_id"] != expected_id, "a new episode has a new id"


def test_lagging_texts_in_full():
    # the templates of texts.py, as the supervisor has always written them
    stalled = Heartbeat("replmon", T + 61_000, True, T, 0)
    behind = Heartbeat("replmon", T + 20_000, True, T, 0, last_batch_ms=T + 10_000, event_time_lag_ms=301_000)
    assert lagging_reason(stalled, **LIMITS) == (
        "query replmon has completed no batch for 61 s (limit 60 s); query running"
    )
    assert lagging_reason(behind, **LIMITS) == (
        "query replmon is 301 s behind the wall clock in event time (limit 300 s)"
    )
    alert = LaggingAlert("replmon")
    alert.update("stalled", T)
    assert alert.update(None, T + 1)["reason"] == "query replmon is keeping up again"


def test_lagging_record_is_an_alert_record_of_its_row():
    fired = LaggingAlert("replmon").update("stalled", T)
    assert fired == {
        "alert_id": alert_id("MonitorLagging", "replmon/replmon", T),
        "name": "MonitorLagging",
        "status": "firing",
        "severity": "critical",  # SEVERITY, the rules table's column (state/alert_rules.py)
        "cluster": "replmon",
        "topic": None,
        "partition": None,
        "replica": None,
        "broker": None,
        "subject": "replmon/replmon",
        "started_ms": T,
        "ts": T,
        "reason": "stalled",
        "cause": "monitor",
        "caused_by": None,
        "root_cause": True,
        "notify": True,
        "silenced_by": [],
    }
    assert SEVERITY["MonitorLagging"] == "critical"
