"""What a failed micro-batch hands to Spark (streaming/query.py guarded): short, so that Spark's
check for a stop (a regex that java.util.regex runs a few stack frames per character) cannot
overflow the stream thread's stack on a long error, and still telling a stop from a failure."""

from __future__ import annotations

import logging
import re

import pytest

from replmon.state.codec import StateFormatError, refusal_in
from replmon.streaming.query import INTERRUPTIONS, MAX_ERROR_CHARS, BatchFailed, guarded, short_error

# Spark's StreamExecution.PROXY_ERROR, as Python's re reads it
PROXY_ERROR = re.compile(
    r"py4j\.protocol\.Py4JJavaError: An error occurred while calling((.|\r\n|\r|\n)*)("
    + "|".join(re.escape(n) for n in INTERRUPTIONS)
    + ")"
)
FRAME = "\tat org.apache.spark.scheduler.DAGScheduler.runJob(DAGScheduler.scala:{})"
SPARK_TRACE = "\n".join(FRAME.format(i) for i in range(800))


def py4j_error(cause: str) -> Exception:
    return RuntimeError(
        "An error occurred while calling o123.toArrow.\n"
        f": org.apache.spark.SparkException: Job aborted.\n{SPARK_TRACE}\nCaused by: {cause}\n{SPARK_TRACE}"
    )


@pytest.mark.parametrize("name", INTERRUPTIONS)
def test_a_stop_stays_a_stop_in_a_short_text(name):
    exc = py4j_error(f"{name}\n\tat java.lang.Object.wait(Native Method)")
    assert len(str(exc)) > 50_000
    short = short_error(exc, 7)
    assert len(str(short)) <= MAX_ERROR_CHARS
    # what py4j hands back to Spark is the traceback's text: Spark must still see a stop in it
    assert PROXY_ERROR.search(f"Traceback (most recent call last):\n  ...\n{type(short).__name__}: {short}")
    assert name in str(short)


def test_a_failure_keeps_its_error_line_but_not_the_form_spark_scans():
    exc = py4j_error(
        "org.apache.spark.api.python.PythonException: Traceback:\n"
        "py4j.protocol.Py4JJavaError: An error occurred while calling o9.get\n"
        "replmon.sinks.errors.SinkUnavailable: Redis at 127.0.0.1:6379 unreachable after 4 attempts"
    )
    short = str(short_error(exc, 3))
    assert len(short) <= MAX_ERROR_CHARS
    assert "SinkUnavailable: Redis at 127.0.0.1:6379 unreachable" in short
    assert "batch 3 failed" in short
    assert "An error occurred while calling" not in short  # Spark's regex never even starts
    assert not any(name in short for name in INTERRUPTIONS)


def test_a_state_refusal_keeps_its_marker_for_the_supervisor():
    refused = StateFormatError("the checkpoint was written by format 9")
    exc = py4j_error(
        f"org.apache.spark.api.python.PythonException: {refused}\n  File x.py\nValueError: other"
    )
    short = str(short_error(exc, 1))
    assert refusal_in(short) == "the checkpoint was written by format 9"
    assert len(short) <= MAX_ERROR_CHARS


def test_guarded_raises_the_short_error_and_logs_the_whole_one(caplog):
    exc = py4j_error("replmon.sinks.errors.SinkUnavailable: down")

    def on_batch(df, batch_id):
        raise exc

    with (
        caplog.at_level(logging.ERROR, logger="replmon.streaming.query"),
        pytest.raises(BatchFailed) as raised,
    ):
        guarded(on_batch)(None, 5)
    assert raised.value.__suppress_context__  # the long error does not ride along to Spark
    assert "SinkUnavailable: down" in str(raised.value)
    assert any(r.exc_info and r.exc_info[1] is exc for r in caplog.records)  # whole, in the log


def test_guarded_passes_a_batch_through():
    seen = []
    guarded(lambda df, batch_id: seen.append(batch_id))(None, 9)
    assert seen == [9]


def test_a_job_the_stop_cancelled_is_a_stop():
    exc = py4j_error(
        "org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 9 cancelled Query q [id = x] was stopped"
    )
    short = str(short_error(exc, 9))
    assert PROXY_ERROR.search(f"BatchFailed: {short}") and len(short) <= MAX_ERROR_CHARS
