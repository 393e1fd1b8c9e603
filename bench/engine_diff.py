"""Run the same inputs through the engine of two checkouts and compare their alerts byte for byte.

    python -m bench.engine_diff --against /path/to/other/.venv/bin/python [--statuses]
    python -m bench.engine_diff --every-run
    python -m bench.engine_diff --against /path/to/other/.venv/bin/python --cluster [--kept-step]

For a change to the engine that must not change what it decides (a speed change: fewer ticks,
fewer loads): every simulator scenario at several seeds, and random faulted clusters (the
generator of tests/streaming/test_incremental_state.py), each fed to a `Bucket` in micro-batches
of 1 s and of 7 s of event time, once with the bucket kept and once saved and lazily decoded
between batches (state/codec.py, as a cache miss does), then left to run out (`advance`). The
inputs are made once, here; each checkout's Python runs them (`--worker`) and prints its alert
records as JSON lines, which must be the same bytes. `--statuses` compares the status records
too (a change to when statuses go out differs there on purpose). `--every-run`: the reference
is this checkout with every isr-expiration run evaluating every partition (state/monitor.py,
SKIP_IDLE_RUNS off). `--cluster`: the whole engine instead, as the streaming query composes
it: the events routed to several buckets (a broker event to every bucket), each bucket's
outputs encoded as the stateful step sends them, then through the bridge (`split_batch`,
`decide_alerts`) into the cluster step (state/cluster.py), its state kept as its document in
memory or saved to a checkpoint folder and read back between batches (streaming/cluster_state.py,
as the query keeps it; `--kept-step`: also the step object kept), the input flushed at the end; the
decided alert records (the bridge's bytes) and the restart gate's verdicts are compared.
Exits 1 on a difference, showing the first batch that differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import zlib
from collections import Counter
from pathlib import Path

SEEDS = (0, 1, 2)
RANDOM_SEEDS = range(8)
SLICES_MS = (1000, 7000)
CLUSTER_BUCKETS = 3  # --cluster: buckets the events are routed to
# --cluster: the step between batches as the query keeps it (cluster_worker). --kept-step adds
# the step kept as it is, the pure harnesses' way (before the step named outages by id in its
# decisions, a decision kept in memory could hold on to an outage its saved state had forgotten,
# so against such a version that differs)
STATE_KEPT = ("memory", "saved")


def inputs() -> list[dict]:
    """Every case: a name, its events (contract dicts), L, and the batch length."""
    from replmon.streaming.simulator import scenarios
    from replmon.streaming.simulator.model import simulate
    from tests.streaming.test_incremental_state import CFG, random_events

    cases = []
    for name in scenarios.SCENARIOS:
        spec = scenarios.get(name)
        for seed in SEEDS:
            events, _ = simulate(spec, seed=seed)
            cases.append({"name": f"{name}/{seed}", "events": events, "lag_ms": spec.replica_lag_time_max_ms})
    for seed in RANDOM_SEEDS:
        cases.append(
            {
                "name": f"random/{seed}",
                "events": random_events(seed),
                "lag_ms": CFG.replica_lag_time_max_ms,
                "cfg": {"evict_after_ms": 40_000, "telemetry_gap_ms": 20_000, "status_interval_ms": 5000},
            }
        )
    return cases


def as_tuple(event: dict) -> tuple:
    """An event as the stateful step hands it to a bucket (EVENT_FIELDS order)."""
    from replmon.state.events import EVENT_FIELDS

    row = dict.fromkeys(EVENT_FIELDS)
    row.update((k, v) for k, v in event.items() if k in row)
    for name in ("replicas", "isr", "adding_replicas"):
        if row[name] is not None:
            row[name] = tuple(row[name])
    return tuple(row[f] for f in EVENT_FIELDS)


def worker(path: str, every_run: bool) -> None:
    """Run every case of the file with this interpreter's replmon; print one JSON line per output."""
    from replmon.state import codec, monitor
    from replmon.state.bucket import Bucket
    from replmon.state.events import TIE_RANK
    from replmon.streaming.settings import monitor_config

    if every_run:
        monitor.SKIP_IDLE_RUNS = False
    out = sys.stdout
    for case in json.loads(Path(path).read_text()):
        cfg = monitor_config(replica_lag_time_max_ms=case["lag_ms"], **case.get("cfg", {}))
        events = sorted(case["events"], key=lambda e: (e["ts"], TIE_RANK[e["type"]]))
        for slice_ms in SLICES_MS:
            for reload in (False, True):
                label = f"{case['name']} slice={slice_ms} reload={reload}"
                bucket = Bucket(0, 1)
                batches: list[list] = []
                end = None
                for ev in events:
                    if end is None or ev["ts"] >= end:
                        batches.append([])
                        end = (ev["ts"] // slice_ms + 1) * slice_ms
                    batches[-1].append(as_tuple(ev))
                for n, batch in enumerate(batches):
                    if reload and n:
                        blob = codec.encode(bucket)
                        bucket = codec.decode_chunks(
                            blob, bucket_id=0, buckets=1, cfg=cfg, lazy=True, needed=lambda: 0
                        )[0]
                    alerts: list = []
                    quarantine: list = []
                    partitions: list = []
                    replicas: list = []
                    bucket.process(batch, cfg, alerts, quarantine)
                    bucket.advance(cfg, alerts)
                    bucket.statuses(cfg, partitions, replicas, force=n == len(batches) - 1)
                    for kind, records in (
                        ("alert", alerts),
                        ("quarantine", quarantine),
                        ("partition_status", partitions),
                        ("replica_status", replicas),
                    ):
                        for r in records:
                            out.write(json.dumps([label, n, kind, r], sort_keys=True) + "\n")


def routed(events: list[dict], buckets: int) -> list[list[dict]]:
    """The events of each bucket, as parse.monitor_input routes them: a cluster-wide event to
    every bucket, a partition's to the one its key hashes to."""
    from replmon.state.events import BROADCAST

    out: list[list[dict]] = [[] for _ in range(buckets)]
    for ev in events:
        if ev["type"] in BROADCAST:
            for per_bucket in out:
                per_bucket.append(ev)
        else:
            out[
                zlib.crc32(f"{ev.get('cluster')}/{ev.get('topic')}/{ev.get('partition')}".encode()) % buckets
            ].append(ev)
    return out


def cluster_worker(path: str, kept_step: bool = False) -> None:
    """The whole engine over every case (see --cluster); one JSON line per decided alert record
    (the bytes the bridge writes) and per restart verdict."""
    from replmon.state.bucket import Bucket
    from replmon.state.events import TIE_RANK
    from replmon.streaming.settings import monitor_config

    out = sys.stdout
    for case in json.loads(Path(path).read_text()):
        cfg = monitor_config(replica_lag_time_max_ms=case["lag_ms"], **case.get("cfg", {}))
        events = sorted(case["events"], key=lambda e: (e["ts"], TIE_RANK[e["type"]]))
        for slice_ms in SLICES_MS:
            batches = sliced(events, slice_ms)
            for state in (("kept",) if kept_step else ()) + STATE_KEPT:
                label = f"{case['name']} slice={slice_ms} state={state}"
                buckets = [Bucket(b, CLUSTER_BUCKETS) for b in range(CLUSTER_BUCKETS)]
                with tempfile.TemporaryDirectory(prefix="replmon-engine-diff-ckpt-") as checkpoint:
                    for n, kind, line in whole_engine(buckets, batches, cfg, state, checkpoint):
                        out.write(json.dumps([label, n, kind, line]) + "\n")


def sliced(events: list[dict], slice_ms: int) -> list[list[dict]]:
    """The events cut into micro-batches of `slice_ms` of event time."""
    batches: list[list[dict]] = []
    end = None
    for ev in events:
        if end is None or ev["ts"] >= end:
            batches.append([])
            end = (ev["ts"] // slice_ms + 1) * slice_ms
        batches[-1].append(ev)
    return batches


class KeptStep:
    """The cluster step kept as it is between batches (no document), as the pure test harnesses
    run it (tests/faults/replay.py), with the runner's interface."""

    def __init__(self, cfg) -> None:
        from replmon.state.cluster import ClusterStep, cluster_config

        self.step = ClusterStep(cluster_config(cfg))
        self.batches = 0

    def run(
        self, batch_id: int, alerts: list, activity: list, flush: bool = False, statuses=([], [])
    ) -> list:
        self.batches = batch_id + 1
        return self.step.step(alerts, activity, flush=flush, statuses=statuses)

    @property
    def verdicts(self) -> list:
        return self.step.restart_verdicts()

    def next_batch(self) -> int:
        return self.batches


def whole_engine(buckets: list, batches: list[list[dict]], cfg, state: str, checkpoint: str):
    """(batch, kind, JSON text) of every decided alert and restart verdict, batch by batch."""
    from replmon.streaming.bridge import decide_alerts, split_batch
    from replmon.streaming.cluster_state import ClusterStepRunner

    encode = json.JSONEncoder(separators=(",", ":")).encode  # as streaming/stateful.py sends them
    runner = (
        KeptStep(cfg) if state == "kept" else ClusterStepRunner(cfg, checkpoint if state == "saved" else None)
    )
    for n, batch in enumerate(batches):
        rows: list[tuple[str, str]] = []
        for bucket, events in zip(buckets, routed(batch, len(buckets)), strict=True):
            alerts: list = []
            quarantine: list = []
            partitions: list = []
            replicas: list = []
            bucket.process([as_tuple(ev) for ev in events], cfg, alerts, quarantine)
            bucket.advance(cfg, alerts)
            bucket.statuses(cfg, partitions, replicas, force=n == len(batches) - 1)
            for kind, records in (
                ("alerts", alerts),
                ("partition_status", partitions),
                ("replica_status", replicas),
                ("activity", bucket.activity_reports()),
            ):
                rows += [(kind, encode(r)) for r in records]
        records = split_batch(rows)
        decide_alerts(records, runner, n)
        yield from ((n, "alert", payload) for payload, _ in records["alerts"])
        yield from ((n, "verdict", json.dumps(v, sort_keys=True)) for v in runner.verdicts)
    records = split_batch([])
    decide_alerts(records, runner, runner.next_batch(), flush=True)
    yield from ((len(batches), "alert", payload) for payload, _ in records["alerts"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", help="the other checkout's Python (its replmon is the reference)")
    ap.add_argument("--statuses", action="store_true", help="compare the status records too")
    ap.add_argument("--every-run", action="store_true", help="the reference: this code, every run evaluated")
    ap.add_argument("--cluster", action="store_true", help="the whole engine: buckets and the cluster step")
    ap.add_argument("--kept-step", action="store_true", help="--cluster: also the step kept between batches")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        if args.cluster:
            cluster_worker(args.worker, args.kept_step)
        else:
            worker(args.worker, args.every_run)
        return 0
    if not args.against and not args.every_run:
        ap.error("--against or --every-run is required")
    cases, outputs = run_workers(args)
    kinds = (
        ("alert", "verdict")
        if args.cluster
        else ("alert", "quarantine", "partition_status", "replica_status")
        if args.statuses
        else ("alert", "quarantine")
    )
    theirs, ours = ([line for line in lines if json.loads(line)[2] in kinds] for lines in outputs)
    per_kind = Counter(json.loads(line)[2] for line in ours)
    states = (("kept",) if args.kept_step else ()) + STATE_KEPT
    ways = f"{CLUSTER_BUCKETS} buckets + cluster step {'/'.join(states)}" if args.cluster else "kept/reloaded"
    print(
        f"{cases} cases x {len(SLICES_MS)} batch lengths x {ways}: "
        f"{len(theirs)} records against {len(ours)} ({', '.join(f'{per_kind[k]} {k}' for k in kinds)})"
    )
    if theirs != ours:
        show_difference(theirs, ours)
        return 1
    digest = hashlib.sha256("\n".join(ours).encode()).hexdigest()[:16]
    all_theirs, all_ours = outputs
    if args.cluster:
        print(f"identical (sha256 of the records {digest})")
        return 0
    print(f"identical; statuses: {len(all_theirs) - len(theirs)} against {len(all_ours) - len(ours)} records")
    return 0


def run_workers(args: argparse.Namespace) -> tuple[int, list[list[str]]]:
    """The inputs made once; the reference's worker and this checkout's run them."""
    with tempfile.TemporaryDirectory(prefix="replmon-engine-diff-") as folder:
        path = Path(folder) / "cases.json"
        cases = inputs()
        path.write_text(json.dumps(cases))
        outputs = []
        mode = (["--cluster"] if args.cluster else []) + (["--kept-step"] if args.kept_step else [])
        reference = [args.against or sys.executable, __file__, "--worker", str(path), *mode]
        for command in (
            reference + (["--every-run"] if args.every_run else []),
            [sys.executable, __file__, "--worker", str(path), *mode],
        ):
            run = subprocess.run(command, capture_output=True, text=True, check=True)
            outputs.append(run.stdout.splitlines())
    return len(cases), outputs


def show_difference(theirs: list[str], ours: list[str]) -> None:
    """The first batch whose records differ, record by record."""
    batch = next(
        (i for i, (a, b) in enumerate(zip(theirs, ours, strict=False)) if a != b),
        min(len(theirs), len(ours)) - 1,
    )
    where = json.loads(theirs[batch])[:2]
    same = [line for line in theirs if json.loads(line)[:2] == where]
    mine = [line for line in ours if json.loads(line)[:2] == where]
    print(f"first difference in {where[0]}, batch {where[1]}:")
    for line in sorted(set(same) - set(mine)):
        print(f"  only in the reference: {line}")
    for line in sorted(set(mine) - set(same)):
        print(f"  only in this code:     {line}")
    if sorted(same) == sorted(mine):
        print("  (the same records in another order)")
    print(f"{sum(a != b for a, b in zip(theirs, ours, strict=False))} records differ in place")


if __name__ == "__main__":
    sys.exit(main())
