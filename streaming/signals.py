"""Stopping a long-running command cleanly on SIGINT and SIGTERM (`replmon run`, `replmon collect`)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """SIGINT and SIGTERM set the yielded event, so that a running query is stopped cleanly.
    pyspark's own SIGINT handler calls into the JVM from inside the py4j call the main thread
    is blocked in (awaitTermination), which breaks that py4j connection."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in signals}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
