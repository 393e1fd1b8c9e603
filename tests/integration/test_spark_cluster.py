"""replmon on a real Spark standalone cluster (deploy/local/spark-cluster.sh: a master and two
workers on loopback, from the installed pyspark).

The same simulated input runs twice: in local mode (the test session's local Spark), and on the
cluster as a user runs it (`replmon run --master spark://...`, its own driver) with RocksDB as
the state store, writing to the local Redis, with one worker (and its executor) killed after
the first micro-batch. Spark reschedules the lost tasks on
the other worker and reloads their state from the shared checkpoint; the alerts are the local
run's, by id, and each transition is in Redis exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest
import redis

from replmon.sinks.keys import Keys
from replmon.streaming.bridge import OutputRouter
from replmon.streaming.cli import main as replmon
from replmon.streaming.query import start_query
from replmon.streaming.settings import Settings
from replmon.streaming.sources import file_source
from tests.integration.conftest import ROOT, parse_env_file
from tests.streaming.helpers import await_end, read_outputs
from tests.streaming.test_outage import split_into_files, wait_for

CLUSTER_SH = ROOT / "deploy" / "local" / "spark-cluster.sh"
SPARK_RUN = Path(os.environ.get("REPLMON_SERVICES_RUN", ROOT / "deploy" / "local" / ".run")) / "spark"
FILES = 3


def cluster(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(CLUSTER_SH), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, REPLMON_PYTHON=sys.executable),
    )


@pytest.fixture(scope="module")
def spark_master() -> str:
    up = cluster("up")
    if up.returncode != 0:
        pytest.fail(f"spark-cluster.sh up failed:\n{up.stderr}{up.stdout}", pytrace=False)
    yield parse_env_file(SPARK_RUN / "env")["REPLMON_SPARK_MASTER"]
    cluster("down", timeout=120)  # three JVMs: not left running for the rest of the suite


def run_replmon(tmp_path: Path, name: str, *args: str, env: dict) -> tuple[subprocess.Popen, Path]:
    log_path = tmp_path / f"{name}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "replmon.streaming.cli", "run", "--verbose", "--no-timeline", *args],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return proc, log_path


def finish(proc: subprocess.Popen, log_path: Path, timeout: float = 420) -> None:
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
        raise AssertionError(
            f"replmon run did not finish in {timeout} s:\n{log_path.read_text()[-4000:]}"
        ) from None
    assert rc == 0, log_path.read_text()[-4000:]


def transitions(alerts: list[dict]) -> Counter:
    """Each transition once: a firing and its resolve (a root's updates are progress notes)."""
    return Counter((a["alert_id"], a["status"]) for a in alerts if a["status"] != "updated")


def local_run(spark, events: Path, out: Path) -> list[dict]:
    """The same input, micro-batches and buckets in local mode, on the shared test session."""
    settings = Settings(
        input_path=str(events),
        output_dir=str(out),
        stream={"buckets": 4},
        spark={"max_files_per_trigger": 1, "checkpoint_dir": str(out / "_ckpt")},
    )
    router = OutputRouter(str(out))
    query = start_query(
        spark,
        file_source(spark, str(events), 1),
        settings,
        router,
        once=True,
        name=f"it_local_{uuid.uuid4().hex[:8]}",
    )
    try:
        await_end(query)
    finally:
        query.stop()
    router.flush()  # as `replmon run --once` does at the end of its input
    return read_outputs(out)["alerts"]


def test_the_cluster_gives_the_local_alerts_and_survives_losing_a_worker(
    spark, spark_master, redis_url, tmp_path
):
    assert replmon(["simulate", "--scenario", "paused_and_slow", "--output", str(tmp_path / "sim")]) == 0
    events = tmp_path / "events"
    split_into_files(tmp_path / "sim" / "events" / "part-00000.jsonl", events, FILES)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REPLMON_", "SPARK_", "PYSPARK_"))}
    env.update(
        REPLMON_STREAM__BUCKETS="4",
        REPLMON_SPARK__MAX_FILES_PER_TRIGGER="1",
        REPLMON_SPARK__DRIVER_MEMORY="1g",
    )

    expected = transitions(local_run(spark, events, tmp_path / "out-local"))
    assert expected and max(expected.values()) == 1

    prefix = f"it-cluster-{uuid.uuid4().hex[:8]}"
    cluster_env = dict(
        env,
        REPLMON_SPARK__STATE_STORE="rocksdb",
        REPLMON_SPARK__EXECUTOR_MEMORY="512m",
        REPLMON_REDIS__PREFIX=prefix,
    )
    out = tmp_path / "out-cluster"
    proc, log_path = run_replmon(
        tmp_path,
        "cluster",
        "--input",
        str(events),
        "--once",
        "--output",
        str(out),
        "--master",
        spark_master,
        "--redis-url",
        redis_url,
        env=cluster_env,
    )
    client = redis.Redis.from_url(redis_url)
    keys = Keys(prefix)
    try:
        # A machine is lost after the first micro-batch: its executor's tasks and state move.
        wait_for(
            lambda: "batch 0:" in log_path.read_text() or proc.poll() is not None,
            300,
            "the first micro-batch on the cluster",
        )
        assert proc.poll() is None, log_path.read_text()[-4000:]
        killed = cluster("kill-worker", "1", timeout=60)
        assert killed.returncode == 0, killed.stderr
        finish(proc, log_path)
        log_text = log_path.read_text()
        assert f"batch {FILES - 1}:" in log_text, "batches ran after the worker was lost"

        assert transitions(read_outputs(out)["alerts"]) == expected
        in_redis = Counter(
            (f[b"alert_id"].decode(), f[b"status"].decode()) for _, f in client.xrange(keys.alerts_stream())
        )
        assert in_redis == expected, "every transition exactly once"
        # replmon's code reached the executors as the zip the driver shipped.
        shipped = list(SPARK_RUN.glob("worker-*/app-*/*/replmon-code-*.zip"))
        assert shipped, "no executor fetched replmon's code zip"
        assert "shipping replmon's code to the executors" in log_text
        assert "state store rocksdb" in log_text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)
        cluster("up")  # the lost worker back, for whatever runs next
