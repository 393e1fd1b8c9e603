"""deploy/local/services.sh clusters of the tests' own: a run dir and a port offset per test
module, the request log on, for the tests that need real brokers (the judge, the collector's
restart and per-broker tests)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVICES_SH = ROOT / "deploy" / "local" / "services.sh"


def services_env(run_dir: Path, offset: int, **extra: str) -> dict[str, str]:
    """The environment services.sh runs a cluster in: this interpreter, its own run dir and
    ports, each broker's request log on."""
    return dict(
        os.environ,
        REPLMON_PYTHON=sys.executable,
        REPLMON_SERVICES_RUN=str(run_dir),
        REPLMON_PORT_OFFSET=str(offset),
        REPLMON_REQUEST_LOG="1",
        **extra,
    )


def run_services(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SERVICES_SH), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def bootstrap_of(offset: int, brokers: int = 3) -> str:
    return ",".join(f"127.0.0.1:{19092 + offset + i}" for i in range(brokers))


def kill_brokers(run_dir: Path, timeout_s: float = 30) -> None:
    """SIGKILL the brokers of a cluster whose data no one reads again (the next use formats it
    afresh: `services.sh clean`), before `services.sh down`: a graceful stop of three KRaft
    nodes at once waits on controlled shutdowns that only matter for the data. A pid file whose
    process is not this run dir's Kafka is left alone."""
    pids = []
    for pidfile in sorted((run_dir / "kafka").glob("node-*/kafka.pid")):
        with contextlib.suppress(OSError, ValueError):
            pid = int(pidfile.read_text())
            if str(run_dir) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                os.kill(pid, signal.SIGKILL)
                pids.append(pid)
    deadline = time.monotonic() + timeout_s
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    """Running, and not a zombie waiting for its parent."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
