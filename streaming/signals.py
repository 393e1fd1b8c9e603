"""Stopping a long-running command cleanly on SIGINT and SIGTERM (`replmon run`, `replmon collect`).

The signal may go to the process alone, or to its whole process group (Ctrl-C at a terminal,
`kill -- -PGID`, systemd's default KillMode, which signals every process of the unit). In a group
Spark's JVM, a child of replmon's, gets it too: SIGTERM stops the JVM while the query is being
stopped, and every py4j call in flight fails (the connection drops, or "Cannot call methods on
a stopped SparkContext"). Those failures are the stop itself, not a crash: `stopped_meanwhile`
tells them apart, and `stop_on_signals` mutes what pyspark and py4j would print about them.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

from replmon.streaming.console import mute_py4j_for_stop

# How long a failure on the way down waits for the signal that explains it: the JVM may see
# the signal (and drop its connections) before Python runs its handler in the main thread.
STOP_GRACE_S = 2.0


@contextlib.contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """SIGINT and SIGTERM set the yielded event, so that a running query is stopped cleanly.
    pyspark's own SIGINT handler calls into the JVM from inside the py4j call the main thread
    is blocked in (awaitTermination), which breaks that py4j connection."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum, frame) -> None:
        stop.set()
        mute_py4j_for_stop()

    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    _quiet_accumulator_server(stop)
    try:
        yield stop
    finally:
        for sig, handler_ in previous.items():
            signal.signal(sig, handler_)


def stopped_meanwhile(stop: threading.Event, grace_s: float = STOP_GRACE_S) -> bool:
    """After a failure: True when a stop signal came (or comes within `grace_s`), so that the
    failure is the JVM going down with it."""
    return stop.wait(grace_s)


def spark_shut_down(exc: BaseException) -> bool:
    """A query failure that says Spark itself was shut down (as a SIGTERM to the JVM does)."""
    text = str(exc)
    return "SparkContext was shut down" in text or "stopped SparkContext" in text


def _quiet_accumulator_server(stop: threading.Event) -> None:
    """pyspark's accumulator server (a thread of the driver) prints a traceback to stderr when
    the JVM closes its connection; after a stop signal that is the stop, and nothing is printed.
    Without a signal it prints as before. Nothing to do where Spark is not in use."""
    pyspark = sys.modules.get("pyspark")
    context = None if pyspark is None else pyspark.SparkContext._active_spark_context
    server = None if context is None else getattr(context, "_accumulatorServer", None)
    if server is None or getattr(server, "_replmon_quiet", False):
        return
    original = server.handle_error

    def handle_error(request, client_address) -> None:
        if not stopped_meanwhile(stop):
            original(request, client_address)

    server.handle_error = handle_error
    server._replmon_quiet = True
