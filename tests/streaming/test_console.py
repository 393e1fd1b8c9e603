"""The quiet console (streaming/console.py): which log lines reach the terminal."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from replmon.streaming import console


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    before = (
        root.level,
        list(root.handlers),
        {n: logging.getLogger(n).level for n in ("py4j", "py4j.clientserver", "pyspark", "kafka")},
    )
    yield
    root.setLevel(before[0])
    root.handlers[:] = before[1]
    for name, level in before[2].items():
        logging.getLogger(name).setLevel(level)
    console._state["verbose"] = False


def _emit_all() -> None:
    logging.getLogger("py4j.clientserver").info("Received command c on object id p0")
    logging.getLogger("py4j.clientserver").warning("py4j warning")
    logging.getLogger("pyspark.sql").info("pyspark info")
    logging.getLogger("replmon.streaming.bridge").info("batch 3: alerts 2")
    logging.getLogger("replmon.streaming.cli").warning("a replmon warning")


@pytest.mark.parametrize(
    "verbose, shown, hidden",
    [
        # quiet: only what a user acts on; py4j's per-callback chatter is the line the issue quotes
        (False, ["a replmon warning"], ["Received command c", "py4j warning", "pyspark info", "batch 3"]),
        # verbose: everything at INFO, with logger names to tell them apart
        (
            True,
            [
                "Received command c",
                "py4j warning",
                "pyspark info",
                "batch 3",
                "a replmon warning",
                "py4j.clientserver",
            ],
            [],
        ),
    ],
)
def test_setup_logging_shows_and_hides(restore_logging, verbose, shown, hidden):
    out = io.StringIO()
    console.setup_logging(verbose, stream=out)
    _emit_all()
    text = out.getvalue()
    for s in shown:
        assert s in text
    for s in hidden:
        assert s not in text


def test_setup_logging_twice_keeps_one_handler(restore_logging):
    out = io.StringIO()
    console.setup_logging(False, stream=out)
    console.setup_logging(False, stream=out)
    logging.getLogger("replmon.x").warning("once")
    assert out.getvalue().count("once") == 1


def test_the_jvm_is_quiet_unless_verbose(restore_logging):
    console.setup_logging(False, stream=io.StringIO())
    option = console.spark_java_options()
    assert option.startswith("-Dlog4j.configurationFile=file:")
    path = option.split("=", 1)[1][len("file://") :]
    assert "logger.apache.level = error" in Path(path).read_text()
    assert console.spark_log_level() == "ERROR"
    console.setup_logging(True, stream=io.StringIO())
    assert console.spark_java_options() is None
    assert console.spark_log_level() == "WARN"


@pytest.mark.spark
def test_silence_for_stop_mutes_the_jvms_stderr_unless_verbose(spark, restore_logging):
    """A stop the user asked for mutes the JVM's System.err (which the quiet console appender
    follows); --verbose leaves it. The session's own System.err is put back afterwards."""
    system = spark.sparkContext._jvm.java.lang.System
    original = system.err
    try:
        console.setup_logging(verbose=True)
        console.silence_jvm_for_stop()
        assert system.err.equals(original)
        console.setup_logging(verbose=False)
        console.silence_jvm_for_stop()
        assert not system.err.equals(original)
    finally:
        system.setErr(original)


def test_the_quiet_appender_follows_system_err(restore_logging):
    """Without `follow`, log4j2's console appender keeps the stream it started with and the
    stop's muting would not reach it."""
    console.setup_logging(verbose=False)
    path = console.spark_java_options().split("=", 1)[1].removeprefix("file://")
    assert "appender.console.follow = true" in Path(path).read_text().splitlines()
