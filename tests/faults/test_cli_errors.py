"""`replmon run` as a user runs it (a subprocess): a bad setting or an unreachable service ends
in one line naming it, exit non-zero, no traceback and no flood of log lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.redis_server import free_port


def replmon_run(tmp_path, *args, **env_extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLMON_")}
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-m", "replmon.streaming.cli", "run", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


def test_an_unknown_variable_is_named_with_the_setting_meant(tmp_path):
    (tmp_path / "in").mkdir()
    proc = replmon_run(tmp_path, "--input", "in", "--once", REPLMON_STREM__LATENESS_MS="5000")
    assert proc.returncode == 2  # a config error, like a usage error (docs/cli.md)
    assert proc.stderr.startswith("replmon run: ") and "REPLMON_STREM__LATENESS_MS" in proc.stderr
    assert "did you mean REPLMON_STREAM__LATENESS_MS" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) <= 3


@pytest.mark.spark
@pytest.mark.services
def test_an_unreachable_kafka_is_one_line_within_the_startup_timeout(tmp_path, spark_kafka_jars):
    proc = replmon_run(
        tmp_path,
        "--metrics-bootstrap",
        f"127.0.0.1:{free_port()}",
        REPLMON_KAFKA__STARTUP_TIMEOUT_MS="3000",
        REPLMON_SPARK__JARS=json.dumps(spark_kafka_jars),
        REPLMON_SPARK__DRIVER_MEMORY="1g",
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("replmon run:")]
    assert len(errors) == 1 and "did not answer a metadata request within 3 s" in errors[0]
    assert "kafka.bootstrap_servers" in errors[0]
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) <= 10, proc.stderr
