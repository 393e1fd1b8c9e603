"""Fixtures of the judge: a real 3-broker KRaft cluster (deploy/local/services.sh up --brokers 3
with the request log on, in deploy/local/.run-judge, ports shifted by 500 from the worktree's
offset) and the pipeline under judgement on top of the 1-broker services (tests/integration).

Each test module gets its own cluster, formatted fresh and stopped when the module ends (it is
heavy: never two at once), with the module's `LAG_MS` (replica.lag.time.max.ms) and
`SESSION_TIMEOUT_MS` (broker.session.timeout.ms; None: Kafka's default, 9 s): both are startup
settings, so the cases that need other values live in their own module. So does a Kafka
version other than the default: a module's `KAFKA_VERSION` runs its cluster (and Alertmanager)
in its own `RUN_DIR` at its own `PORT_SHIFT`.
"""

from __future__ import annotations

import os

import pytest

from tests.integration.conftest import local_services  # noqa: F401 - the fixture, re-exported
from tests.judge.cluster import PORT_SHIFT, RUN_DIR, JudgeCluster, wait_for
from tests.judge.oncall import JudgeAlertmanager
from tests.judge.pipeline import Pipeline, describe, wait_full_isr
from tests.local_cluster import kill_brokers

LAG_MS = 6000  # replica.lag.time.max.ms on the judged brokers
LONG_SESSION_MS = 60000  # broker.session.timeout.ms: above every pause, so no fencing first
TOPIC = "orders"
# Each fault case runs this many times on the same cluster (REPLMON_JUDGE_RUNS, default 1; the
# figures in docs/real-cluster.md come from 3).
RUNS = list(range(1, int(os.environ.get("REPLMON_JUDGE_RUNS", "1")) + 1))
PARTITIONS = 3


@pytest.fixture(scope="module")
def judge_cluster(request):
    cluster = JudgeCluster(
        getattr(request.module, "LAG_MS", LAG_MS),
        getattr(request.module, "SESSION_TIMEOUT_MS", LONG_SESSION_MS),
        kafka_version=getattr(request.module, "KAFKA_VERSION", ""),
        run_dir=getattr(request.module, "RUN_DIR", RUN_DIR),
        port_shift=getattr(request.module, "PORT_SHIFT", PORT_SHIFT),
    )
    cluster.fresh()
    try:
        yield cluster
    finally:
        cluster.resume_all()
        kill_brokers(cluster.run_dir)  # its next use (fresh()) formats the storage anew
        cluster.services("down")


@pytest.fixture(scope="module")
def judge_admin(judge_cluster):
    from kafka.admin import KafkaAdminClient, NewTopic

    # A request to a stopped broker waits for this timeout (kafka-python's default is 30 s).
    admin = KafkaAdminClient(bootstrap_servers=judge_cluster.bootstrap.split(","), request_timeout_ms=5000)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
    wait_for(
        "the topic's partitions to have leaders",
        lambda: all(v["leader"] >= 0 for v in describe(admin, TOPIC).values()),
        60,
    )
    yield admin
    admin.close()


@pytest.fixture(scope="module")
def judge_alertmanager(request):
    am = JudgeAlertmanager(
        int(os.environ.get("REPLMON_PORT_OFFSET", "0")) + getattr(request.module, "PORT_SHIFT", PORT_SHIFT),
        getattr(request.module, "RUN_DIR", RUN_DIR),
    )
    try:
        yield am
    finally:
        am.close()


@pytest.fixture(scope="module")
def pipeline(judge_cluster, judge_admin, local_services, judge_alertmanager, tmp_path_factory):  # noqa: F811 - the fixture imported above
    p = Pipeline(
        judge_cluster,
        local_services,
        tmp_path_factory.mktemp("judge"),
        alertmanager_url=judge_alertmanager.url,
    )
    p.start_collect()
    p.start_run()
    try:
        full = wait_full_isr(judge_admin, TOPIC, 60)
        wait_for(
            "replmon to report every partition of the judged topic with its ISR",
            lambda: p.check_alive() or all(p.isr(TOPIC, i) == full[i]["isr"] for i in range(PARTITIONS)),
            240,
            1.0,
        )
        yield p
    finally:
        p.stop()
