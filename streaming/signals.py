"""Stopping a long-running command cleanly on SIGINT and SIGTERM (`replmon run`, `replmon collect`).

The signal may go to the process alone, or to its whole process group (Ctrl-C at a terminal,
`kill -- -PGID`, systemd's default KillMode, which signals every process of the unit). Spark's
JVM, a child of replmon's, ignores SIGINT (pyspark) and SIGTERM (streaming/session.py
`jvm_ignores_sigterm`), so that replmon stops the query itself. A JVM that does go down with the
signal (one started some other way) makes every py4j call in flight fail (the connection drops,
or "Cannot call methods on a stopped SparkContext"). Those failures are the stop itself, not a
crash: `stopped_meanwhile` tells them apart (streaming/console.py mutes what pyspark and py4j
would print about them).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

# How long a failure on the way down waits for the signal that explains it: the JVM may see
# the signal (and drop its connections) before Python runs its handler in the main thread.
STOP_GRACE_S = 2.0


@contextlib.contextmanager
def stop_on_signals(on_signal: Callable[[], None] | None = None) -> Iterator[threading.Event]:
    """SIGINT and SIGTERM set the yielded event, so that a running query is stopped cleanly, and
    call `on_signal` (`replmon run`: console.mute_py4j_for_stop). pyspark's own SIGINT handler
    calls into the JVM from inside the py4j call the main thread is blocked in
    (awaitTermination), which breaks that py4j connection."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum, frame) -> None:
        stop.set()
        if on_signal is not None:
            on_signal()

    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, handler) for sig in signals}
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
