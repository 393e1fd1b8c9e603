"""Fixtures for tests against the real local services (deploy/local/services.sh).

`local_services` runs `deploy/local/services.sh up` once per test session: it
installs redis-server and fetches the jars when missing, starts a KRaft Kafka
broker on 127.0.0.1:19092 and Redis on 127.0.0.1:16379 unless they already
run, and writes deploy/local/.run/env, which is parsed here. The services are
left running afterwards (the next `up` is then ~1 s); stop them with
`deploy/local/services.sh down`.

If the services cannot start, the test fails with the script's message: these
tests exist to prove the services work, so they are never skipped.

Every test collected under tests/integration gets the `services` marker, so
`pytest -m "not services"` leaves them out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import local_cluster

ROOT = Path(__file__).resolve().parents[2]
# services.sh's run folder: REPLMON_SERVICES_RUN when set (deploy/dev.sh runs the judge's group
# on services of its own), else its default
RUN_DIR = Path(os.environ.get("REPLMON_SERVICES_RUN") or ROOT / "deploy" / "local" / ".run")
ENV_FILE = RUN_DIR / "env"
# A cold start may apt-get install redis-server and download ~60 MB of jars.
UP_TIMEOUT_S = float(os.environ.get("REPLMON_SERVICES_UP_TIMEOUT", "900"))

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    # This hook sees every collected item, not only this directory's.
    for item in items:
        if _HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.services)


def parse_env_file(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        env[key.strip()] = value.strip()
    return env


def run_services(*args: str, timeout: float = UP_TIMEOUT_S) -> subprocess.CompletedProcess:
    """Run deploy/local/services.sh with this interpreter for its Python parts."""
    return local_cluster.run_services(dict(os.environ, REPLMON_PYTHON=sys.executable), *args, timeout=timeout)


def services_up_args() -> list[str]:
    # Same broker count as a cluster already running (up refuses to change it).
    brokers = os.environ.get("REPLMON_KAFKA_BROKERS", "1")
    return ["up", "--brokers", brokers]


@pytest.fixture(scope="session")
def local_services() -> dict:
    """Start (or find running) the local Kafka broker and Redis; return their addresses.

    Keys: kafka_bootstrap, redis_url, spark_jars (list of absolute jar paths),
    kafka_brokers (int), kafka_version, spark_kafka_version, env (the raw
    deploy/local/.run/env as a dict).
    """
    try:
        proc = run_services(*services_up_args())
    except subprocess.TimeoutExpired as e:
        pytest.fail(
            f"deploy/local/services.sh up did not finish within {UP_TIMEOUT_S:.0f}s\n{e.stderr or ''}",
            pytrace=False,
        )
    if proc.returncode != 0:
        pytest.fail(
            f"deploy/local/services.sh up failed (exit {proc.returncode}):\n{proc.stderr}{proc.stdout}",
            pytrace=False,
        )
    if not ENV_FILE.is_file():
        pytest.fail(f"services.sh up succeeded but wrote no {ENV_FILE}:\n{proc.stderr}", pytrace=False)
    env = parse_env_file(ENV_FILE)
    missing = [
        k for k in ("REPLMON_KAFKA_BOOTSTRAP", "REPLMON_REDIS_URL", "REPLMON_SPARK_JARS") if not env.get(k)
    ]
    if missing:
        pytest.fail(f"{ENV_FILE} lacks {missing}:\n{ENV_FILE.read_text()}", pytrace=False)
    return {
        "kafka_bootstrap": env["REPLMON_KAFKA_BOOTSTRAP"],
        "redis_url": env["REPLMON_REDIS_URL"],
        "spark_jars": [j for j in env["REPLMON_SPARK_JARS"].split(",") if j],
        "kafka_brokers": int(env.get("REPLMON_KAFKA_BROKERS", "1")),
        "kafka_version": env.get("REPLMON_KAFKA_VERSION", ""),
        "spark_kafka_version": env.get("REPLMON_SPARK_KAFKA_VERSION", ""),
        "env": env,
    }


@pytest.fixture(scope="session")
def kafka_bootstrap(local_services) -> str:
    """bootstrap.servers of the local Kafka cluster, e.g. '127.0.0.1:19092'."""
    return local_services["kafka_bootstrap"]


@pytest.fixture(scope="session")
def redis_url(local_services) -> str:
    """URL of the local Redis server, 'redis://127.0.0.1:16379/0'."""
    return local_services["redis_url"]


@pytest.fixture(scope="session")
def spark_kafka_jars(local_services) -> list[str]:
    """Absolute paths of the jars to add to spark.jars for Spark's Kafka source/sink."""
    return local_services["spark_jars"]


# The secured cluster's ports: the worktree's offset + this (the judge's is + 500; not a multiple
# of 100, as the offsets of side-by-side checkouts are).
# 850: its SASL, SSL and SASL_SSL listeners sit 50-70 above its broker port, clear of the
# clusters at +500 (judge), +600 (per-broker collectors) and +700 (collector restarts)
SECURE_PORT_SHIFT = 850
SECURE_RUN_DIR = ROOT / "deploy" / "local" / ".run-secure"


@pytest.fixture(scope="session")
def secure_kafka() -> Iterator[dict[str, str]]:
    """A 1-broker cluster with secured listeners (deploy/local/services.sh up --security, in
    deploy/local/.run-secure): SASL_PLAINTEXT and SASL_SSL with SCRAM-SHA-512 (a user made by
    Kafka's storage tool), SSL with a local CA (keytool). Stopped when the session ends; its
    storage and keys stay for the next run. Yields its .run-secure/env: the secured
    bootstraps, REPLMON_KAFKA_SCRAM_USER/_PASSWORD and REPLMON_KAFKA_TLS_CA (PEM)."""
    env = dict(
        os.environ,
        REPLMON_PYTHON=sys.executable,
        REPLMON_SERVICES_RUN=str(SECURE_RUN_DIR),
        REPLMON_PORT_OFFSET=str(int(os.environ.get("REPLMON_PORT_OFFSET", "0")) + SECURE_PORT_SHIFT),
        REPLMON_REQUEST_LOG="0",
        REPLMON_KAFKA_HEAP=os.environ.get("REPLMON_KAFKA_HEAP", "-Xms64m -Xmx384m"),
    )

    def services(*args: str) -> subprocess.CompletedProcess:
        return local_cluster.run_services(env, *args, timeout=UP_TIMEOUT_S)

    up = services("up", "--brokers", "1", "--security")
    try:
        if up.returncode != 0:
            pytest.fail(f"services.sh up --security failed ({up.returncode}):\n{up.stderr}", pytrace=False)
        yield parse_env_file(SECURE_RUN_DIR / "env")
    finally:
        services("down")
