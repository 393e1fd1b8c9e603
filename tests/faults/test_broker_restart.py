"""`replmon run` over the real Kafka source outlives a restart of the broker: the local broker is
stopped (SIGTERM, as an operator or a rolling restart stops it) once the first micro-batch is in
Redis, and started again; the run goes on, and Redis ends with exactly the alert transitions of
an uninterrupted run over the same events read from a file.

A subprocess, as a deployment runs it (its own JVM)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from replmon.sinks.keys import Keys
from replmon.streaming.simulator.writers import create_topic, kafka_producer, publish
from tests.faults.reference import run_env
from tests.integration.conftest import run_services, services_up_args
from tests.streaming.test_outage import transitions_in_redis, wait_for, wait_later_trigger

pytestmark = [pytest.mark.spark, pytest.mark.services]


def stop_broker(local_services) -> None:
    """SIGTERM node 1 of the local cluster and wait until it is gone."""
    pidfile = Path(local_services["env"]["REPLMON_KAFKA_RUN"]) / "node-1" / "kafka.pid"
    pid = int(pidfile.read_text())
    os.kill(pid, signal.SIGTERM)

    def gone() -> bool:
        try:
            os.kill(pid, 0)
            return False
        except ProcessLookupError:
            return True

    wait_for(gone, 60, f"Kafka broker pid {pid} to stop")


def test_a_broker_restart_loses_and_duplicates_no_transition(
    tmp_path, local_services, kafka_bootstrap, demo_reference, redis_server, redis_client, spark_kafka_jars
):
    redis_url, expected = redis_server.url, demo_reference.transitions
    topic = f"replmon.restart-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=4)
    producer = kafka_producer(kafka_bootstrap)
    publish(demo_reference.events, producer, topic)
    producer.close()

    keys = Keys("restart")
    log_path = tmp_path / "replmon.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "replmon.streaming.cli",
                "run",
                "--metrics-bootstrap",
                kafka_bootstrap,
                "--output",
                str(tmp_path / "out"),
                "--no-timeline",
                "--verbose",
                "--redis-url",
                redis_url,
            ],
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=run_env(
                REPLMON_REDIS__PREFIX="restart",
                REPLMON_KAFKA__SUBSCRIBE=topic,
                REPLMON_KAFKA__STARTING_OFFSETS="earliest",
                REPLMON_KAFKA__MAX_OFFSETS_PER_TRIGGER="4000",
                REPLMON_SUPERVISE__HEARTBEAT_INTERVAL_S="1",  # the later trigger is seen within 1 s
                REPLMON_SPARK__JARS=json.dumps(spark_kafka_jars),
            ),
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: redis_client.scard(keys.clusters()) > 0 or proc.poll() is not None,
            240,
            "the first batch in Redis",
        )
        assert proc.poll() is None, log_path.read_text()[-3000:]
        stop_broker(local_services)
        # Down until the run has seen it go away (else this test proves nothing).
        wait_for(
            lambda: "could not be established" in log_path.read_text() or proc.poll() is not None,
            60,
            "the run to see the broker gone",
        )
        up = run_services(*services_up_args())
        assert up.returncode == 0, up.stderr[-2000:]

        wait_for(
            lambda: transitions_in_redis(redis_client, keys) == expected or proc.poll() is not None,
            240,
            "every transition in Redis after the restart",
        )
        # A later trigger: nothing may be written twice by the triggers after that either.
        wait_later_trigger(redis_client, keys, int(time.time() * 1000), proc)
        assert proc.poll() is None, log_path.read_text()[-3000:]
        assert transitions_in_redis(redis_client, keys) == expected
        # The run did see the broker go away (else this test proved nothing).
        assert "could not be established" in log_path.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    (tmp_path.parent / "broker-restart-last.log").write_text(log_path.read_text())
