"""`replmon run` interrupted as people and machines interrupt it, as a subprocess in its own
session (its own JVM), over the simulated `demo` cluster read one file per micro-batch:

- Ctrl-C in the middle of a batch (SIGINT to the whole process group, as a terminal sends it):
  exit 0 promptly, with no traceback and no flood of Spark/py4j error lines.
- SIGTERM to the whole process group (systemd's default KillMode, `kill -- -PGID`), which stops
  Spark's JVM too: the same, one line on stdout and nothing of py4j's on stderr.
- kill -9 in the middle of a batch, then a restart on the same checkpoint: every alert transition
  is in Redis exactly once, and Redis and the output files hold what an uninterrupted run over
  the same input gives.

A Redis restart during a run is tests/streaming/test_outage.py; a Kafka broker restart is
tests/faults/test_kafka_faults.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from replmon.sinks.keys import Keys
from tests.faults.reference import FILES, run_env
from tests.streaming.helpers import exactly_once, read_outputs, transition_key
from tests.streaming.test_outage import transitions_in_redis, wait_for

pytestmark = pytest.mark.spark


def start(tmp_path: Path, events: Path, out: Path, *args: str, **env: str) -> subprocess.Popen:
    """`replmon run` in a session of its own, so that a signal can go to its whole group."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "replmon.streaming.cli",
            "run",
            "--input",
            str(events),
            "--output",
            str(out),
            "--no-timeline",
            *args,
        ],
        cwd=tmp_path,
        env=run_env(REPLMON_SPARK__MAX_FILES_PER_TRIGGER="1", **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def batch_in_flight(checkpoint: Path, first: int = 0) -> int | None:
    """The id of a micro-batch (>= first) whose offsets are written and not yet committed."""
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    planned = {int(p.name) for p in offsets.glob("[0-9]*")} if offsets.exists() else set()
    done = {int(p.name) for p in commits.glob("[0-9]*")} if commits.exists() else set()
    running = sorted(b for b in planned - done if b >= first)
    return running[0] if running else None


def kill_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(proc.pid, sig)


def test_ctrl_c_in_the_middle_of_a_batch_exits_0_quietly(tmp_path, demo_reference):
    out = tmp_path / "out"
    proc = start(tmp_path, demo_reference.folder, out)
    try:
        batch = wait_for(
            lambda: batch_in_flight(out / "_checkpoint") is not None or proc.poll() is not None,
            180,
            "the first micro-batch to start",
        )
        assert proc.poll() is None and batch, proc.stderr.read()[-3000:]
        kill_group(proc, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        kill_group(proc, signal.SIGKILL)
        proc.wait(timeout=30)
    lines = stderr.splitlines()
    assert proc.returncode == 0, stderr[-3000:]
    assert not [line for line in lines if "Traceback" in line or "ERROR" in line or "Exception" in line], (
        stderr[-3000:]
    )
    # The JVM's own "WARNING: Using incubator modules" line may be there; nothing like a flood.
    assert len(lines) <= 5, stderr[-3000:]
    assert f"outputs in {out}" in stdout


def test_sigterm_to_the_process_group_stops_in_one_line(tmp_path):
    # A run that keeps going (no --once) over a small folder; once its first batch is committed,
    # SIGTERM goes to the group: to replmon and to Spark's JVM, its child, alike.
    from replmon.streaming.simulator import scenarios
    from replmon.streaming.simulator.model import simulate
    from replmon.streaming.simulator.writers import write_events

    events, _ = simulate(scenarios.get("steady"), seed=0)
    write_events(tmp_path / "sim", events)
    out = tmp_path / "out"
    proc = start(tmp_path, tmp_path / "sim" / "events", out)
    try:
        wait_for(
            lambda: (out / "_checkpoint" / "commits" / "0").exists() or proc.poll() is not None,
            180,
            "the first micro-batch to be committed",
        )
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        kill_group(proc, signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        kill_group(proc, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr and "py4j" not in stderr.lower(), stderr[-3000:]
    # At most the JVM's own "WARNING: Using incubator modules" line and one of replmon's.
    assert len(stderr.splitlines()) <= 2, stderr[-3000:]
    (line,) = stdout.splitlines()  # the outputs line, as after any stop
    assert f"outputs in {out}" in line, stdout


def alert_pairs(rows: list[dict]) -> Counter:
    return Counter(transition_key(a) for a in rows if exactly_once(a))


@pytest.mark.services
def test_kill_9_mid_batch_then_restart_gives_every_transition_once(
    tmp_path, demo_reference, redis_server, redis_client
):
    events, expected = demo_reference.folder, demo_reference.transitions
    out, keys = tmp_path / "out", Keys("replmon")
    proc = start(tmp_path, events, out, "--redis-url", redis_server.url)
    try:
        # Killed while a batch after the first is running: some transitions are in Redis, the
        # batch's own may be half written.
        wait_for(
            lambda: batch_in_flight(out / "_checkpoint", first=1) is not None or proc.poll() is not None,
            180,
            "a second micro-batch to start",
        )
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        kill_group(proc, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        kill_group(proc, signal.SIGKILL)
    before = transitions_in_redis(redis_client, keys)
    assert before and before != expected, "killed after every batch was done: nothing to replay"

    # The restart replays the killed batch as planned, then the rest in one batch.
    restarted = subprocess.run(
        [
            sys.executable,
            "-m",
            "replmon.streaming.cli",
            "run",
            "--input",
            str(events),
            "--output",
            str(out),
            "--no-timeline",
            "--once",
            "--redis-url",
            redis_server.url,
        ],
        cwd=tmp_path,
        env=run_env(REPLMON_SPARK__MAX_FILES_PER_TRIGGER=str(FILES)),
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert transitions_in_redis(redis_client, keys) == expected
    assert alert_pairs(read_outputs(out)["alerts"]) == expected
    firing = {k.decode() for k in redis_client.hkeys(keys.alerts_firing())}
    assert firing == {aid for aid, s, _ in expected if s == "firing"} - {
        aid for aid, s, _ in expected if s == "resolved"
    }
