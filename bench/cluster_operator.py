"""The cluster step in Spark, the two designs of issue 19 on the same micro-batches:

(a) the fold on the driver, as the query runs it today: foreachBatch collects the rows
    (streaming/bridge.py split_batch, decide_alerts) and ClusterStepRunner folds them, its state
    a JSON file beside the checkpoint (streaming/cluster_state.py);
(b) a stateful operator keyed by cluster running the same ClusterStep inside
    applyInPandasWithState (append, EventTimeTimeout, as the bucket operator), its state a JSON
    string column in Spark's state store; foreachBatch collects the decided records.

Spark refuses (b) chained after the bucket operator in one query ("Multiple
applyInPandasWithStates are not supported on a streaming DataFrames/Datasets", docs/design.md
item 7), so both read the buckets' output rows from files, one file per micro-batch
(maxFilesPerTrigger=1): a warm-up batch (excluded), steady batches (activity rows only, one per
bucket with every broker), a batch in which a broker falls silent, the outage batch (every
partition alert of the outage at once, as bench/cluster_step.py builds them) and batches while
the outage is open (the step's state holds every decided alert).

    python bench/cluster_operator.py [--brokers 30] [--buckets 16] [--alerts 20000] [--runs 3]
        [--steady 5] [--open 3] [--raw FILE]

Per design and kind of batch: the micro-batch's time (Spark's triggerExecution), and where it
goes (`attribute`): in (a) the scan with the rows' transfer to the driver, the fold, Spark's
bookkeeping; in (b) the fold inside the Python worker, the state store's commit, the shuffle
with the rows' way to and from the Python worker, the bookkeeping. Each run's median per kind
of batch, then the median over the runs with min-max; runs of (a) and (b) alternate so that
both see the same load (the load averages are printed). Checks that both decided the same
records. Prints a last line of JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import pandas as pd
from cluster_step import T, activity, outage_alerts  # bench/cluster_step.py: the same builders
from pyspark.sql import functions as F

from replmon.state.cluster import ClusterStep, cluster_config
from replmon.streaming.bridge import decide_alerts, split_batch
from replmon.streaming.cluster_state import ClusterStepRunner
from replmon.streaming.session import build_session
from replmon.streaming.settings import Settings, SparkConf, monitor_config

_encode = json.JSONEncoder(separators=(",", ":")).encode
KINDS = ("steady", "silence", "outage", "open")


def batches(args) -> list[tuple[str, list[tuple[str, int, str]]]]:
    """(kind of batch, rows) per micro-batch; a row is (kind, event time ms, payload), the
    buckets' output as the bucket operator writes it."""

    def act(start: int, end: int, silent: int | None = None) -> list:
        return [
            ("activity", end, _encode(r)) for r in activity(args.buckets, args.brokers, start, end, silent)
        ]

    out = [("warmup", act(T, T + 1000))]
    t = T + 1000
    for _ in range(args.steady):
        out.append(("steady", act(t, t + 1000)))
        t += 1000
    out.append(("silence", act(t, t + 10_000, silent=0)))  # broker 0 silent: its episode opens
    t += 10_000
    alerts = [("alerts", a["ts"], _encode(a)) for a in outage_alerts(args.alerts, 0, t)]
    out.append(("outage", alerts + act(t, t + 10_000, silent=0)))
    t += 10_000
    for _ in range(args.open):
        out.append(("open", act(t, t + 1000, silent=0)))
        t += 1000
    return out


def write_input(folder: Path, plan: list) -> None:
    """One file per micro-batch, tab-separated (kind, batch index, event ms, payload): JSON
    escapes tabs. Modification times set one second apart: the file source reads in that order."""
    folder.mkdir(parents=True)
    now = time.time() - len(plan) - 10
    for i, (_, rows) in enumerate(plan):
        path = folder / f"batch-{i:03d}.tsv"
        path.write_text("".join(f"{kind}\t{i}\t{ms}\t{payload}\n" for kind, ms, payload in rows))
        os.utime(path, (now + i, now + i))


def source(spark, folder: Path):
    parts = F.split(F.col("value"), "\t", 4)
    return (
        spark.readStream.format("text")
        .option("maxFilesPerTrigger", 1)
        .load(str(folder))
        .select(
            parts[0].alias("kind"),
            parts[1].cast("int").alias("batch"),
            F.timestamp_millis(parts[2].cast("long")).alias("event_time"),
            parts[3].alias("payload"),
        )
    )


# -- (a) the driver fold -------------------------------------------------------------------------
def driver_query(spark, folder: Path, checkpoint: str, cfg, seen: dict):
    runner = ClusterStepRunner(cfg, checkpoint)

    def on_batch(batch_df, batch_id: int) -> None:
        t0 = time.perf_counter()
        table = batch_df.select("kind", "batch", "payload").toArrow()
        t1 = time.perf_counter()
        index = table.column("batch").to_pylist()
        rows = zip(table.column("kind").to_pylist(), table.column("payload").to_pylist(), strict=True)
        records = split_batch(rows)
        decide_alerts(records, runner, batch_id)
        t2 = time.perf_counter()
        seen[batch_id] = {
            "batch": index[0] if index else None,
            "transfer_ms": (t1 - t0) * 1000,
            "fold_ms": (t2 - t1) * 1000,
            "decided": sorted(p for p, _ in records["alerts"]),
        }

    return (
        source(spark, folder)
        .writeStream.queryName(f"cluster_fold_{uuid.uuid4().hex[:6]}")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(on_batch)
        .trigger(availableNow=True)
    )


# -- (b) the stateful operator keyed by cluster --------------------------------------------------
def state_func(cfg):
    """The function handed to applyInPandasWithState: the same fold, its state a JSON string.
    Emits the decided records and one `timing` row (what the call spent, measured in the
    Python worker)."""
    ccfg = cluster_config(cfg)

    def func(key, frames, state):
        t0 = time.perf_counter()
        batch = None
        alerts: list = []
        reports: list = []
        if not state.hasTimedOut:
            pdf = pd.concat(list(frames), ignore_index=True)
            if len(pdf):
                batch = int(pdf["batch"].min())
            records = split_batch(zip(pdf["kind"].tolist(), pdf["payload"].tolist(), strict=True))
            alerts = [r for _, r in records["alerts"]]
            reports = [r for _, r in records["activity"]]
        t1 = time.perf_counter()
        step = ClusterStep.from_doc(ccfg, json.loads(state.get[0]) if state.exists else None)
        t2 = time.perf_counter()
        out = step.step(alerts, reports)
        t3 = time.perf_counter()
        doc = _encode(step.to_doc())
        state.update((doc,))
        newest = max((r["ts"] for r in alerts), default=0)
        state.setTimeoutTimestamp(max(newest + ccfg.group_wait_ms, state.getCurrentWatermarkMs() + 1, 1))
        t4 = time.perf_counter()
        payloads = [_encode(r) for r in out]
        t5 = time.perf_counter()
        timing = {
            "batch": batch,
            "decode_ms": (t1 - t0) * 1000,
            "state_load_ms": (t2 - t1) * 1000,
            "step_ms": (t3 - t2) * 1000,
            "state_save_ms": (t4 - t3) * 1000,
            "encode_ms": (t5 - t4) * 1000,
            "state_bytes": len(doc),
        }
        yield pd.DataFrame(
            {"kind": ["alerts"] * len(payloads) + ["timing"], "payload": [*payloads, _encode(timing)]}
        )

    return func


def operator_query(spark, folder: Path, checkpoint: str, cfg, settings: Settings, seen: dict):
    def on_batch(batch_df, batch_id: int) -> None:
        t0 = time.perf_counter()
        table = batch_df.toArrow()
        t1 = time.perf_counter()
        rows = list(zip(table.column("kind").to_pylist(), table.column("payload").to_pylist(), strict=True))
        timing = [json.loads(p) for k, p in rows if k == "timing"]
        records = split_batch((k, p) for k, p in rows if k != "timing")
        entry = {"collect_ms": (t1 - t0) * 1000, "decided": sorted(p for p, _ in records["alerts"])}
        if timing:
            entry.update(timing[0])
        seen[batch_id] = entry

    stream = settings.stream
    decided = (
        source(spark, folder)
        .where(F.col("kind").isin("alerts", "activity"))
        .withWatermark("event_time", f"{stream.watermark_delay_ms} milliseconds")
        .withColumn("cluster", F.get_json_object("payload", "$.cluster"))
        .groupBy("cluster")
        .applyInPandasWithState(
            state_func(cfg), "kind string, payload string", "doc string", "append", "EventTimeTimeout"
        )
    )
    return (
        decided.writeStream.queryName(f"cluster_operator_{uuid.uuid4().hex[:6]}")
        .outputMode("append")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(on_batch)
        .trigger(availableNow=True)
    )


def run_design(
    design: str, spark, folder: Path, checkpoint: str, plan: list, cfg, settings: Settings
) -> dict:
    """One query over the whole input: per micro-batch of the plan, its kind and timings.
    `checkpoint`: a new folder (the state store's maintenance thread may still write into it
    after the query stopped: it is removed with the bench's folder)."""
    seen: dict[int, dict] = {}
    if design == "driver":
        writer = driver_query(spark, folder, checkpoint, cfg, seen)
    else:
        writer = operator_query(spark, folder, checkpoint, cfg, settings, seen)
    query = writer.start()
    try:
        if not query.awaitTermination(1800):
            raise RuntimeError(f"{design}: the query did not end in 30 min")
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        progress = [json.loads(p.json) for p in query.recentProgress]
    finally:
        query.stop()
    out: dict[int, dict] = {}
    extra = []
    for p in progress:
        entry = seen.get(p["batchId"], {})
        durations = p["durationMs"]
        ops = p.get("stateOperators") or []
        row = {
            **entry,
            "trigger_ms": durations.get("triggerExecution", 0),
            "add_batch_ms": durations.get("addBatch", 0),
            "state_commit_ms": sum(o.get("commitTimeMs", 0) for o in ops),
            "state_update_ms": sum(o.get("allUpdatesTimeMs", 0) for o in ops),
        }
        index = entry.get("batch")
        if index is None:
            extra.append(row)  # a batch without input rows (e.g. Spark's no-data batch)
        else:
            out[index] = {**row, "kind": plan[index][0]}
    return {"batches": out, "extra": extra}


def attribute(design: str, b: dict) -> dict:
    """Where a micro-batch's time went (ms). The rows are pulled by foreachBatch's toArrow, which
    runs the batch's plan: in (a) the scan and the rows' transfer to the driver; in (b) the
    scan, the shuffle, the Python worker (the fold in it included), the state store's commit
    and the decided rows' transfer. The rest of the batch is Spark's bookkeeping (planning,
    offset and commit logs) and, in (b), the driver's decoding of the decided rows."""
    if design == "driver":
        return {
            "batch_ms": b["trigger_ms"],
            "scan_to_driver_ms": b["transfer_ms"],
            "fold_ms": b["fold_ms"],
            "bookkeeping_ms": b["trigger_ms"] - b["transfer_ms"] - b["fold_ms"],
        }
    worker = sum(b[k] for k in ("decode_ms", "state_load_ms", "step_ms", "state_save_ms", "encode_ms"))
    return {
        "batch_ms": b["trigger_ms"],
        "execution_ms": b["collect_ms"],
        "worker_fold_ms": worker,  # rows decoded, state loaded and saved as JSON, the step, encoded
        "worker_step_ms": b["step_ms"],  # ClusterStep.step alone
        "state_commit_ms": b["state_commit_ms"],
        # the scan, the shuffle, the rows' way to and from the Python worker, scheduling
        "shuffle_and_python_ms": b["collect_ms"] - worker - b["state_commit_ms"],
        "bookkeeping_ms": b["trigger_ms"] - b["collect_ms"],
        "state_bytes": b["state_bytes"],
    }


def summarize(runs: list[dict], design: str) -> dict:
    """Per kind of batch: the median over the runs of each run's median, with min-max."""
    out: dict = {}
    for kind in KINDS:
        per_run = []
        for r in runs:
            rows = [attribute(design, b) for b in r["batches"].values() if b["kind"] == kind]
            if rows:
                per_run.append({k: statistics.median(x[k] for x in rows) for k in rows[0]})
        if not per_run:
            continue
        out[kind] = {
            k: {
                "median": round(statistics.median(x[k] for x in per_run), 1),
                "min": round(min(x[k] for x in per_run), 1),
                "max": round(max(x[k] for x in per_run), 1),
            }
            for k in per_run[0]
        }
    out["extra_batches"] = statistics.median(len(r["extra"]) for r in runs)
    return out


def load() -> str:
    """The load averages (1, 5, 15 min)."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--brokers", type=int, default=30)
    p.add_argument("--buckets", type=int, default=16)
    p.add_argument("--alerts", type=int, default=20_000)
    p.add_argument("--steady", type=int, default=5, help="steady batches per run (after the warm-up)")
    p.add_argument("--open", type=int, default=3, help="batches after the outage batch")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--partitions", type=int, default=2, help="shuffle partitions (replmon's default: 2)")
    p.add_argument("--raw", help="also write every run's per-batch figures to this JSON file")
    args = p.parse_args()
    settings = Settings()
    cfg = monitor_config()
    plan = batches(args)
    spark = build_session(
        SparkConf(master="local[2]", shuffle_partitions=args.partitions, driver_memory="2g"),
        app_name="bench-cluster-operator",
    )
    loads = [load()]
    results: dict[str, list] = {"driver": [], "operator": []}
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as d:
        folder = Path(d) / "input"
        write_input(folder, plan)
        for i in range(args.runs):
            order = ("driver", "operator") if i % 2 == 0 else ("operator", "driver")
            for design in order:
                checkpoint = str(Path(d) / f"checkpoint-{design}-{i}")
                results[design].append(run_design(design, spark, folder, checkpoint, plan, cfg, settings))
                if args.raw:
                    Path(args.raw).write_text(json.dumps(results))
                loads.append(load())
                print(f"run {i + 1} {design} done (load {loads[-1]})", flush=True)
    version = spark.version
    spark.stop()
    same = all(
        [a["batches"][k]["decided"] for k in sorted(a["batches"])]
        == [b["batches"][k]["decided"] for k in sorted(b["batches"])]
        for a, b in zip(results["driver"], results["operator"], strict=True)
    )
    decided = [len(b["decided"]) for b in results["driver"][0]["batches"].values()]
    summary = {design: summarize(runs, design) for design, runs in results.items()}
    for design, per_kind in summary.items():
        for kind, figures in per_kind.items():
            if kind == "extra_batches":
                continue
            text = ", ".join(f"{k} {v['median']} ({v['min']}-{v['max']})" for k, v in figures.items())
            print(f"{design:8} {kind:8} {text}")
    print(f"same decisions in (a) and (b): {same}; decided records per batch: {decided}")
    print(
        json.dumps(
            {
                **summary,
                "same_decisions": same,
                "decided_per_batch": decided,
                "load": loads,
                "spark": version,
                "brokers": args.brokers,
                "buckets": args.buckets,
                "alerts": args.alerts,
                "runs": args.runs,
                "partitions": args.partitions,
            }
        )
    )


if __name__ == "__main__":
    main()
