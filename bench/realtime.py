"""Real time: a simulated cluster at the collector's measured rates, paced to the wall clock,
through Kafka, the monitor query and the Redis sink; does the monitor keep up, and how soon
after the decisive event does an alert reach Redis?

    bash deploy/local/services.sh up
    python bench/realtime.py --partitions 100000
    python bench/realtime.py --search [--partitions 2000]       # the largest size that keeps up
    python bench/realtime.py --partitions 8000 --runs 3 --lag-ms 10000
    python bench/realtime.py --partitions 8000 --resolution-ms 4000   # a coarser compaction

**The cluster** (streaming/simulator/scale.py `Paced`): RF 3 over 3 brokers, L
(replica.lag.time.max.ms, `--lag-ms`) by default 30 s as Kafka's, in every partition's metadata
and the monitor's `rules.replica_lag_time_max_ms`, as `replmon collect` publishes it by
default. Its rates at resolution 1 s (docs/real-cluster.md section 5 and "The default above
L = 10 s"): an idle partition's followers send 1.00 fetch event per second each and it appends
nothing; a moderately loaded one (200 records/s) 1.10 fetches per follower-second, and of its
0.91 compacted appends a second 0.05 are published (an append goes out only where the next
fetch would not tell its LEO; the others grow the LEO the fetches tell); one at the broker's
maximum 1.55 fetches and 1.08 appends, all published (measured with the compaction before
2026-11-28, which kept more: an overestimate). The mix, by default 80% idle, 15% moderate, 5%
max (`--mix`): at any moment most partitions of a production cluster carry no writes (topics
kept for retention, low-volume and per-tenant topics, over-partitioned topics), and a few
carry most of the load. The resolution R is the collector's default for L (L/8 up to 1 s,
L/10 up to 3 s above L = 10 s: 1 s at `--lag-ms 10000`, 3 s at 30000) or `--resolution-ms R`
(`replmon collect --compact-resolution`; the collector caps it at L/4); every rate is times
1000/R (measured at L = 30 s, 3 s: 0.366 fetch events per follower-second at `moderate`,
against the 0.367 this gives). The monitor is told
R and the scheme as `replmon collect` states them on its heartbeats (alerts.compaction_resolution_ms
and alerts.compaction_scheme: above 1 s the engine allows for it in its silences and its
caught-up grace, state/monitor.py). The idle partitions are published in session form, as
`replmon collect` publishes them by default (docs/events.md `session`): each idle follower's
first fetch names its session, then one `session` event per follower, leader and producer per
second (per R when `--resolution-ms` is given) says all of them. `--no-sessions` sends every
idle follower's fetch instead, as compaction alone does (`replmon collect --no-session-form`).

**Faults**: from the warm-up's end, every `--fault-every-s` one follower of a busy partition
stops fetching for L + 10 s (its partition's appends go on: it falls behind, holds the HW,
leaves Kafka's ISR by the lag rule); its alerts (IsrExitImminent, ReplicaOutOfSync,
UnderReplicated, AtMinIsr, HighWatermarkStalled) are the ones measured.

**Pacing**: `--producers` processes each own a slice of the partitions (a partition's events in
one process, in order, keyed `cluster/topic/partition` as the collector keys them: one event per
record, docs/events.md) and every 100 ms hand the events whose event time has come (event time
= the wall clock) to Kafka's own Java producer through a pipe (kafka-python, ~13k records/s
per process, was the limit at a few thousand partitions). Each reports the events it sent and
how far behind the clock its hand-over finished (after the warm-up); a producer more than 1 s
behind makes the run invalid (`producer_kept_pace` false): the bench, not the monitor, was the
limit.

**The monitor** is `replmon run`'s query (streaming/query.py start_query, the Kafka source, the
OutputRouter with the cluster step and the Redis sink), micro-batches as fast as it can, the
default maxOffsetsPerTrigger.

**The floor** (`--floor`): the same query, the same load, but a stateful step that only reads
its input (bench/throughput.py's floor): what Spark's plan alone costs at this rate, with the
broker and the producers on the same machine. It raises no alert: its figures are keeps-up and
the batch durations, the most the monitor could reach here whatever its engine does.

**Keeps up** (after `--warmup-s`, over `--seconds`): the event-time lag at each micro-batch's
end is the wall clock minus the newest event time the batch read (Spark's eventTime max); a
last sample at the run's end is the wall clock minus the newest event time read by then. The
monitor keeps up when the median lag of the last third of the window is at most
max(2 s, a quarter of the first third's median) above the first third's, it read at least 90%
of the events offered in the window, and the producers kept pace. A monitor short of the rate
by a fraction f falls behind by f seconds per second: over 90 s, 3% or more shows in the lag
when the lag is small; at lags of 30 s and more the read rate shows it.

**Alert latency**: the wall time an alert's `firing` entry reached the Redis stream
`<prefix>:alerts` (its entry id is Redis's clock at the write) minus the event time that
decides it: its start (`started_ms`) + `alerts.group_wait_ms` (every alert is held that long
for a root cause to claim it, docs/alerts.md) + `stream.reorder_tolerance_ms` (the cluster step
decides up to the newest event less that). Events are sent when the wall clock reaches their
event time, so this is what the monitor adds. p50 and p99 over every fault alert of the run.

Each run prints its figures and where a micro-batch's time goes (Spark's own phases, the
stateful step's Python phases as bench/throughput.py reads them, the Redis sink); the last line
is one JSON object. Addresses come from $REPLMON_SERVICES_RUN/env (default deploy/local/.run)
unless given.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

import numpy as np
import throughput
from kafka_to_redis import TimedSink, cleanup, offsets_read  # bench/kafka_to_redis.py
from pyspark import cloudpickle
from throughput import PHASES, _read_only, p99, read_phases, spread  # bench/throughput.py

# --floor's stateful step lives in bench/throughput.py, which the Python workers cannot import:
# it travels by value
cloudpickle.register_pickle_by_value(throughput)

ROOT = Path(__file__).resolve().parents[1]
LIBS = ROOT / "deploy" / "local" / "kafka-libs"
KAFKA_LAG_MAX_MS = 30_000  # Kafka's replica.lag.time.max.ms default: --lag-ms's
TICK_S = 0.1
# compacted events per second at resolution 1 s (docs/real-cluster.md section 5):
# (fetches per follower, appends per partition)
# (fetches per follower, appends per partition, of which published): the appends a collector
# sends only where the next fetch would not tell their LEO (streaming/collect/compact.py); the
# others still grow the LEO the fetches tell. moderate: docs/real-cluster.md, measured at 1 s
# and 3 s with today's compaction (its fetches as at 3 s, 1.10 a second where 1 s gave 1.01);
# max: measured at 1 s with the compaction before 2026-11-28, which kept more (every append)
RATES = {"idle": (1.00, 0.0, 0.0), "moderate": (1.10, 0.91, 0.05), "max": (1.55, 1.08, 1.08)}
DEFAULT_MIX = "idle=0.8,moderate=0.15,max=0.05"
WARMUP_MIN_S, WARMUP_S_PER_PARTITION = 30, 0.0024  # default_warmup_s
CAUGHT_UP_LAG_S = 5.0  # caught_up_s: the first batch after the start whose lag is at most this
PRODUCER_BEHIND_LIMIT_MS = 1000
RUN_FIGURES = (
    "keeps_up",
    "events_per_s",
    "processed_events_per_s",
    "lag_s_first",
    "lag_s_last",
    "lag_s_max",
    "caught_up_s",
    "latency_ms_p50",
    "latency_ms_p99",
    "alerts",
    "producer_behind_ms_max",
)


def services_env() -> dict[str, str]:
    run = Path(os.environ.get("REPLMON_SERVICES_RUN", ROOT / "deploy" / "local" / ".run"))
    env_file = run / "env"
    if not env_file.is_file():
        return {}
    pairs = (line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs}


def parse_mix(text: str) -> dict[str, float]:
    mix = {name: float(share) for name, share in (part.split("=") for part in text.split(","))}
    if set(mix) - set(RATES) or abs(sum(mix.values()) - 1) > 1e-6:
        raise SystemExit(f"--mix: shares of {sorted(RATES)} that add up to 1, not {text!r}")
    return mix


def partition_rates(partitions: int, mix: dict[str, float], resolution_ms: int, seed: int):
    """Per partition: fetches per follower-second, appends per second, and the busy ones."""
    names = list(mix)
    counts = [round(mix[n] * partitions) for n in names]
    counts[0] += partitions - sum(counts)
    load = np.random.default_rng(seed).permutation(np.repeat(np.arange(len(names)), counts))
    scale = 1000 / resolution_ms
    fetch = np.array([RATES[n][0] for n in names])[load] * scale
    append = np.array([RATES[n][1] for n in names])[load] * scale
    published = np.array([RATES[n][2] for n in names])[load] * scale
    return fetch, append, published, np.flatnonzero(append > 0)


def fault_schedule(args, start_ms: int, busy: np.ndarray):
    from replmon.streaming.simulator.scale import Fault, Layout

    layout = Layout.of(args.partitions, "sim", "bench", 1)
    first = start_ms + args.warmup_s * 1000
    # each fault's alerts are released by about lcu + L + group_wait + tolerance + a fetch period
    last = start_ms + (args.warmup_s + args.seconds) * 1000 - (args.lag_ms + 5000 + 1000 + 3000)
    times = list(range(first, last, args.fault_every_s * 1000))
    picks = np.random.default_rng(args.seed + 1).choice(busy, size=min(len(times), busy.size), replace=False)
    return [
        Fault(int(p), layout.replicas[p][1 + i % 2], t, t + args.lag_ms + 10_000)
        for i, (p, t) in enumerate(zip(picks.tolist(), times, strict=False))
    ]


def console_producer(bootstrap: str, topic: str) -> subprocess.Popen:
    """Kafka's own producer (ConsoleProducer from deploy/local/kafka-libs), reading `key<TAB>value`
    lines from its stdin: kafka-python sends ~13k records a second per process, Kafka's Java
    client many times that, so the bench's producing leaves the cores to the monitor."""
    cmd = [os.environ.get("JAVA", "java"), "-Xmx256m", "-XX:+UseSerialGC", "-cp", f"{LIBS}/*"]
    cmd += ["org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", bootstrap, "--topic", topic]
    cmd += ["--reader-property", "parse.key=true", "--reader-property", "key.separator=\t"]
    cmd += ["--request-required-acks", "1", "--timeout", "50", "--batch-size", str(1 << 20)]
    cmd += ["--compression-codec", "none"]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def produce(k: int, args, start_ms: int, end_ms: int, faults, results) -> None:
    """Producer process k: its slice of the partitions, each event handed to the producer once
    the wall clock reaches its event time."""
    from replmon.streaming.simulator.scale import Layout, Paced

    fetch, append, published, _ = partition_rates(
        args.partitions, parse_mix(args.mix), args.resolution_ms, args.seed
    )
    cluster = Paced(
        Layout.of(args.partitions, "sim", "bench", 1),
        range(k, args.partitions, args.producers),
        fetch,
        append,
        start_ms=start_ms,
        lag_max_ms=args.lag_ms,
        faults=faults,
        heartbeats=k == 0,
        seed=args.seed + 2 + k,
        session_ms=args.session_ms if args.sessions else None,
        fetcher=k,
        published_per_s=published,
    )
    producer = console_producer(args.bootstrap, args.topic)
    assert producer.stdin is not None
    pipe = producer.stdin
    sent, in_window, behind = 0, 0, []
    try:
        pipe.write(b"".join(key + b"\t" + value + b"\n" for key, value in cluster.header()))
        pipe.flush()
        time.sleep(max(0.0, start_ms / 1000 - time.time()))
        while (now_ms := int(time.time() * 1000)) < end_ms:
            events = cluster.window(now_ms)
            pipe.write(b"".join(key + b"\t" + value + b"\n" for key, value in events))
            pipe.flush()
            sent += len(events)
            if now_ms >= start_ms + args.warmup_s * 1000:
                in_window += len(events)
                behind.append(time.time() * 1000 - now_ms)
            time.sleep(max(0.0, TICK_S - (time.time() - now_ms / 1000)))
    finally:
        pipe.close()
        producer.wait(timeout=60)
    # no hand-over after the warm-up: generating the events took the whole run
    behind = behind or [time.time() * 1000 - start_ms - args.warmup_s * 1000]
    results.put(
        {
            "producer": k,
            "sent": sent,
            "in_window": in_window,
            "behind_ms_p99": p99(behind),
            "behind_ms_max": max(behind),
        }
    )


class Progress:
    """Every micro-batch's progress, with the wall time it ended at (its trigger's start plus its
    duration). Read from the query's recentProgress every few seconds, not from a
    StreamingQueryListener: a listener's callback converts each progress object field by field
    over py4j in the driver's Python, which the monitor itself does not pay (about 4% of a
    core at 30,000 partitions)."""

    def __init__(self) -> None:
        self.batches: list[tuple[float, dict]] = []
        self._seen: set[int] = set()

    def poll(self, query) -> None:
        for p in query.recentProgress:
            if p["batchId"] in self._seen:
                continue
            self._seen.add(p["batchId"])
            started = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
            self.batches.append((started + p["durationMs"]["triggerExecution"] / 1000, p))
        self.batches.sort(key=lambda wp: wp[1]["batchId"])


def event_ms(progress: dict) -> int | None:
    text = (progress.get("eventTime") or {}).get("max")
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000) if text else None


def lag_figures(batches, start_s: float, end_s: float, load_s: float) -> dict:
    """The lag samples of the window and the keeps-up rule (the docstring), and how long after
    the load began (`load_s`) a batch first ended at most CAUGHT_UP_LAG_S behind the clock."""
    samples, newest, caught_up = [], None, None
    for wall, p in batches:
        ms = event_ms(p) if p.get("numInputRows", 0) > 0 else None
        if ms is not None:
            newest = max(newest or ms, ms)
            if caught_up is None and wall - ms / 1000 <= CAUGHT_UP_LAG_S and ms / 1000 > load_s + 1:
                caught_up = round(wall - load_s, 1)
            if wall >= start_s:
                samples.append((wall, wall - ms / 1000))
    if newest is not None:
        samples.append((end_s, end_s - newest / 1000))
    if len(samples) < 3:
        return {
            "lag_s_first": None,
            "lag_s_last": None,
            "lag_s_max": None,
            "lag_ok": False,
            "caught_up_s": caught_up,
        }
    third = (end_s - start_s) / 3
    first = [lag for wall, lag in samples if wall < start_s + third] or [samples[0][1]]
    last = [lag for wall, lag in samples if wall >= end_s - third] or [samples[-1][1]]
    f, la = statistics.median(first), statistics.median(last)
    slope = np.polyfit([w for w, _ in samples], [lag for _, lag in samples], 1)[0]
    return {
        "lag_s_first": round(f, 2),
        "lag_s_last": round(la, 2),
        "lag_s_max": round(max(lag for _, lag in samples), 2),
        "lag_s_end": round(samples[-1][1], 2),
        "lag_slope": round(float(slope), 4),
        "lag_ok": la <= f + max(2.0, f / 4),
        "caught_up_s": caught_up,
    }


def alert_latencies(client, prefix: str, faults, group_wait_ms: int, tolerance_ms: int) -> dict:
    """The fault alerts' latencies from the Redis alerts stream (see the docstring)."""
    from replmon.sinks.keys import Keys

    faulted = {f"bench-{f.partition}" for f in faults}
    latencies, names, other, seen = [], {}, {}, set()
    for entry_id, fields in client.xrange(Keys(prefix).alerts_stream()):
        f = {k.decode(): v.decode() for k, v in fields.items()}
        if f.get("status") != "firing":
            continue
        written_ms = int(entry_id.decode().split("-")[0])
        if f"{f.get('topic')}-{f.get('partition')}" in faulted:
            latencies.append(written_ms - (int(f["started_ms"]) + group_wait_ms + tolerance_ms))
            seen.add(f["partition"])
            names[f["name"]] = names.get(f["name"], 0) + 1
        else:
            other[f["name"]] = other.get(f["name"], 0) + 1
    return {
        "alerts": len(latencies),
        "alerts_by_name": names,
        "alerts_unexpected": other,
        "faults_with_alerts": len(seen),
        "latency_ms_p50": round(statistics.median(latencies)) if latencies else None,
        "latency_ms_p99": round(p99(latencies)) if latencies else None,
        "latency_ms_min": min(latencies) if latencies else None,
    }


def batch_phases(batches, start_s: float, profile: Path, sink: TimedSink) -> dict:
    """Where a micro-batch of the window goes: Spark's phases, the stateful step's Python phases
    (ms per batch summed over the parallel tasks, wall (CPU)), the Redis sink."""
    window = [p for wall, p in batches if wall >= start_s and p.get("numInputRows", 0) > 0]
    if not window:
        return {}
    spark = {
        k: round(statistics.mean(p["durationMs"].get(k, 0) for p in window))
        for k in (
            "triggerExecution",
            "latestOffset",
            "queryPlanning",
            "addBatch",
            "walCommit",
            "commitOffsets",
        )
    }
    python = read_phases(profile, len(batches))
    sinks = [sink.per_batch[p["batchId"]] for p in window if p["batchId"] in sink.per_batch]
    return {
        "batches": len(window),
        "batch_ms_p50": round(statistics.median(p["durationMs"]["triggerExecution"] for p in window)),
        "batch_ms_p99": round(p99([p["durationMs"]["triggerExecution"] for p in window])),
        "batch_events_p50": round(statistics.median(offsets_read(p) for p in window)),
        "spark_ms_per_batch": spark,
        "python_ms_per_batch": {k: round(python[k]) for k in PHASES},
        "python_cpu_ms_per_batch": {k: round(python[k + "_cpu"]) for k in PHASES},
        # the window's batches only: the first batch writes every partition's first status
        "sink_ms_per_batch": round(statistics.mean(t for t, _ in sinks) * 1000) if sinks else None,
        "statuses_per_batch": round(statistics.mean(n for _, n in sinks)) if sinks else None,
    }


def one_run(spark, args, n: int) -> dict:
    import redis

    from replmon.streaming.bridge import OutputRouter
    from replmon.streaming.cluster_state import ClusterStepRunner
    from replmon.streaming.query import start_query
    from replmon.streaming.redis_out import build_redis_sink
    from replmon.streaming.settings import Settings
    from replmon.streaming.simulator import writers
    from replmon.streaming.sources import kafka_source

    tag = uuid.uuid4().hex[:8]
    args.topic, prefix = f"bench-rt-{tag}", f"benchrt{tag}"
    work = Path(tempfile.mkdtemp(prefix="replmon-bench-rt-"))
    profile = work / "phases"
    profile.mkdir()
    settings = Settings(
        kafka={"bootstrap_servers": args.bootstrap, "subscribe": args.topic, "starting_offsets": "earliest"},
        redis={"url": args.redis_url, "prefix": prefix},
        spark={"checkpoint_dir": str(work / "checkpoint")},
        stream={
            "buckets": args.buckets,
            "profile_dir": str(profile),
            **({} if args.status_refresh_ms is None else {"status_refresh_ms": args.status_refresh_ms}),
            **({} if args.series_interval_ms is None else {"series_interval_ms": args.series_interval_ms}),
        },
        rules={"replica_lag_time_max_ms": args.lag_ms},
        # as `replmon collect` states them on its heartbeats (collector.py stated_resolution_ms)
        alerts={"compaction_resolution_ms": args.resolution_ms, "compaction_scheme": args.scheme},
        write_files=False,
    )
    writers.create_topic(args.bootstrap, args.topic, args.kafka_partitions)
    sink = TimedSink(build_redis_sink(settings.redis))
    router = OutputRouter(
        None,
        sink,
        cluster_step=ClusterStepRunner(settings.monitor_config(), settings.checkpoint_dir, spark),
    )
    client = redis.Redis.from_url(args.redis_url)
    progress = Progress()
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")  # every batch's, for Progress
    floor = _read_only if args.floor else None
    source = kafka_source(spark, settings.kafka)
    query = start_query(spark, source, settings, router, once=False, name=f"bench_rt_{tag}", state_func=floor)
    try:
        while not query.recentProgress:  # the query runs (its first, empty batch is done)
            if not query.isActive:
                raise RuntimeError(f"the query stopped: {query.exception()}")
            time.sleep(0.2)
        _, _, _, busy = partition_rates(args.partitions, parse_mix(args.mix), args.resolution_ms, args.seed)
        start_ms = (int(time.time()) + 5) * 1000  # the producers' JVMs start meanwhile
        end_ms = start_ms + (args.warmup_s + args.seconds) * 1000
        faults = fault_schedule(args, start_ms, busy)
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        procs = [
            ctx.Process(target=produce, args=(k, args, start_ms, end_ms, faults, results))
            for k in range(args.producers)
        ]
        for proc in procs:
            proc.start()
        made: list[dict] = []
        while len(made) < len(procs):
            try:
                made.append(results.get(timeout=5))
            except queue.Empty:
                progress.poll(query)
                failed = any(p.exitcode not in (None, 0) for p in procs)  # a producer raised
                if failed or not query.isActive or time.time() > end_ms / 1000 + 600:
                    for proc in procs:
                        proc.terminate()
                    raise RuntimeError(
                        f"a producer failed or the query stopped: {query.exception()}"
                    ) from None
        for proc in procs:
            proc.join()
        end_s = time.time()
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        progress.poll(query)
    finally:
        query.stop()
    window_start = start_ms / 1000 + args.warmup_s
    # offered in the window, as read is counted: a run's rate is not even (the idle followers'
    # first fetches, naming their sessions, are all at its start)
    offered = sum(m["in_window"] for m in made)
    batches = progress.batches
    read = sum(offsets_read(p) for wall, p in batches if wall >= window_start)
    cfg = settings.monitor_config()
    r = {
        "partitions": args.partitions,
        "events_per_s": round(offered / ((end_ms - start_ms) / 1000 - args.warmup_s)),
        "processed_events_per_s": round(read / (end_s - window_start)),
        "producer_kept_pace": all(m["behind_ms_max"] <= PRODUCER_BEHIND_LIMIT_MS for m in made),
        "producer_behind_ms_max": round(max(m["behind_ms_max"] for m in made)),
        "faults": len(faults),
        **lag_figures(batches, window_start, end_s, start_ms / 1000),
        **alert_latencies(client, prefix, faults, cfg.group_wait_ms, cfg.reorder_tolerance_ms),
        **batch_phases(batches, window_start, profile, sink),
    }
    # and it read what was offered: a lag measured at 30 s and more hides a short rate
    r["keeps_up"] = bool(
        r["lag_ok"] and r["producer_kept_pace"] and r["processed_events_per_s"] >= 0.9 * r["events_per_s"]
    )
    cleanup(args.bootstrap, args.topic, client, prefix)
    client.close()
    shutil.rmtree(work, ignore_errors=True)  # the run's checkpoint (~200 MB at 100k) and phases
    print(
        f"run {n}: {args.partitions:,} partitions, {r['events_per_s']:,} events/s offered "
        f"({args.producers} producers, {r['producer_behind_ms_max']} ms behind at most), "
        f"{r['processed_events_per_s']:,} events/s read; lag s first third {r['lag_s_first']} "
        f"last third {r['lag_s_last']} max {r['lag_s_max']}: keeps up {r['keeps_up']} (caught up "
        f"{r['caught_up_s']} s after the load began, window from {args.warmup_s} s); "
        f"{r['alerts']} fault alerts, latency ms p50 {r['latency_ms_p50']} p99 {r['latency_ms_p99']}",
        flush=True,
    )
    if r.get("batches"):
        print(
            f"  where a batch goes ({r['batches']} batches, {r['batch_events_p50']:,} events, "
            f"{r['batch_ms_p50']} ms p50): Spark ms {r['spark_ms_per_batch']}; stateful step in "
            f"Python, ms summed over the tasks, wall {r['python_ms_per_batch']}, CPU "
            f"{r['python_cpu_ms_per_batch']}; Redis sink {r['sink_ms_per_batch']} ms "
            f"for {r['statuses_per_batch']} status records",
            flush=True,
        )
    return r


def default_warmup_s(partitions: int) -> int:
    """The warm-up when `--warmup-s` is not given: 30 s, or 2.4 s per 1,000 partitions from
    12,500 on. A monitor started on a new topic first sees every partition at once (its state
    made, its first status and its Redis keys written), and catches up on that for about a
    minute and a half at 100,000 partitions (`caught_up_s`); the window measures the steady
    state after it."""
    return max(WARMUP_MIN_S, round(partitions * WARMUP_S_PER_PARTITION))


def run_size(spark, args, partitions: int) -> dict:
    """`--runs` runs at one size: the median run's figures, with the spread of each."""
    args.partitions = partitions
    args.warmup_s = args.warmup_given if args.warmup_given is not None else default_warmup_s(partitions)
    runs = [one_run(spark, args, n) for n in range(1, args.runs + 1)]
    by_lag = sorted(runs, key=lambda r: r["lag_s_last"] if r["lag_s_last"] is not None else float("inf"))
    median = dict(by_lag[(len(by_lag) - 1) // 2])
    median["keeps_up"] = sum(r["keeps_up"] for r in runs) > len(runs) / 2
    if len(runs) > 1:
        for k in ("events_per_s", "processed_events_per_s", "lag_s_last", "latency_ms_p50", "latency_ms_p99"):
            values = [r[k] for r in runs if r[k] is not None]
            if values:
                median[k] = statistics.median(values)
                median[f"{k}_spread"] = spread(values)
    median["runs"] = [{k: r[k] for k in RUN_FIGURES} for r in runs]
    return median


def search(spark, args) -> tuple[dict, list[dict]]:
    """Double the size while it keeps up, then bisect to within 10%."""
    tried, good, bad = [], None, None
    size = args.partitions[0]
    while bad is None or good is None or bad["partitions"] > 1.1 * good["partitions"]:
        r = run_size(spark, args, size)
        tried.append(r)
        if r["keeps_up"]:
            good = r
        else:
            bad = r
        if bad is None:
            size *= 2
        elif good is None:
            if size <= 250:
                break
            size //= 2
        else:
            size = (good["partitions"] + bad["partitions"]) // 2
    return good or tried[-1], tried


def main() -> int:
    logging.basicConfig(level=logging.WARNING)  # a failing foreachBatch call is logged by py4j
    env = services_env()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="2000", help="simulated partitions; a comma list runs each")
    ap.add_argument("--search", action="store_true", help="from --partitions, the largest size that keeps up")
    ap.add_argument("--runs", type=int, default=1, help="runs per size (median and spread)")
    ap.add_argument("--seconds", type=int, default=90, help="measured wall seconds, after the warm-up")
    ap.add_argument(
        "--warmup-s",
        dest="warmup_given",
        type=int,
        default=None,
        help="seconds of load before the measured window (default: 30, or 2.4 per 1,000 "
        "partitions from 12,500 on: 240 at 100,000; the monitor's start is reported as caught_up_s)",
    )
    ap.add_argument("--mix", default=DEFAULT_MIX, help="shares of idle, moderate and max partitions")
    ap.add_argument(
        "--lag-ms",
        type=int,
        default=KAFKA_LAG_MAX_MS,
        help="replica.lag.time.max.ms of the run: every partition's metadata and the monitor's "
        "(default 30000, Kafka's)",
    )
    ap.add_argument(
        "--resolution-ms",
        type=int,
        default=None,
        help="replay this compaction resolution, as `replmon collect --compact-resolution` (the "
        "collector caps it at L/4); default: the collector's default for --lag-ms (1 s at 10 s, "
        "3 s at 30 s)",
    )
    ap.add_argument(
        "--sessions",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="idle partitions in session form, as replmon collect publishes them (default): one "
        "session event per follower, leader and producer per resolution instead of a fetch per "
        "follower; --no-sessions: a fetch per follower, as compaction alone",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="a stateful step that only reads its input: what Spark's plan alone costs (no alerts)",
    )
    ap.add_argument("--fault-every-s", type=int, default=6)
    ap.add_argument("--producers", type=int, default=1, help="producer processes")
    ap.add_argument("--kafka-partitions", type=int, default=6, help="partitions of the events topic")
    ap.add_argument("--buckets", type=int, default=16, help="stream.buckets (its default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--status-refresh-ms",
        type=int,
        default=None,
        help="stream.status_refresh_ms (default: the setting's); 0 sends every routine status",
    )
    ap.add_argument(
        "--series-interval-ms",
        type=int,
        default=None,
        help="stream.series_interval_ms (default: the setting's); 0: a healthy partition's points "
        "with every routine status",
    )
    ap.add_argument("--driver-memory", default="3g")
    ap.add_argument("--bootstrap", default=env.get("REPLMON_KAFKA_BOOTSTRAP", "127.0.0.1:19092"))
    ap.add_argument("--redis-url", default=env.get("REPLMON_REDIS_URL", "redis://127.0.0.1:16379/0"))
    args = ap.parse_args()
    from replmon.streaming.collect.compact import RESOLUTION_CAP_MS, resolution_ms

    # what `replmon collect` does: sessions at the requested resolution, else 1 s; the partitions'
    # fetches and appends at the requested one, else the default for L
    args.session_ms = args.resolution_ms or RESOLUTION_CAP_MS
    args.scheme = "fixed" if args.resolution_ms else "lag"
    args.resolution_ms = resolution_ms(args.lag_ms, args.resolution_ms)
    sizes = [int(s) for s in args.partitions.split(",")]
    args.partitions = sizes

    from replmon.streaming.session import build_session
    from replmon.streaming.settings import SparkConf

    jars = [j for j in env.get("REPLMON_SPARK_JARS", "").split(",") if j] or sorted(
        str(p) for p in (ROOT / "deploy" / "local" / "jars").glob("*.jar")
    )
    spark = build_session(SparkConf(driver_memory=args.driver_memory, jars=jars), app_name="replmon-bench-rt")
    try:
        if args.search:
            best, tried = search(spark, args)
        else:
            tried = [run_size(spark, args, size) for size in sizes]
            best = tried[-1]
    finally:
        spark.stop()
    fetch, append, published, _ = partition_rates(1000, parse_mix(args.mix), args.resolution_ms, args.seed)
    per_partition = 2 * fetch + published
    if args.sessions:  # idle partitions send nothing of their own; each producer's 6 sessions do
        per_partition = np.where(append > 0, per_partition, 0.0)
        per_partition = per_partition + 6 * args.producers * 1000 / args.session_ms / best["partitions"]
    print(
        json.dumps(
            best
            | {
                "mix": parse_mix(args.mix),
                "lag_ms": args.lag_ms,
                "resolution_ms": args.resolution_ms,
                "session_ms": args.session_ms if args.sessions else None,
                "events_per_partition_s": round(float(per_partition.mean()), 3),
                "sessions": args.sessions,
                "floor": args.floor,
                "series_interval_ms": args.series_interval_ms,
                "producers": args.producers,
                "seconds": args.seconds,
                "warmup_s": args.warmup_s,
                "tried": [
                    {k: t[k] for k in ("partitions", "keeps_up", "events_per_s", "lag_s_last")} for t in tried
                ],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
