"""bench/realtime.py at a tiny size against the local broker and Redis: a paced cluster with
faults goes through Kafka, the monitor query and the Redis sink, and the bench's last line is
its JSON figures, the faults' alerts among them with a latency after the event that decided
them.

Needs `deploy/local/services.sh up` (the `local_services` fixture runs it); about 90 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.services, pytest.mark.spark]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "realtime.py"


def test_the_bench_reports_keeping_up_and_the_fault_alerts_latency(kafka_bootstrap, redis_url):
    # 60 partitions (12 busy), L = 10 s, 10 s warm-up, 35 s measured: faults at 10, 14, 18 and 22 s
    # (the last one that L + group_wait + tolerance + a fetch period still fits before the end at 45 s).
    args = ["--partitions", "60", "--lag-ms", "10000", "--warmup-s", "10", "--seconds", "35"]
    args += ["--fault-every-s", "4"]
    args += ["--producers", "1", "--driver-memory", "1g", "--bootstrap", kafka_bootstrap]
    proc = subprocess.run(
        [sys.executable, str(BENCH), *args, "--redis-url", redis_url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])

    assert figures["partitions"] == 60
    assert figures["lag_ms"] == 10_000
    assert figures["producer_kept_pace"] is True
    # Session form (the default), resolution 1 s at L = 10 s: the 9 moderate partitions (2 x 1.10
    # fetches + 0.05 published appends a second) and the 3 at the maximum (2 x 1.55 + 1.08) send
    # 32.8 events/s; the 48 idle ones only their 6 sessions' reads (one each a second), and a
    # heartbeat a second: 39.8, less the 4 stopped followers' fetches (about 2.4 a second over
    # the window): about 37
    assert 33 <= figures["events_per_s"] <= 45
    assert figures["sessions"] is True
    # The monitor read in the measured window (on a loaded machine, in as little as one batch),
    # and its lag was sampled.
    assert figures["processed_events_per_s"] > 0 and figures["batches"] >= 1, figures
    assert figures["lag_s_first"] is not None and figures["lag_s_first"] >= 0, figures
    # Keeps up: the rule as the bench's docstring states it, from the figures it prints (a loaded
    # machine may fall behind: the verdict may be either, but it must be the documented one).
    # (The lags are printed rounded to 10 ms: lag_ok is checked where rounding cannot flip it.)
    margin = figures["lag_s_first"] + max(2.0, figures["lag_s_first"] / 4) - figures["lag_s_last"]
    if abs(margin) > 0.02:
        assert figures["lag_ok"] is (margin > 0), figures
    rule = (
        figures["lag_ok"]
        and figures["producer_kept_pace"]
        and figures["processed_events_per_s"] >= 0.9 * figures["events_per_s"]
    )
    assert figures["keeps_up"] is rule, figures
    assert figures["tried"] == [
        {k: figures[k] for k in ("partitions", "keeps_up", "events_per_s", "lag_s_last")}
    ]
    assert figures["faults"] == 4
    # the last fault's alerts are released ~38 s in: a slow batch on a loaded machine may miss it
    # (with the judge group beside it, the third fault's ReplicaOutOfSync, released ~34 s in, was
    # once still in a batch at the end: its IsrExitImminent, L/2 earlier, was in)
    assert figures["faults_with_alerts"] >= 3
    assert figures["alerts_by_name"].get("ReplicaOutOfSync", 0) >= 2
    assert figures["alerts_unexpected"] == {}
    assert figures["alerts"] >= figures["faults_with_alerts"]
    assert figures["latency_ms_min"] <= figures["latency_ms_p50"] <= figures["latency_ms_p99"]
    assert figures["latency_ms_p50"] > 0
    assert figures["lag_s_last"] is not None and figures["lag_s_max"] >= figures["lag_s_last"] >= 0
    assert {"mix", "lag_ms", "resolution_ms", "runs", "tried"} <= set(figures)
