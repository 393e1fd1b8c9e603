"""The judge's pause case on Kafka 3.x (issue 20: "the judge's pause case runs on one 3.x version
as well as the newest 4.x"): a 3-broker KRaft cluster of Kafka 3.9.1, the last 3.x line, whose
request log is log4j 1.x's (local time stamps replaced by UTC, FETCH v17 with the topics by id),
with every check of `test_judge.test_paused_follower_long_session_timeout`.

services.sh fetches the version's jars from Maven Central into deploy/local/kafka-libs-3.9.1 the
first time (fetch-jars.sh, as on a fresh clone). The cluster has its own run dir and ports, so it
never meets the default version's cluster of the other judge modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge import test_judge
from tests.judge.cluster import ROOT
from tests.judge.conftest import RUNS

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.judge]

KAFKA_VERSION = "3.9.1"
RUN_DIR = ROOT / "deploy" / "local" / ".run-judge-3x"
# The worktree's offset + this: clear of the judge's +500, the per-broker collectors' +600, the
# collector restarts' +700 and the secured cluster's +850 (its ports and its Alertmanager's).
PORT_SHIFT = 450


@pytest.mark.parametrize("run", RUNS)
def test_paused_follower_kafka_3x(judge_cluster, judge_admin, pipeline, judge_alertmanager, run):
    """The pause case, every check of it, on Kafka 3.9.1."""
    # The brokers run that version's jars (services.sh starts them from kafka-libs-<version>).
    for b in (1, 2, 3):
        cmdline = Path(f"/proc/{judge_cluster.pid(b)}/cmdline").read_bytes().decode(errors="replace")
        assert f"kafka-libs-{KAFKA_VERSION}/" in cmdline, cmdline[:500]
    test_judge.test_paused_follower_long_session_timeout(
        judge_cluster, judge_admin, pipeline, judge_alertmanager, run
    )
