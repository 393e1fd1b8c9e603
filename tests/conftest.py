"""The one SparkSession shared by the whole test run (starting one costs ~4 s), and the
--strict-skips option of the full tier (tests/skip_policy.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.skip_policy import SkipPolicy

ROOT = Path(__file__).resolve().parents[1]
# The real redis-server fixtures (redis_server, redis_client), for every test directory.
pytest_plugins = ["tests.redis_server"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--strict-skips",
        action="store_true",
        help="fail the run on any skip not listed in tests/skip_policy.py (the full tier sets it)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--strict-skips"):
        config.pluginmanager.register(SkipPolicy(), "replmon-skip-policy")


def _kafka_jars() -> list[str]:
    """The spark-sql-kafka connector jars that deploy/local/fetch-jars.sh put in
    deploy/local/jars (the test command runs `services.sh up` first, which fetches them).
    They must be on the session from the start: jars cannot be added to a running JVM."""
    env = os.environ.get("REPLMON_SPARK_JARS")
    if env:
        return [j for j in env.split(",") if j]
    return sorted(str(p) for p in (ROOT / "deploy" / "local" / "jars").glob("*.jar"))


@pytest.fixture(scope="session")
def spark():
    from replmon.streaming.session import build_session
    from replmon.streaming.settings import SparkConf

    session = build_session(
        SparkConf(master="local[2]", shuffle_partitions=2, driver_memory="3g", jars=_kafka_jars()),
        app_name="replmon-tests",
    )
    yield session
    session.stop()
