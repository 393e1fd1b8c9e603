"""The collector's cost, speed and event rates on the local 3-broker cluster with the request log on.

    REPLMON_SERVICES_RUN=$PWD/deploy/local/.run-bench REPLMON_PORT_OFFSET=600 \
        REPLMON_REPLICA_LAG_TIME_MAX_MS=10000 bash deploy/local/services.sh up --brokers 3
    python bench/collector.py --run-dir deploy/local/.run-bench [--loads idle,moderate,max]
        [--seconds 15] [--runs 3]

Loads, each on a fresh 6-partition RF 3 topic: `idle` (nothing produced), `moderate` (200
records/s per partition, 200 B, acks=all, kafka-python), `max` (as hard as Kafka's own
producer drives it: ProducerPerformance from deploy/local/kafka-libs, --throughput -1, acks=all,
200 B, measured once it has reached its pace). Per run, from each broker's kafka-request.log
over the run: what the load cost the broker (request-log lines and bytes per second), how fast
one process turns lines into events
(parse, fetch sessions, inference; one core), and what the collector publishes, with its lossless
compaction off and on (streaming/collect/compact.py, through the reorder buffer's 200 ms steps
and 1.5 s hold, as `replmon collect` runs them): fetch events per follower-second (one follower
of one partition) and events per partition-second. Prints median (min, max) over the runs; the
last line is one JSON object.

    python bench/collector.py --offline [--partitions 200] [--seconds 60] [--runs 3]

measures instead, without brokers, how many events per CPU second the collector's release loop
(the reorder buffer's 200 ms steps and 1.5 s hold) gets through with compaction off and on, on
a simulated RF 3 cluster (streaming/simulator: one produce batch per partition every 100 ms on
the busy half, none on the idle half; the followers fetch as a real broker's do).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import time
from collections import Counter
from pathlib import Path

from replmon.streaming.collect.admin import AdminView
from replmon.streaming.collect.broker_log import BrokerLog
from replmon.streaming.collect.compact import Compactor, published

PARTITIONS, RF, MODERATE_PER_PARTITION = 6, 3, 200
STEP_MS, HOLD_MS = 200, 1500  # replmon collect's defaults (collect/cli.py)
PERF_WARMUP_S, PERF_WARMUP_RECORDS = 90, 20_000
LIBS = Path(__file__).resolve().parent.parent / "deploy" / "local" / "kafka-libs"


def env_of(run_dir: Path) -> dict:
    out = {}
    for line in (run_dir / "env").read_text().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def start_perf(bootstrap: str, topic: str) -> subprocess.Popen:
    """Kafka's own producer, unthrottled (ProducerPerformance, acks=all, 200 B records)."""
    cmd = [os.environ.get("JAVA", "java"), "-Xmx256m", "-cp", f"{LIBS}/*"]
    cmd += ["org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", "1000000000"]
    cmd += ["--record-size", "200", "--throughput", "-1", "--producer-props"]
    cmd += [f"bootstrap.servers={bootstrap}", "acks=all", "linger.ms=5"]
    return subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def produce_moderate(bootstrap: str, topic: str, seconds: float) -> None:
    """MODERATE_PER_PARTITION records/s on each partition for `seconds` (kafka-python, acks=all)."""
    from kafka import KafkaProducer

    rate = MODERATE_PER_PARTITION * PARTITIONS
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", linger_ms=5)
    t0 = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - t0) < seconds:
        while sent < elapsed * rate:
            producer.send(topic, b"x" * 200, partition=sent % PARTITIONS)
            sent += 1
        time.sleep(0.005)
    producer.flush()
    producer.close()


def end_offsets(bootstrap: str, topic: str) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","))
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return sum(consumer.end_offsets(tps).values())
    finally:
        consumer.close()


def rates(events: list[dict], topic: str, t0: int, t1: int) -> dict:
    """Per follower-second and per partition-second, the run's topic only, [t0, t1)."""
    n = Counter(e["type"] for e in events if e.get("topic") == topic and t0 <= e["ts"] < t1)
    seconds = (t1 - t0) / 1000
    return {
        "fetch_per_follower_s": n["fetch"] / (PARTITIONS * (RF - 1)) / seconds,
        "append_per_partition_s": n["append"] / PARTITIONS / seconds,
        "events_per_partition_s": (n["fetch"] + n["append"]) / PARTITIONS / seconds,
    }


def one_run(env: dict, logs: dict[int, Path], load: str, seconds: float) -> dict:
    from kafka.admin import KafkaAdminClient, NewTopic

    bootstrap = env["REPLMON_KAFKA_BOOTSTRAP"]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    topic = f"bench-collector-{load}-{int(time.time() * 1000)}"
    admin.create_topics([NewTopic(topic, PARTITIONS, RF)])
    time.sleep(3)  # leaders elected, followers fetching
    view = AdminView(admin, "bench", wanted=lambda t: t == topic)
    perf = None
    if load == "max":
        perf = start_perf(bootstrap, topic)
        # The JVM starts and the producer reaches its pace (20-30 s on this shared machine).
        deadline = time.monotonic() + PERF_WARMUP_S
        while end_offsets(bootstrap, topic) < PERF_WARMUP_RECORDS and time.monotonic() < deadline:
            time.sleep(2)
        time.sleep(3)
    start = {b: p.stat().st_size for b, p in logs.items()}
    before = end_offsets(bootstrap, topic)
    t0 = int(time.time() * 1000)
    metadata = view.changes(view.ask(), t0)  # metadata (ISR, replica.lag.time.max.ms), brokers
    wall0 = time.monotonic()
    if load == "moderate":
        produce_moderate(bootstrap, topic, seconds)
    else:
        time.sleep(seconds)
    wall = time.monotonic() - wall0
    t1 = t0 + int(wall * 1000)
    records = end_offsets(bootstrap, topic) - before
    if perf is not None:
        perf.send_signal(signal.SIGTERM)
        perf.wait(timeout=30)
    time.sleep(1.0)  # the last parked fetches are logged
    out: dict = {"load": load, "records_per_s": records / wall, "brokers": {}}
    parse_lines, parse_s, events = 0, 0.0, list(metadata)
    for b, path in logs.items():
        with open(path, "rb") as f:
            warm = f.read(start[b]).decode(errors="replace").splitlines()
            data = f.read()
        lines = data.decode(errors="replace").splitlines()
        bl = BrokerLog("bench", b, view.name_of, lambda t: t == topic)
        for line in warm[-20000:]:  # the sessions, as the collector learns them on start
            bl.events(line, emit=False)
        c0 = time.process_time()
        mine = [e for line in lines for e in bl.events(line)]
        spent = time.process_time() - c0
        parse_lines += len(lines)
        parse_s += spent
        events += mine
        out["brokers"][b] = {"lines_per_s": len(lines) / wall, "bytes_per_s": len(data) / wall}
    out["collector_lines_per_cpu_s"] = parse_lines / parse_s if parse_s else 0.0
    out["off"] = rates(published(events, None, HOLD_MS, STEP_MS), topic, t0, t1)
    out["on"] = rates(published(events, Compactor(), HOLD_MS, STEP_MS), topic, t0, t1)
    admin.delete_topics([topic])
    admin.close()
    return out


def offline(partitions: int, seconds: float, runs: int, resolution_ms: int | None) -> dict:
    """Events per CPU second of `published` (the release loop) with compaction off and on."""
    from replmon.streaming.simulator.cluster import ClusterSpec, TopicSpec
    from replmon.streaming.simulator.model import simulate

    half = max(1, partitions // 2)
    spec = ClusterSpec(
        name="bench",
        topics=(
            TopicSpec(name="busy", partitions=half, produce_rate=500.0),
            TopicSpec(name="idle", partitions=partitions - half, produce_rate=0.0),
        ),
        duration_ms=int(seconds * 1000),
        replica_lag_time_max_ms=30_000,
    )
    events, _ = simulate(spec, seed=0)
    out: dict = {"events": len(events), "sent_on": 0, "off": [], "on": []}
    for _ in range(runs):
        for mode in ("off", "on"):
            compactor = Compactor(requested_ms=resolution_ms) if mode == "on" else None
            c0 = time.process_time()
            sent = published(events, compactor, HOLD_MS, STEP_MS)
            out[mode].append(len(events) / (time.process_time() - c0))
            if compactor is not None:
                out["sent_on"] = len(sent)
    return out


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def fmt(v: dict, digits: int = 1) -> str:
    return f"{v['median']:,.{digits}f} ({v['min']:,.{digits}f}-{v['max']:,.{digits}f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run-dir", default="deploy/local/.run")
    ap.add_argument("--loads", default="idle,moderate,max")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--offline", action="store_true", help="no brokers: the release loop on a simulated cluster"
    )
    ap.add_argument("--partitions", type=int, default=200, help="--offline: simulated partitions (RF 3)")
    ap.add_argument("--resolution-ms", type=int, default=None, help="--offline: compaction resolution")
    args = ap.parse_args()
    if args.offline:
        r = offline(args.partitions, args.seconds, args.runs, args.resolution_ms)
        summary = {
            "partitions": args.partitions,
            "events": r["events"],
            "sent_on": r["sent_on"],
            "events_per_cpu_s_off": spread(r["off"]),
            "events_per_cpu_s_on": spread(r["on"]),
        }
        print(
            f"{args.partitions} simulated partitions (RF 3, half busy), {args.seconds:.0f} s, "
            f"{r['events']:,} events, {r['sent_on']:,} sent with compaction; release loop, events per "
            f"CPU second, median (min-max) of {args.runs} runs: compaction off "
            f"{fmt(summary['events_per_cpu_s_off'], 0)}, on {fmt(summary['events_per_cpu_s_on'], 0)}"
        )
        print(json.dumps(summary))
        return 0
    run_dir = Path(args.run_dir).resolve()
    env = env_of(run_dir)
    kafka_run = Path(env.get("REPLMON_KAFKA_RUN", run_dir / "kafka"))
    logs = {b: kafka_run / f"node-{b}" / "logs" / "kafka-request.log" for b in (1, 2, 3)}
    missing = [str(p) for p in logs.values() if not p.is_file()]
    if missing:
        raise SystemExit(
            f"no request log at {missing}: start the cluster with "
            "services.sh up --brokers 3 (the request log is on with 3 brokers)"
        )
    summary: dict = {"seconds": args.seconds, "runs": args.runs, "partitions": PARTITIONS, "loads": {}}
    print(
        f"{args.runs} runs of {args.seconds:.0f} s per load, {PARTITIONS} partitions, RF {RF}, "
        f"200 B records, acks=all; median (min-max) over runs"
    )
    for load in args.loads.split(","):
        runs = [one_run(env, logs, load, args.seconds) for _ in range(args.runs)]
        row = {
            "records_per_s": spread([r["records_per_s"] for r in runs]),
            "lines_per_s_per_broker": spread(
                [statistics.mean(b["lines_per_s"] for b in r["brokers"].values()) for r in runs]
            ),
            "bytes_per_s_per_broker": spread(
                [statistics.mean(b["bytes_per_s"] for b in r["brokers"].values()) for r in runs]
            ),
            "collector_lines_per_cpu_s": spread([r["collector_lines_per_cpu_s"] for r in runs]),
        }
        for mode in ("off", "on"):
            for k in runs[0][mode]:
                row[f"{k}_{mode}"] = spread([r[mode][k] for r in runs])
        summary["loads"][load] = row
        print(
            f"  {load}: {fmt(row['records_per_s'], 0)} records/s; request log per broker "
            f"{fmt(row['lines_per_s_per_broker'], 0)} lines/s, {fmt(row['bytes_per_s_per_broker'], 0)} B/s; "
            f"collector {fmt(row['collector_lines_per_cpu_s'], 0)} lines per CPU s"
        )
        for mode in ("off", "on"):
            print(
                f"    compaction {mode:3}: fetch events per follower-second "
                f"{fmt(row[f'fetch_per_follower_s_{mode}'], 2)}, appends per partition-second "
                f"{fmt(row[f'append_per_partition_s_{mode}'], 2)}, events per partition-second "
                f"{fmt(row[f'events_per_partition_s_{mode}'], 2)}"
            )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
