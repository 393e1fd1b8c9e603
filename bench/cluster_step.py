"""The cluster step's cost on the driver per micro-batch (state/cluster.py, streaming/cluster_state.py):
the fold itself and the save of its state beside the checkpoint, for a steady batch (activity only)
and for the batch of a broker outage at scale (every partition alert of the outage at once); and,
with the restart gate knowing `--gate-partitions` healthy RF 3 partitions (their statuses folded
once, then steady batches), a steady batch with its save and the restart-gate verdicts of every
broker (what a run with a Redis sink asks for after each batch).

    python bench/cluster_step.py [--brokers 30] [--buckets 16] [--alerts 100000] [--runs 3]
        [--gate-partitions 25000]

Prints per case the median and min-max of the runs (ms), and a last line of JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from replmon.state.alerts import alert_id
from replmon.streaming.cluster_state import ClusterStepRunner
from replmon.streaming.settings import monitor_config

T = 1_767_225_600_000


def activity(buckets: int, brokers: int, start: int, end: int, silent: int | None = None) -> list[dict]:
    return [
        {
            "cluster": "c",
            "bucket": b,
            "brokers": {
                str(k): {"segments": [[start, end if k != silent else start]], "led": 100, "replicas": 300}
                for k in range(brokers)
            },
        }
        for b in range(buckets)
    ]


def outage_alerts(n: int, broker: int, at: int) -> list[dict]:
    out = []
    for i in range(n):
        name = "ReplicaOutOfSync" if i % 2 == 0 else "UnderReplicated"
        subject = f"c/t{i // 1000}-{i % 1000}" + (f"/{broker}" if name == "ReplicaOutOfSync" else "")
        out.append(
            {
                "alert_id": alert_id(name, subject, at),
                "name": name,
                "status": "firing",
                "severity": "warning",
                "cluster": "c",
                "topic": f"t{i // 1000}",
                "partition": i % 1000,
                "replica": broker if name == "ReplicaOutOfSync" else None,
                "broker": broker,
                "subject": subject,
                "started_ms": at,
                "ts": at,
                "reason": "x",
                "cause": "lag",
                "caused_by": None,
                "root_cause": True,
                "notify": True,
                "silenced_by": [],
                "leader": (broker + 1) % 30,
                "brokers": [broker],
            }
        )
    return out


def gate_statuses(partitions: int, ts: int) -> list[dict]:
    """A partition status per healthy RF 3 partition over brokers 0-2 (what the gate reads)."""
    return [
        {
            "cluster": "c",
            "topic": "bench",
            "partition": p,
            "ts": ts,
            "leader": p % 3,
            "replicas": [p % 3, (p + 1) % 3, (p + 2) % 3],
            "isr": [0, 1, 2],
            "min_insync_replicas": 2,
            "replica_lag_time_max_ms": 30_000,
        }
        for p in range(partitions)
    ]


def run_gate(args) -> dict:
    """Steady batches with the gate knowing --gate-partitions partitions: the step with its
    save, then the verdicts (timed apart)."""
    cfg = monitor_config()
    with tempfile.TemporaryDirectory() as d:
        runner = ClusterStepRunner(cfg, d)
        act = activity(args.buckets, 3, T, T + 1000)
        runner.run(0, [], act, statuses=(gate_statuses(args.gate_partitions, T), []))
        steps, verdicts = [], []
        for i in range(1, 6):
            act = activity(args.buckets, 3, T + i * 1000, T + (i + 1) * 1000)
            t = time.perf_counter()
            runner.run(i, [], act)
            steps.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            assert len(runner.verdicts) == 3
            verdicts.append((time.perf_counter() - t) * 1000)
    return {"gate_step_ms": statistics.median(steps), "gate_verdicts_ms": statistics.median(verdicts)}


def run_once(args) -> dict:
    cfg = monitor_config()
    with tempfile.TemporaryDirectory() as d:
        runner = ClusterStepRunner(cfg, d)
        timings = {}
        t = time.perf_counter()
        for i in range(10):  # steady: 10 batches of activity only
            runner.run(i, [], activity(args.buckets, args.brokers, T + i * 1000, T + (i + 1) * 1000))
        timings["steady_batch_ms"] = (time.perf_counter() - t) * 1000 / 10
        # broker 0 goes silent at +10 s; its partitions' alerts at +20 s arrive in one batch
        for i in range(10, 20):
            runner.run(
                i, [], activity(args.buckets, args.brokers, T + i * 1000, T + (i + 1) * 1000, silent=0)
            )
        alerts = outage_alerts(args.alerts, 0, T + 20_000)
        t = time.perf_counter()
        out = runner.run(20, alerts, activity(args.buckets, args.brokers, T + 20_000, T + 30_000, silent=0))
        timings["outage_batch_ms"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        out += runner.run(21, [], activity(args.buckets, args.brokers, T + 30_000, T + 31_000, silent=0))
        timings["release_batch_ms"] = (time.perf_counter() - t) * 1000
        timings["notified"] = sum(1 for a in out if a["notify"])
        timings["records"] = len(out)
    return timings


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--brokers", type=int, default=30)
    p.add_argument("--buckets", type=int, default=16)
    p.add_argument("--alerts", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--gate-partitions", type=int, default=0, help="also time the restart gate's steady batch")
    args = p.parse_args()
    runs = [run_once(args) for _ in range(args.runs)]
    keys = ["steady_batch_ms", "outage_batch_ms", "release_batch_ms"]
    if args.gate_partitions:
        for r in runs:
            r.update(run_gate(args))
        keys += ["gate_step_ms", "gate_verdicts_ms"]
    summary = {}
    for key in keys:
        values = [r[key] for r in runs]
        summary[key] = {
            "median": round(statistics.median(values), 1),
            "min": round(min(values), 1),
            "max": round(max(values), 1),
        }
        print(f"{key}: {summary[key]['median']} ms ({summary[key]['min']}-{summary[key]['max']})")
    summary.update(
        brokers=args.brokers,
        buckets=args.buckets,
        alerts=args.alerts,
        gate_partitions=args.gate_partitions,
        notified=runs[0]["notified"],
        records=runs[0]["records"],
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
