"""deploy/local/services.sh clusters of the tests' own: a run dir and a port offset per test
module, the request log on, for the tests that need real brokers (the judge, the collector's
restart and per-broker tests)."""

from __future__ import annotations

import os
import subprocess
import sys
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
