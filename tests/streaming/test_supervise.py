"""The supervisor's restart policy, with scripted stand-ins for a StreamingQuery (the real query
restarted through a Redis outage: tests/integration/test_outage.py)."""

from __future__ import annotations

import threading

import pytest
from pyspark.errors import StreamingQueryException

from replmon.streaming.settings import Supervise
from replmon.streaming.supervise import Outlets, Supervisor, restart_delay_s

FAST = dict(restart_backoff_initial_s=0.01, restart_backoff_max_s=0.02, heartbeat_interval_s=0.01)


class ScriptedQuery:
    """Polls `polls` times as running, then fails with `error` or ends (error None)."""

    def __init__(self, polls: int, error: str | None, progress: dict | None = None) -> None:
        self.polls, self.error, self.lastProgress = polls, error, progress
        self.isActive, self.stopped = True, False

    def awaitTermination(self, timeout):
        if self.stopped:
            return True
        if self.polls > 0:
            self.polls -= 1
            return False
        self.isActive = False
        if self.error:
            raise StreamingQueryException(message=self.error)
        return True

    def stop(self):
        self.stopped, self.isActive = True, False


def starter(queries):
    started = []

    def start():
        q = queries[len(started)]
        started.append(q)
        return q

    return start, started


@pytest.mark.parametrize(
    "n, expected, why",
    [
        (1, 1.0, "the first restart waits the initial backoff"),
        (2, 2.0, "doubles"),
        (4, 8.0, "keeps doubling"),
        (10, 60.0, "capped at the maximum"),
    ],
)
def test_restart_delay(n, expected, why):
    assert restart_delay_s(n, Supervise()) == expected, why


def test_a_failed_query_is_restarted_until_it_ends_and_each_restart_is_counted():
    queries = [
        ScriptedQuery(2, "SinkUnavailable: batch 3: Redis unreachable"),
        ScriptedQuery(0, "SinkUnavailable: batch 3: Redis unreachable"),
        ScriptedQuery(3, None),
    ]
    start, started = starter(queries)
    beats = []
    sup = Supervisor(
        start,
        Supervise(**FAST),
        name="q",
        once=True,
        stop=threading.Event(),
        outlets=Outlets(heartbeat=beats.append),
    )
    assert sup.run() == 0
    assert started == queries
    assert sup.report.restarts == 2
    assert all("Redis unreachable" in f for f in sup.report.failures)
    assert beats and beats[-1].restarts == 2


def test_gives_up_after_max_restarts_without_progress():
    queries = [ScriptedQuery(0, "SinkAuthError: refused") for _ in range(4)]
    start, started = starter(queries)
    sup = Supervisor(start, Supervise(max_restarts=2, **FAST), name="q", once=False, stop=threading.Event())
    assert sup.run() == 1
    assert len(started) == 3, "the first start and two restarts"


def test_progress_between_failures_resets_the_count_in_a_row():
    # Each query completes a batch before failing: never `max_restarts` failures in a row.
    queries = [ScriptedQuery(0, "boom", progress={"batchId": i}) for i in range(4)] + [ScriptedQuery(0, None)]
    start, _ = starter(queries)
    sup = Supervisor(start, Supervise(max_restarts=1, **FAST), name="q", once=True, stop=threading.Event())
    assert sup.run() == 0 and sup.report.restarts == 4


def test_a_stop_request_stops_the_running_query():
    stop = threading.Event()
    query = ScriptedQuery(10**9, None)
    sup = Supervisor(
        lambda: query,
        Supervise(**FAST),
        name="q",
        once=False,
        stop=stop,
        outlets=Outlets(heartbeat=lambda hb: stop.set()),
    )
    assert sup.run() == 0
    assert query.stopped


def test_a_stalled_query_fires_monitor_lagging_and_an_undeliverable_alert_is_kept():
    delivered, attempts = [], []

    def alert(record):
        attempts.append(record)
        if len(attempts) == 1:
            raise ConnectionError("Redis down")  # the first delivery fails...
        delivered.append(record)  # ...and is tried again on the next beat

    ticks = iter(range(10**6))
    query = ScriptedQuery(30, None)  # running, but never reports a batch
    sup = Supervisor(
        lambda: query,
        Supervise(stalled_after_s=5, **FAST),
        name="q",
        once=False,
        stop=threading.Event(),
        outlets=Outlets(alert=alert),
        clock=lambda: float(next(ticks)),
    )  # one second per look at the clock
    assert sup.run() == 0
    assert [a["status"] for a in sup.report.alerts] == ["firing"]
    assert [a["name"] for a in delivered] == ["MonitorLagging"]
    assert delivered[0]["subject"] == "replmon/q"


def test_a_failure_no_restart_can_mend_ends_the_run_with_its_reason():
    queries = [ScriptedQuery(0, "StateFormatError: checkpoint made with 64 buckets")]
    start, started = starter(queries)

    def fatal(exc: BaseException) -> str | None:
        return "refused" if "StateFormatError" in str(exc) else None

    sup = Supervisor(start, Supervise(**FAST), name="q", once=True, stop=threading.Event(), fatal=fatal)
    assert sup.run() == 2
    assert len(started) == 1 and sup.report.fatal == "refused" and sup.report.restarts == 0
