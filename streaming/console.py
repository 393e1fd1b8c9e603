"""What the terminal shows: replmon's own lines, not py4j's or Spark's, unless --verbose.

Every subcommand calls `setup_logging(verbose)` once, before Spark starts; the session builder
asks `spark_log_level()` and `spark_java_options()` for the JVM side.

Quiet (the default): warnings and errors only, on stderr, in a short format (replmon's own
per-batch INFO lines too: what a command has to say it prints); py4j at ERROR (at INFO it logs every
callback it serves: "Received command c on object id p0"). The JVM logs ERROR and above only,
from the first line: its log4j2 configuration is replaced before the JVM starts, so even
"Setting default log level to WARN" and the NativeCodeLoader warning stay off the console. (One
line is the JVM's own and cannot be configured away: "WARNING: Using incubator modules".)
Verbose: everything at INFO with timestamps and logger names, and Spark's own log4j defaults
with WARN.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

_state = {"verbose": False}
# Libraries that are chatty at INFO and say nothing a replmon user acts on.
_NOISY = {
    "py4j": logging.ERROR,
    "py4j.clientserver": logging.ERROR,
    "py4j.java_gateway": logging.ERROR,
    "pyspark": logging.WARNING,
    "kafka": logging.WARNING,
    "urllib3": logging.WARNING,
}
_QUIET_LOG4J2 = """\
# replmon's quiet console: Spark and its libraries log errors only (replmon --verbose: Spark's default).
# Spark prints "Setting default log level to ..." for an interactive (py)spark driver when the
# root level differs from its shell logger's: that logger is under org.apache, hence the
# explicit org.apache level equal to the root's.
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
# follow: the appender writes to whatever System.err is now, so that a stop can mute it
appender.console.follow = true
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.apache.name = org.apache
logger.apache.level = error
"""


class _ReplmonHandler(logging.StreamHandler):
    """replmon's own console handler, told apart from handlers others installed."""


def setup_logging(verbose: bool = False, stream: TextIO | None = None, prog: str = "replmon") -> None:
    """Configure the root logger once for a subcommand (idempotent: replaces replmon's handler).
    Quiet lines start with `prog`, the subcommand (`replmon run: ...`), like its error lines."""
    _state["verbose"] = verbose
    root = logging.getLogger()
    for h in list(root.handlers):
        if isinstance(h, _ReplmonHandler):
            root.removeHandler(h)
    handler = _ReplmonHandler(stream or sys.stderr)
    if verbose:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.setLevel(logging.INFO)
        for name in _NOISY:
            logging.getLogger(name).setLevel(logging.NOTSET)
    else:
        handler.setFormatter(logging.Formatter(f"{prog}: %(message)s"))
        root.setLevel(logging.WARNING)
        for name, level in _NOISY.items():
            logging.getLogger(name).setLevel(level)
    root.addHandler(handler)


def spark_log_level() -> str:
    """For SparkContext.setLogLevel once the session exists."""
    return "WARN" if _state["verbose"] else "ERROR"


def spark_java_options() -> str | None:
    """-D option for spark.driver.extraJavaOptions that makes the JVM quiet from its first line
    (None when verbose: Spark's own log4j2 defaults). The file is written to the temp folder:
    the configuration is data, not a path into replmon's installation. Its name holds a digest
    of its text, so that replmon versions running side by side never rewrite each other's."""
    if _state["verbose"]:
        return None
    digest = hashlib.sha256(_QUIET_LOG4J2.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"replmon-log4j2-quiet-{digest}.properties"
    if not path.is_file() or path.read_text() != _QUIET_LOG4J2:
        tmp = path.with_suffix(f".{id(path)}.tmp")
        tmp.write_text(_QUIET_LOG4J2)
        tmp.replace(path)
    return f"-Dlog4j.configurationFile={path.as_uri()}"


def silence_jvm_for_stop() -> None:
    """Before a stop the user asked for (Ctrl-C, SIGTERM): stopping a query interrupts its
    running tasks, which Spark logs as errors (e.g. TorrentBroadcast "Store broadcast ... fail");
    they say nothing about replmon's health, so the quiet console drops them: the JVM's
    System.err is replaced by a null stream, which the quiet configuration's console appender
    follows (one JVM-wide call, whatever log4j2 LoggerContext a logger belongs to). --verbose
    keeps them. Best effort: a JVM that is already going away is left alone."""
    if _state["verbose"]:
        return
    try:
        from pyspark import SparkContext

        context = SparkContext._active_spark_context
        jvm = None if context is None else context._jvm
        if jvm is None:
            return
        jvm.java.lang.System.setErr(jvm.java.io.PrintStream(jvm.java.io.OutputStream.nullOutputStream()))
    except Exception as exc:  # noqa: BLE001 - py4j raises several types while shutting down
        logging.getLogger(__name__).debug("could not silence the JVM's logs: %s", exc)


def mute_py4j_for_stop() -> None:
    """Once a stop is under way (a signal): py4j logs each connection the stopping JVM drops at
    ERROR with a traceback, which says nothing about replmon's health; the quiet console drops
    them (--verbose keeps them)."""
    if not _state["verbose"]:
        for name in ("py4j", "py4j.clientserver", "py4j.java_gateway"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def quiet_accumulator_server(stopped: Callable[[], bool]) -> None:
    """pyspark's accumulator server (a thread of the driver) prints a traceback to stderr when
    the JVM closes its connection. When `stopped()` says a stop signal explains it (the JVM
    went down with the signal), nothing is printed; otherwise it prints as before."""
    pyspark = sys.modules.get("pyspark")  # loaded by the session; nothing to do without one
    context = None if pyspark is None else pyspark.SparkContext._active_spark_context
    server = None if context is None else getattr(context, "_accumulatorServer", None)
    if server is None:
        return
    original = server.handle_error

    def handle_error(request, client_address) -> None:
        if not stopped():
            original(request, client_address)

    server.handle_error = handle_error
