"""The real query over simulated clusters: the same alerts as the pure monitor, and the truth.

`replmon simulate` writes a scenario's events and truth to files; the Spark query (local mode,
4 buckets) reads the events as any input folder. Its alerts must be exactly those of a `Bucket`
fed the same lines in memory (ids, statuses, times and reasons: Spark only carries the events
to the engine and the records back), and so meet the truth as tests/state/test_monitor_vs_truth.py
explains: out of sync at the same ms, shrinks within L/2 (the isr-expiration phase differs),
controller changes and rejoins at the same ms, every fault visible.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replmon.state.cluster import fold_batches
from replmon.streaming.cli import main as replmon
from replmon.streaming.settings import monitor_config
from replmon.streaming.simulator import scenarios
from tests.state.test_monitor_vs_truth import (
    check_alert_lifecycle,
    check_faults_visible,
    check_final_state,
    check_isr_changes,
    check_out_of_sync_episodes,
    run_monitor,
)
from tests.streaming.helpers import run_once

pytestmark = pytest.mark.spark

SETTINGS = {"stream": {"buckets": 4}}


def simulate_to_files(name: str, folder: Path) -> tuple[Path, list[str], list[dict]]:
    """`replmon simulate --scenario NAME --output FOLDER`: (events folder, event lines, truth)."""
    assert replmon(["simulate", "--scenario", name, "--output", str(folder)]) == 0
    lines = (folder / "events" / "part-00000.jsonl").read_text().splitlines()
    truth = [json.loads(line) for line in (folder / "truth.jsonl").read_text().splitlines()]
    return folder / "events", lines, truth


def by_transition(alerts: list[dict]) -> list[dict]:
    return sorted(alerts, key=lambda a: (a["ts"], a["alert_id"], a["status"]))


@pytest.mark.parametrize("name", ["paused_and_slow", "demo"])
def test_query_alerts_are_the_pure_monitors_and_match_the_truth(spark, tmp_path, name):
    folder, lines, truth = simulate_to_files(name, tmp_path / "sim")
    events = [json.loads(line) for line in lines]
    lag_ms = scenarios.get(name).replica_lag_time_max_ms

    out = run_once(spark, folder, tmp_path / "out", **SETTINGS)
    pure = run_monitor(events, lag_ms, raws=lines)

    assert out["quarantine"] == [] and pure.quarantine == []
    assert out["alerts"], "the scenario has faults: the query must raise alerts"
    # the query decides cluster-wide (roots, claims, what pages) in the cluster step on the
    # driver (streaming/bridge.py, state/cluster.py), the same as the pure fold
    decided = fold_batches([(pure.alerts, pure.activity)], monitor_config(replica_lag_time_max_ms=lag_ms))
    assert by_transition(out["alerts"]) == by_transition(decided)

    alerts = out["alerts"]
    check_alert_lifecycle(alerts)
    check_out_of_sync_episodes(events, truth, alerts)
    check_isr_changes(events, truth, alerts, lag_ms)
    # Every fault in an alert, none about the bursty partition (replica states are checked by the
    # pure test: one micro-batch only outputs the last status of each replica).
    check_faults_visible(truth, alerts)
    check_final_state(truth, out["partition_status"], out["series_point"])


def test_the_same_input_twice_gives_identical_outputs(spark, tmp_path):
    folder, _, _ = simulate_to_files("paused_and_slow", tmp_path / "sim")
    first = run_once(spark, folder, tmp_path / "out1", **SETTINGS)
    second = run_once(spark, folder, tmp_path / "out2", **SETTINGS)
    assert first["alerts"] and first["replica_status"] and first["partition_status"]
    assert first == second
