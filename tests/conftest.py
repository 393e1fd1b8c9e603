"""The one SparkSession shared by the whole test run (starting one costs ~4 s)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _kafka_jars() -> list[str]:
    """The spark-sql-kafka connector jars fetched by deploy/local (empty when not fetched)."""
    env = os.environ.get("REPLMON_SPARK_JARS")
    if env:
        return [j for j in env.split(",") if j]
    script = ROOT / "deploy" / "local" / "fetch-jars.sh"
    if not script.exists():
        return []
    out = subprocess.run(["bash", str(script), "--print-spark-jars"], capture_output=True,
                         text=True, check=True)
    return [j for j in out.stdout.strip().split(",") if j]


@pytest.fixture(scope="session")
def spark():
    from streaming.session import build_session
    from streaming.settings import SparkConf

    session = build_session(SparkConf(master="local[2]", shuffle_partitions=2,
                                      driver_memory="3g", jars=_kafka_jars()),
                            app_name="replmon-tests")
    yield session
    session.stop()
