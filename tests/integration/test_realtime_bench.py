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
    # 60 partitions (12 busy), 10 s warm-up, 35 s measured: faults at 10, 14, 18 and 22 s (the
    # last one that L + group_wait + tolerance + a fetch period still fits before the end at 45 s).
    args = ["--partitions", "60", "--warmup-s", "10", "--seconds", "35", "--fault-every-s", "4"]
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
    assert isinstance(figures["keeps_up"], bool)
    assert figures["producer_kept_pace"] is True
    # 12 busy partitions: 0.15 x 60 moderate (1.12 fetch, 0.91 append), 0.05 x 60 max, the rest idle
    assert 120 <= figures["events_per_s"] <= 150
    assert figures["faults"] == 4
    # the last fault's alerts are released ~38 s in: a slow batch on a loaded machine may miss it
    assert figures["faults_with_alerts"] >= 3
    assert figures["alerts_by_name"].get("ReplicaOutOfSync", 0) >= 3
    assert figures["alerts_unexpected"] == {}
    assert 0 < figures["latency_ms_p50"] <= figures["latency_ms_p99"]
    assert figures["lag_s_last"] is not None and figures["lag_s_max"] >= figures["lag_s_last"] >= 0
    assert {"mix", "resolution_ms", "runs", "tried"} <= set(figures)
