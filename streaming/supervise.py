"""Keeps the streaming query alive and says that it is.

A sink that stays down past its own bounded retries raises in foreachBatch, which ends the
query. The supervisor then restarts it from its checkpoint after a capped exponential backoff
(logged and counted): the failed batch replays, and the sinks' writes are idempotent, so nothing
is lost or written twice. Meanwhile it takes a wall-clock heartbeat of the query every
`heartbeat_interval_s` (logged, and written to Redis when configured) and fires `MonitorLagging`
when no batch completes for `stalled_after_s` or the events are too far behind the clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming import StreamingQuery

from replmon.state.alerts import AlertRecord
from replmon.streaming.console import silence_jvm_for_stop
from replmon.streaming.heartbeat import Heartbeat, LaggingAlert, lagging_reason, next_heartbeat
from replmon.streaming.settings import Supervise
from replmon.streaming.signals import STOP_GRACE_S, spark_shut_down, stopped_meanwhile

log = logging.getLogger(__name__)


def restart_delay_s(failures_in_row: int, conf: Supervise) -> float:
    """Backoff before the n-th restart in a row (1-based): initial, 2x, 4x, ... capped."""
    return min(conf.restart_backoff_max_s, conf.restart_backoff_initial_s * 2 ** max(0, failures_in_row - 1))


@dataclass
class Outlets:
    """Where the supervisor's own outputs go; each callable may raise (it is logged)."""

    heartbeat: Callable[[Heartbeat], None] | None = None
    alert: Callable[[dict], None] | None = None  # a MonitorLagging transition


@dataclass
class SupervisorReport:
    restarts: int = 0
    failures: list[str] = field(default_factory=list)
    alerts: list[AlertRecord] = field(default_factory=list)
    fatal: str | None = None  # why the supervisor gave up without restarting


class Supervisor:
    """Runs `start()`'s query until it ends on its own (a bounded run), `stop` is set, or
    `max_restarts` restarts in a row make no progress."""

    def __init__(
        self,
        start: Callable[[], StreamingQuery],
        conf: Supervise,
        *,
        name: str,
        once: bool,
        stop: threading.Event,
        outlets: Outlets | None = None,
        fatal: Callable[[BaseException], str | None] = lambda exc: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._start = start
        self._conf = conf
        self._name = name
        self._once = once
        self._stop = stop
        self._outlets = outlets or Outlets()
        self._fatal = fatal
        self._clock = clock
        self.report = SupervisorReport()
        self._lagging = LaggingAlert(name)
        self._pending_alerts: list[AlertRecord] = []
        self._heartbeat: Heartbeat | None = None
        self._next_heartbeat_s = 0.0

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def run(self) -> int:
        """0 when the query ended or was stopped; 1 when it gave up restarting; 2 when `fatal`
        named a failure that no restart can mend. A failure that a stop signal explains (the
        signal went to the whole process group, and Spark's JVM went down with it) is the stop."""
        try:
            return self._run()
        except Exception as exc:
            if not stopped_meanwhile(self._stop):
                raise
            log.info("query %s stopped with Spark's JVM (%s)", self._name, _first_line(exc))
            return 0

    def _run(self) -> int:
        query = self._start()
        self._heartbeat = Heartbeat(
            query=self._name, at_ms=self._now_ms(), running=True, started_ms=self._now_ms(), restarts=0
        )
        failures_in_row = 0
        known_batch = None  # the last batch id seen: a new one means the query made progress
        while True:
            try:
                return self._until_ended_or_stopped(query)
            except StreamingQueryException as exc:
                if (rc := self._not_restarted(query, exc)) is not None:
                    return rc
                failure = _first_line(exc)
            batch = _batch_id(query)
            failures_in_row = 1 if batch is not None and batch != known_batch else failures_in_row + 1
            known_batch = batch if batch is not None else known_batch
            self.report.restarts += 1
            self.report.failures.append(failure)
            if self._conf.max_restarts and failures_in_row > self._conf.max_restarts:
                log.error(
                    "query %s failed %d times in a row without completing a batch; giving "
                    "up (supervise.max_restarts = %d). Last failure: %s",
                    self._name,
                    failures_in_row,
                    self._conf.max_restarts,
                    failure,
                )
                self._tick(query, force=True)
                return 1
            delay = restart_delay_s(failures_in_row, self._conf)
            log.warning(
                "query %s failed: %s. Restart %d (%d in a row) from its checkpoint in %.1f s",
                self._name,
                failure,
                self.report.restarts,
                failures_in_row,
                delay,
            )
            if self._wait(query, delay):
                return 0
            restarted = self._restart(query)
            if restarted is None:
                return 0
            query = restarted

    def _until_ended_or_stopped(self, query: StreamingQuery) -> int:
        """Wait for the query with heartbeats until it ends on its own or `stop` is set (then
        stop it): 0. Its failure is raised (StreamingQueryException)."""
        poll_s = min(1.0, self._conf.heartbeat_interval_s)
        # pyspark takes float seconds (it multiplies them by 1000); its annotation says int
        while not query.awaitTermination(poll_s):  # type: ignore[arg-type]  # float seconds
            self._tick(query)
            if self._stop.is_set():
                log.info("stopping query %s (its checkpoint keeps its progress)", self._name)
                silence_jvm_for_stop()
                query.stop()
                self._tick(query, force=True)
                return 0
        self._tick(query, force=True)
        return 0  # ended on its own: a bounded (--once) run is done

    def _not_restarted(self, query: StreamingQuery, exc: StreamingQueryException) -> int | None:
        """The exit code when the query's failure ends the run: 0 when a stop signal explains it,
        2 when `fatal` names it as one no restart can mend; None: restart the query."""
        # the JVM stopped the query with the signal (a wait only when it says so)
        if stopped_meanwhile(self._stop, STOP_GRACE_S if spark_shut_down(exc) else 0):
            log.info("query %s stopped with Spark's JVM (%s)", self._name, _first_line(exc))
            return 0
        if (reason := self._fatal(exc)) is not None:
            log.error("query %s failed and cannot be restarted: %s", self._name, reason)
            self.report.fatal = reason
            self._tick(query, force=True)
            return 2
        return None

    def _restart(self, failed: StreamingQuery) -> StreamingQuery | None:
        """Start the query again; a failure to start is retried with the same backoff."""
        attempt = 0
        while True:
            try:
                query = self._start()
                log.info(
                    "query %s restarted from its checkpoint (restart %d)", self._name, self.report.restarts
                )
                return query
            except Exception as exc:  # noqa: BLE001 - any start failure is retried, logged
                attempt += 1
                delay = restart_delay_s(attempt + 1, self._conf)
                log.warning(
                    "query %s did not start again (%s); next try in %.1f s",
                    self._name,
                    _first_line(exc),
                    delay,
                )
                if self._wait(failed, delay):
                    return None

    def _wait(self, query: StreamingQuery, seconds: float) -> bool:
        """Sleep with heartbeats; True when a stop was asked for meanwhile."""
        deadline = self._clock() + seconds
        while (left := deadline - self._clock()) > 0:
            if self._stop.wait(min(left, 1.0)):
                return True
            self._tick(query)
        return self._stop.is_set()

    def _tick(self, query: StreamingQuery, force: bool = False) -> None:
        now_s = self._clock()
        if not force and now_s < self._next_heartbeat_s:
            return
        self._next_heartbeat_s = now_s + self._conf.heartbeat_interval_s
        now_ms = int(now_s * 1000)
        assert self._heartbeat is not None  # run() sets it before the first tick
        hb = next_heartbeat(
            self._heartbeat,
            query.lastProgress,
            now_ms=now_ms,
            running=query.isActive,
            restarts=self.report.restarts,
        )
        self._heartbeat = hb
        log.info(
            "heartbeat %s: running=%s batch=%s last_batch_ms=%s duration_ms=%s "
            "input/s=%s event_time_lag_ms=%s restarts=%d",
            hb.query,
            hb.running,
            hb.last_batch_id,
            hb.last_batch_ms,
            hb.batch_duration_ms,
            hb.input_rows_per_s,
            hb.event_time_lag_ms,
            hb.restarts,
        )
        _call(self._outlets.heartbeat, hb, "heartbeat")
        if not self._once:
            reason = lagging_reason(
                hb,
                stalled_after_ms=int(self._conf.stalled_after_s * 1000),
                max_event_lag_ms=int(self._conf.max_event_lag_s * 1000),
            )
            transition = self._lagging.update(reason, now_ms)
            if transition is not None:
                (log.error if transition["status"] == "firing" else log.warning)(
                    "%s %s: %s", transition["name"], transition["status"], transition["reason"]
                )
                self.report.alerts.append(transition)
                self._pending_alerts.append(transition)
        # Alerts that could not be delivered (say, Redis is down) are tried again next time.
        while self._pending_alerts and _call(self._outlets.alert, self._pending_alerts[0], "alert"):
            self._pending_alerts.pop(0)


def _call(outlet, value, what: str) -> bool:
    if outlet is None:
        return True
    try:
        outlet(value)
        return True
    except Exception as exc:  # noqa: BLE001 - an outlet failure must never end the monitor
        log.warning("could not write the %s: %s", what, _first_line(exc))
        return False


def _batch_id(query: StreamingQuery) -> int | None:
    progress = query.lastProgress
    return None if not progress else progress.get("batchId")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    lines = [line for line in text.splitlines() if line.strip()]
    # Spark wraps the Python error in a long trace: its last Python line says what failed.
    for line in reversed(lines):
        if "Error:" in line or "Unavailable:" in line:
            return line.strip()[:500]
    return lines[0][:500]
