"""Two deploy/local run dirs side by side (CI runs the judge group's services beside the rest):
`services.sh down` of one must not stop the other's Spark master.

No JVM is started: a stand-in process carries a Spark master's command line, which is all the
scripts look at (its pid file and the `--port` in /proc/PID/cmdline)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOCAL = ROOT / "deploy" / "local"
OFFSET = 7300  # master port 24377: clear of every port the suite's own services use
MASTER_PORT = 17077 + OFFSET


@pytest.fixture
def stand_in_master(tmp_path):
    """A process in its own process group whose command line reads as this run dir's master."""
    run = tmp_path / "run-a"
    (run / "spark").mkdir(parents=True)
    argv0 = f"java org.apache.spark.deploy.master.Master --host 127.0.0.1 --port {MASTER_PORT} --webui-port 1"
    proc = subprocess.Popen(["bash", "-c", f"exec -a '{argv0}' sleep 120"], start_new_session=True)
    deadline = time.monotonic() + 10
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    while f"--port {MASTER_PORT}".encode() not in cmdline.read_bytes():
        assert time.monotonic() < deadline, "the stand-in never took the master's command line"
        time.sleep(0.02)
    (run / "spark" / "master.pid").write_text(f"{proc.pid}\n")
    reaper = threading.Thread(target=proc.wait, daemon=True)  # no zombie: the script's kill -0 sees it gone
    reaper.start()
    yield run, proc
    proc.kill()
    proc.wait(timeout=10)


def script(name: str, *args: str, run: Path, offset: int) -> None:
    env = dict(os.environ, REPLMON_SERVICES_RUN=str(run), REPLMON_PORT_OFFSET=str(offset))
    done = subprocess.run(
        ["bash", str(LOCAL / name), *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_another_run_dirs_down_leaves_this_spark_master_running(stand_in_master, tmp_path):
    run, proc = stand_in_master
    script("services.sh", "down", run=tmp_path / "run-b", offset=OFFSET + 2000)
    script("spark-cluster.sh", "down", run=tmp_path / "run-b", offset=OFFSET)
    script("spark-cluster.sh", "down", run=run, offset=OFFSET + 2000)  # same dir, another cluster's ports
    assert proc.poll() is None, "a down for another run dir or port stopped this cluster's master"
    # The same dir and ports do stop it: the stand-in is one the script recognises.
    script("services.sh", "down", run=run, offset=OFFSET)
    deadline = time.monotonic() + 5  # the reaper thread records the exit
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is not None, "this run dir's own down did not stop its master"
    assert not (run / "spark" / "master.pid").exists()
