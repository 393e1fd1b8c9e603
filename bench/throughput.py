"""Throughput of the real streaming query on a large simulated cluster.

    python bench/throughput.py --partitions 100000 [--seconds 8] [--batch-events N] [--runs 3] [--floor]
                               [--busy 0.1] [--idle-every 8]

Generates a steady cluster's events (replication factor 3: per partition an append and a fetch
by each follower every `--interval-ms`, plus heartbeats) as JSON-lines files, one file per
micro-batch. `--busy 0.1`: only a tenth of the partitions has that traffic, the others are idle
as the collector's compaction leaves them (issue 21): a caught-up fetch per follower every
`--idle-every` intervals (8: one per L/8 at L = 30 s; the partitions as bench/bucket_step.py
--busy picks them). Then runs:
  1. the stateless ceiling: the same files parsed, validated and counted (no state);
  2. with --floor, the floor: the monitor's query with a Python step that only reads its input
     (what Spark's plan costs, whatever the engine does: the most the monitor could reach);
  3. the monitor query (parse, watermark, bucketed applyInPandasWithState, outputs collected).
Each run prints where a batch's time goes: the stateless parse and validation of the same input
(JVM), and the stateful step's own phases in Python (input: Arrow to pandas; quarantine of the
rows the JVM found invalid, and event-time sort; state load; engine; state save; output
encoding), as wall time and as the CPU time the Python threads used (less affected by other
work on the machine). With --runs N the whole is repeated N times in one session and every
figure is the median, with its min-max spread. With --floor, the monitor's rate is also given
as its share of the floor's (`share_of_floor`), beside its share of the ceiling (`share`). The
last line is one JSON object with all figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

TIMEOUT_S = 3600  # a benchmark query that runs longer than this is hung, not slow


T0 = 1_767_225_600_000


def is_busy(i: int, busy: float) -> bool:
    """Whether partition i is in the busy share (as bench/bucket_step.is_busy: spread out)."""
    return (i * 7919) % 1000 < busy * 1000


def generate(
    folder: Path,
    partitions: int,
    seconds: float,
    interval_ms: int,
    batch_events: int,
    topics: int = 10,
    busy: float = 1.0,
    idle_every: int = 8,
) -> int:
    """Steady cluster, sorted by time; split into files of ~batch_events lines. `busy`: the
    share of partitions with traffic every interval; the others only fetched, caught up, by each
    follower every `idle_every` intervals (staggered)."""
    folder.mkdir(parents=True, exist_ok=True)
    per_topic = max(1, partitions // topics)
    names = [(f"topic-{i // per_topic}", i % per_topic) for i in range(partitions)]
    leaders = [1 + i % 6 for i in range(partitions)]
    lines: list[str] = []
    n_file = 0
    total = 0

    def flush():
        nonlocal lines, n_file, total
        if lines:
            (folder / f"part-{n_file:05d}.jsonl").write_text("\n".join(lines) + "\n")
            total += len(lines)
            n_file += 1
            lines = []

    for i, (topic, p) in enumerate(names):
        leader = leaders[i]
        replicas = [leader, 1 + (leader % 6), 1 + ((leader + 1) % 6)]
        lines.append(
            json.dumps(
                {
                    "type": "metadata",
                    "ts": T0,
                    "cluster": "bench",
                    "topic": topic,
                    "partition": p,
                    "leader": leader,
                    "leader_epoch": 1,
                    "replicas": replicas,
                    "isr": replicas,
                    "leader_leo": 0,
                    "hw": 0,
                }
            )
        )
    steps = int(seconds * 1000 / interval_ms)
    for s in range(1, steps + 1):
        t = T0 + s * interval_ms
        leo = s * 10
        lines.append(f'{{"type":"heartbeat","ts":{t},"cluster":"bench"}}')
        for i, (topic, p) in enumerate(names):
            leader = leaders[i]
            f1, f2 = 1 + (leader % 6), 1 + ((leader + 1) % 6)
            jt = t + i % 97
            if not is_busy(i, busy):
                if (s + i) % idle_every == 0:
                    for f in (f1, f2):
                        lines.append(
                            f'{{"type":"fetch","ts":{jt + 1},"cluster":"bench","topic":"{topic}",'
                            f'"partition":{p},"replica":{f},"fetch_offset":0,"leader_leo":0}}'
                        )
                    if len(lines) >= batch_events:
                        flush()
                continue
            lines.append(
                f'{{"type":"append","ts":{jt},"cluster":"bench","topic":"{topic}",'
                f'"partition":{p},"leader_leo":{leo}}}'
            )
            lines.append(
                f'{{"type":"fetch","ts":{jt + 1},"cluster":"bench","topic":"{topic}",'
                f'"partition":{p},"replica":{f1},"fetch_offset":{leo},"leader_leo":{leo}}}'
            )
            lines.append(
                f'{{"type":"fetch","ts":{jt + 2},"cluster":"bench","topic":"{topic}",'
                f'"partition":{p},"replica":{f2},"fetch_offset":{leo - 5},'
                f'"leader_leo":{leo}}}'
            )
            if len(lines) >= batch_events:
                flush()
    flush()
    return total


class RssSampler(threading.Thread):
    """Peak resident memory of this process and all its descendants (JVM, Python workers), and
    of the Python workers alone (pyspark.daemon and the workers it forks; their shared pages are
    counted once per process, so this is an upper bound)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0
        self.peak_workers = 0
        self.stop = threading.Event()

    def _tree_rss(self) -> tuple[int, int]:
        pids = {os.getpid()}
        children: dict[int, list[int]] = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                    children.setdefault(ppid, []).append(int(d))
                except OSError:
                    continue
        stack = [os.getpid()]
        while stack:
            for c in children.get(stack.pop(), []):
                pids.add(c)
                stack.append(c)
        total = workers = 0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/statm") as f:
                    rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    worker = b"pyspark.daemon" in f.read()
            except OSError:
                continue
            total += rss
            workers += rss if worker else 0
        return total, workers

    def run(self) -> None:
        while not self.stop.is_set():
            total, workers = self._tree_rss()
            self.peak = max(self.peak, total)
            self.peak_workers = max(self.peak_workers, workers)
            time.sleep(0.5)


def run_query(spark, df_builder, work: Path, name: str):
    """Run one availableNow query (one input file per micro-batch); return the steady batch
    durations (ms), their input rows, the last progress and the output row count."""
    from pyspark.sql import functions as F

    counts = {"rows": 0}

    def sink(batch_df, batch_id):
        if name.startswith("ceiling"):
            counts["rows"] += batch_df.agg(F.count_if("ok")).collect()[0][0]
        else:
            counts["rows"] += len(batch_df.toArrow())

    q = (
        df_builder()
        .writeStream.queryName(f"{name}_{uuid.uuid4().hex[:6]}")
        .option("checkpointLocation", str(work / f"ckpt-{name}"))
        .foreachBatch(sink)
        .trigger(availableNow=True)
        .start()
    )
    if not q.awaitTermination(TIMEOUT_S):
        q.stop()
        raise RuntimeError(f"{name}: the query did not end within {TIMEOUT_S} s")
    progress = [p for p in q.recentProgress if p.get("numInputRows", 0) > 0]
    # Sustained figures leave out the first micro-batch (JVM warm-up, code generation, the
    # Python workers starting) when there is more than one.
    steady = progress[1:] if len(progress) > 1 else progress
    durations = [p["durationMs"]["triggerExecution"] for p in steady]
    rows = sum(p["numInputRows"] for p in steady)
    return durations, rows, progress[-1] if progress else {}, counts["rows"]


def p99(values: list[float]) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, round(0.99 * (len(v) - 1)))]


PHASES = ("input", "quarantine_and_sort", "state_load", "engine", "state_save", "output")


def read_phases(folder: Path, batches: int) -> dict:
    """The stateful step's own timings (streaming/stateful.py Phases), as ms per micro-batch
    summed over the parallel tasks: `k` the wall time inside the Python function (on a shared
    machine it includes waiting for a core), `k_cpu` the CPU time the function's thread used
    (what the code costs, whatever else runs). The first (warm-up) batch's calls cannot be told
    apart, so this averages over all batches."""
    names = [*PHASES, *(f"{k}_cpu" for k in PHASES)]
    totals = dict.fromkeys(names, 0.0)
    calls = 0
    for f in folder.glob("phases-*.jsonl"):
        for line in f.read_text().splitlines():
            row = json.loads(line)
            calls += 1
            for k in names:
                totals[k] += row.get(k, 0.0)
    return {k: v / max(1, batches) for k, v in totals.items()} | {"calls": calls}


def _read_only(key, frames, state):
    """The floor's stateful step: reads every input row (the Arrow transfer and the conversion
    to pandas happen as the frames are iterated), keeps a token state, emits nothing. What is
    left of a batch is what Spark's plan costs whatever the engine does."""
    for frame in frames:
        len(frame)
    state.update((b"floor",))
    yield from ()


def one_run(spark, work: Path, args, n: int) -> dict:
    from pyspark.sql import functions as F

    from replmon.streaming.checkpoint import balanced_keys
    from replmon.streaming.parse import contract_reason, parse_events
    from replmon.streaming.query import monitor_outputs
    from replmon.streaming.settings import Settings
    from replmon.streaming.sources import file_source

    profile = work / f"phases-{n}"
    profile.mkdir()
    settings = Settings(
        input_path=str(work / "in"),
        output_dir=str(work / "out"),
        stream={"buckets": args.buckets, "status_interval_ms": 10_000, "profile_dir": str(profile)},
        spark={"max_files_per_trigger": 1},
    )

    def ceiling_df():
        src = file_source(spark, str(work / "in"), 1)
        parsed = parse_events(src, seq=F.col("seq"))
        # the same contract checks as the monitor's (parse.contract_reason); the sink counts the
        # valid rows (an aggregate: a filter would be pushed below the parse and inline the
        # JSON parser into every check)
        return parsed.select(contract_reason(settings.stream.max_future_ms).isNull().alias("ok"))

    # bucket keys as start_query gives a new checkpoint: spread evenly over the shuffle partitions
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    keys = balanced_keys(args.buckets, partitions)

    def monitor_df():
        return monitor_outputs(file_source(spark, str(work / "in"), 1), settings, keys, partitions=partitions)

    def floor_df():
        return monitor_outputs(file_source(spark, str(work / "in"), 1), settings, keys, state_func=_read_only)

    c_dur, c_rows, _, _ = run_query(spark, ceiling_df, work, f"ceiling{n}")
    ceiling = c_rows / (sum(c_dur) / 1000)
    floor = {}
    if args.floor:
        f_dur, f_rows, _, _ = run_query(spark, floor_df, work, f"floor{n}")
        floor = {
            "floor_events_per_s": f_rows / (sum(f_dur) / 1000),
            "floor_batch_ms_p50": statistics.median(f_dur),
        }
        floor["floor_share"] = floor["floor_events_per_s"] / ceiling
    m_dur, m_rows, last, out_rows = run_query(spark, monitor_df, work, f"monitor{n}")
    if os.environ.get("BENCH_DEBUG"):
        print(json.dumps(last, indent=1, default=str)[:8000])
    rate = m_rows / (sum(m_dur) / 1000)
    ops = (last.get("stateOperators") or [{}])[0]
    state_bytes = ops.get("memoryUsedBytes", 0)
    replicas = args.partitions * 3
    phases = read_phases(profile, len(m_dur) + 1)
    r = {
        "events": m_rows,
        "events_per_s": rate,
        "ceiling_events_per_s": ceiling,
        "share": rate / ceiling,
        **({"share_of_floor": rate / floor["floor_events_per_s"]} if floor else {}),
        "batch_ms_p50": statistics.median(m_dur),
        "batch_ms_p99": p99(m_dur),
        "ceiling_batch_ms_p50": statistics.median(c_dur),
        "state_bytes_per_replica": state_bytes / replicas,
        "output_records": out_rows,
        "batches": len(m_dur),
        **floor,
        **{f"py_{k}_ms": v for k, v in phases.items() if k != "calls"},
    }
    print(
        f"run {n}: monitor {m_rows:,} events in {len(m_dur)} steady micro-batches, "
        f"{rate:,.0f} events/s = {100 * r['share']:.0f}% of the ceiling {ceiling:,.0f}"
        + (f", {100 * r['share_of_floor']:.0f}% of the floor" if floor else "")
        + "; "
        f"batch ms p50 {r['batch_ms_p50']:.0f} p99 {r['batch_ms_p99']:.0f}; "
        f"{state_bytes / replicas:.0f} B state per replica"
    )
    if floor:
        print(
            f"  floor (the same query, its Python step only reading its input): "
            f"{floor['floor_events_per_s']:,.0f} events/s = {100 * floor['floor_share']:.0f}% "
            f"of the ceiling; batch ms p50 {floor['floor_batch_ms_p50']:.0f}"
        )
    print(
        f"  where a batch goes: stateless parse+validate+count of the same input (JVM) "
        f"{r['ceiling_batch_ms_p50']:.0f} ms wall; stateful step in Python, ms summed over the "
        f"parallel tasks, wall (CPU): "
        + ", ".join(f"{k} {phases[k]:.0f} ({phases[k + '_cpu']:.0f})" for k in PHASES)
        + f"; the rest of the batch (shuffle, Arrow transfer, JVM state store) is wall minus "
        f"Python over {args.cores} cores"
    )
    return r


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=8.0, help="event time to simulate")
    ap.add_argument("--interval-ms", type=int, default=500, help="fetch/append period per partition")
    ap.add_argument(
        "--batch-events",
        type=int,
        default=None,
        help="events per micro-batch (default: one round of every partition, 3 x partitions, at least 100k)",
    )
    ap.add_argument("--buckets", type=int, default=16, help="stream.buckets (its default)")
    ap.add_argument(
        "--runs", type=int, default=1, help="repeat ceiling + monitor; figures are the median with min-max"
    )
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also run the floor: the monitor's query with a Python step that only "
        "reads its input (what the plan costs whatever the engine does)",
    )
    ap.add_argument(
        "--busy",
        type=float,
        default=1.0,
        help="share of partitions with traffic every interval; the rest idle (a caught-up fetch per "
        "follower every --idle-every intervals)",
    )
    ap.add_argument("--idle-every", type=int, default=8, help="intervals between an idle partition's fetches")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    batch_events = args.batch_events or max(100_000, 3 * args.partitions)

    from replmon.streaming.session import build_session
    from replmon.streaming.settings import SparkConf

    work = Path(tempfile.mkdtemp(prefix="replmon-bench-"))
    t = time.time()
    total = generate(
        work / "in",
        args.partitions,
        args.seconds,
        args.interval_ms,
        batch_events,
        busy=args.busy,
        idle_every=args.idle_every,
    )
    files = len(list((work / "in").glob("*.jsonl")))
    print(
        f"generated {total:,} events in {files} files of ~{batch_events:,} for "
        f"{args.partitions:,} partitions (RF 3, a share of {args.busy:g} busy) in {time.time() - t:.1f} s"
    )

    rss = RssSampler()
    rss.start()
    spark = build_session(
        SparkConf(driver_memory=args.driver_memory, master=f"local[{args.cores}]"), app_name="replmon-bench"
    )
    runs = [one_run(spark, work, args, n) for n in range(args.runs)]
    rss.stop.set()
    spark.stop()
    keys = [k for k in runs[0] if k not in ("events", "batches", "output_records")]
    summary = {k: spread([r[k] for r in runs]) for k in keys}
    med = {k: v["median"] for k, v in summary.items()}
    print(
        f"summary over {args.runs} run(s) (median, min-max): "
        + "; ".join(f"{k} {v['median']:,.2f} ({v['min']:,.2f}-{v['max']:,.2f})" for k, v in summary.items())
    )
    print(
        f"peak RSS (JVM + Python workers) {rss.peak / 2**20:,.0f} MB, of which the Python "
        f"workers at most {rss.peak_workers / 2**20:,.0f} MB"
    )
    print(
        json.dumps(
            {
                "partitions": args.partitions,
                "events": runs[0]["events"],
                "batch_events": batch_events,
                "busy": args.busy,
                "buckets": args.buckets,
                "runs": args.runs,
                "events_per_s": round(med["events_per_s"]),
                "ceiling_events_per_s": round(med["ceiling_events_per_s"]),
                "share": round(med["share"], 3),
                **(
                    {
                        "share_of_floor": round(med["share_of_floor"], 3),
                        "floor_events_per_s": round(med["floor_events_per_s"]),
                        "floor_share": round(med["floor_share"], 3),
                    }
                    if args.floor
                    else {}
                ),
                "batch_ms_p50": round(med["batch_ms_p50"]),
                "batch_ms_p99": round(med["batch_ms_p99"]),
                "state_bytes_per_replica": round(med["state_bytes_per_replica"]),
                "peak_rss_mb": round(rss.peak / 2**20),
                "peak_rss_python_workers_mb": round(rss.peak_workers / 2**20),
                # the stateful step's phases, ms per batch summed over the parallel tasks:
                # wall time, and the CPU time its threads used (less affected by other load)
                "phases_wall_ms_per_batch": {k: round(med[f"py_{k}_ms"]) for k in PHASES},
                "phases_cpu_ms_per_batch": {k: round(med[f"py_{k}_cpu_ms"]) for k in PHASES},
                "spread": {k: [round(v["min"], 3), round(v["max"], 3)] for k, v in summary.items()},
                "per_run": [{k: round(v, 3) for k, v in r.items()} for r in runs],
            }
        )
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
