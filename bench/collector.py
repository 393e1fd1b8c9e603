"""The collector's cost, speed and event rates on the local 3-broker cluster with the request log on.

    REPLMON_SERVICES_RUN=$PWD/deploy/local/.run-bench REPLMON_PORT_OFFSET=600 \
        REPLMON_REPLICA_LAG_TIME_MAX_MS=10000 bash deploy/local/services.sh up --brokers 3
    python bench/collector.py --run-dir deploy/local/.run-bench [--loads idle,moderate,max,bursty]
        [--partitions 6] [--seconds 15] [--runs 3]

Loads, each on a fresh RF 3 topic of `--partitions` partitions (default 6): `idle` (nothing
produced), `moderate` (200 records/s per partition, 200 B, acks=all, kafka-python), `max` (as
hard as Kafka's own producer drives it: ProducerPerformance from deploy/local/kafka-libs,
--throughput -1, acks=all, 200 B, measured once it has reached its pace), `bursty` (the judge's
acks=all load, tests/judge/test_judge.py: bursts of 4,000 records of 200 B every 2 s,
round-robin over the partitions, acks=all, kafka-python, linger 5 ms; the judge's topic has 3
partitions). Per run, from each broker's kafka-request.log over the run: what the load cost the
broker (request-log lines and bytes per second), how fast one process turns lines into events
(parse, fetch sessions, inference; one core), and what the collector publishes, through the
reorder buffer's 200 ms steps and 1.5 s hold as `replmon collect` runs them, counted over
`--seconds` after it has run for COLLECTOR_WARM_S (what it sends once on start, each
follower's first fetch after the first metadata poll, is not counted), in three forms:
lossless compaction off (`--no-compact --no-session-form`), on (`--no-session-form`;
streaming/collect/compact.py), and session form (the default, compaction on:
streaming/collect/sessions.py `SessionForm`
after the compactor, as collector.py's step calls them). For each: fetch events per
follower-second (one follower of one partition), appends and (session form) session events per
partition-second, events per partition-second (fetches, appends and session events of the
topic), and the count of each event type. And every follower read of the topic (compaction off)
as the engine judges it: caught (at the LEO at its read), credited by the follower's previous
read, or behind (`read_classes`). Prints median (min, max) over the runs;
the last line is one JSON object.

    python bench/collector.py --offline [--partitions 200] [--seconds 60] [--runs 3]

measures instead, without brokers, how many events per CPU second the collector's release loop
(the reorder buffer's 200 ms steps and 1.5 s hold) gets through with compaction off and on, on
a simulated RF 3 cluster (streaming/simulator: one produce batch per partition every 100 ms on
the busy half, none on the idle half; the followers fetch as a real broker's do).

    python bench/collector.py --simulated-bursty 2000,2500,3000,4000 [--partitions 3]
        [--seconds 100] [--runs 3]

gives, without brokers, the events per partition-second of compaction on and of session form
on a simulated topic under the judge's bursts (4,000 records round-robin, sent over a second)
every 2, 2.5, 3 and 4 s: the share of `session` events between bursts (one seed per run).
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
from replmon.streaming.collect.compact import (
    BEHIND,
    CAUGHT,
    CREDITED,
    NEVER,
    RESOLUTION_CAP_MS,
    Compactor,
    judge,
    published,
)
from replmon.streaming.collect.sessions import SessionForm

PARTITIONS, RF, MODERATE_PER_PARTITION = 6, 3, 200
BURST_RECORDS, BURST_EVERY_S = 4000, 2.0  # the judge's acks=all bursts (tests/judge/test_judge.py)
STEP_MS, HOLD_MS = 200, 1500  # replmon collect's defaults (collect/cli.py)
PERF_WARMUP_S, PERF_WARMUP_RECORDS = 90, 20_000
COLLECTOR_WARM_S = 5  # the collector runs this long before the counted window
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


def produce_moderate(bootstrap: str, topic: str, partitions: int, seconds: float) -> None:
    """MODERATE_PER_PARTITION records/s on each partition for `seconds` (kafka-python, acks=all)."""
    from kafka import KafkaProducer

    rate = MODERATE_PER_PARTITION * partitions
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", linger_ms=5)
    t0 = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - t0) < seconds:
        while sent < elapsed * rate:
            producer.send(topic, b"x" * 200, partition=sent % partitions)
            sent += 1
        time.sleep(0.005)
    producer.flush()
    producer.close()


def produce_bursty(bootstrap: str, topic: str, partitions: int, seconds: float) -> None:
    """The judge's acks=all load (tests/judge/pipeline.py Producer with burst=(4000, 2.0)):
    BURST_RECORDS records of 200 B round-robin over the partitions, then BURST_EVERY_S of rest."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", linger_ms=5)
    t0, i = time.monotonic(), 0
    while time.monotonic() - t0 < seconds:
        for _ in range(BURST_RECORDS):
            producer.send(topic, b"x" * 200, partition=i % partitions)
            i += 1
        time.sleep(max(0.0, min(BURST_EVERY_S, seconds - (time.monotonic() - t0))))
    producer.flush()
    producer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","))
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return sum(consumer.end_offsets(tps).values())
    finally:
        consumer.close()


def wait_full_isr(admin, topic: str, partitions: int, timeout_s: float = 180) -> None:
    """Every partition has a leader and all RF replicas in its ISR (followers fetching)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            (t,) = admin.describe_topics([topic])
            parts = t.get("partitions") or []
            if len(parts) == partitions and all(
                p["leader_id"] >= 0 and len(p["isr_nodes"]) == RF for p in parts
            ):
                return
        except Exception:  # noqa: BLE001 - the topic is still being created
            pass
        time.sleep(1)
    raise SystemExit(f"{topic}: not all {partitions} partitions have a full ISR after {timeout_s:.0f} s")


def wait_fetching(admin, logs: dict[int, Path], topic: str, partitions: int, timeout_s: float = 300) -> None:
    """Every follower of every partition of the new topic fetches it without error, as the
    leaders' request logs show (a full ISR at creation does not say it: on a loaded machine
    the brokers take tens of seconds to create 600 partitions, answering UNKNOWN_TOPIC_ID
    meanwhile), and no fetch of it has erred for 2 s."""
    view = AdminView(admin, "bench", wanted=lambda t: t == topic)
    pos, bls = {}, {}
    for b, path in logs.items():
        bls[b] = BrokerLog("bench", b, view.name_of, lambda t: t == topic)
        with open(path, "rb") as f:
            warm = f.read()
        pos[b] = len(warm)
        for line in warm.decode(errors="replace").splitlines()[-20000:]:
            bls[b].events(line, emit=False)
    seen: set = set()
    last_error = time.monotonic()
    deadline = last_error + timeout_s
    while time.monotonic() < deadline:
        time.sleep(1)
        if topic not in view.names.values():  # its topic id, once the broker asked knows it
            view.changes(view.ask(), 0)
            continue
        for b, path in logs.items():
            with open(path, "rb") as f:
                f.seek(pos[b])
                data = f.read()
            data = data[: data.rfind(b"\n") + 1]
            pos[b] += len(data)
            for line in data.decode(errors="replace").splitlines():
                for ev in bls[b].events(line):
                    if ev["type"] != "fetch":
                        continue
                    if ev.get("error") is not None or ev.get("diverging_epoch") is not None:
                        last_error = time.monotonic()
                    else:
                        seen.add((ev["replica"], ev["partition"]))
        if len(seen) == partitions * (RF - 1) and time.monotonic() - last_error >= 2:
            return
    raise SystemExit(
        f"{topic}: {len(seen)} of {partitions * (RF - 1)} followers fetching after {timeout_s:.0f} s"
    )


def wait_deleted(admin, topic: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while topic in admin.list_topics() and time.monotonic() < deadline:
        time.sleep(1)


def session_published(events: list[dict], hold_ms: int, step_ms: int) -> tuple[list[dict], SessionForm]:
    """What `replmon collect` sends by default (session form) of `events` read at their own time: as
    compact.published, then the session form after the compactor, as collector.py's step does,
    with the resolution cli.py gives it (the compaction default: RESOLUTION_CAP_MS)."""
    former = SessionForm(RESOLUTION_CAP_MS, session_key=None)
    return published(events, Compactor(requested_ms=None), hold_ms, step_ms, former), former


def counted(events: list[dict], topic: str, t0: int, t1: int) -> Counter:
    """The run's events by type, [t0, t1): the topic's, and session events (a session of the
    bench's collector carries only the topic: it reads no other)."""
    return Counter(
        e["type"]
        for e in events
        if (e.get("topic") == topic or e["type"] == "session") and t0 <= e["ts"] < t1
    )


READ_CLASSES = (CAUGHT, CREDITED, BEHIND)


def read_classes(events: list[dict], topic: str, t0: int, t1: int) -> dict[str, int]:
    """The topic's follower reads in [t0, t1), every one (compaction off), as the engine judges
    each (the compactor's `judge`, docs/kafka-rules.md §1.2): caught (at the LEO at its read),
    credited (below it, at or above the LEO at the follower's previous read) or behind. What a
    follower of a busy partition would need its own fetch events for, were reads at the LEO
    carried by its session."""
    out = dict.fromkeys(READ_CLASSES, 0)
    leo: dict[int, int] = {}  # partition -> the largest leader LEO told so far
    previous: dict[tuple, tuple[int, int]] = {}  # (partition, replica) -> (LEO, time) at its last read
    mine = (e for e in events if e.get("topic") == topic and e.get("leader_leo") is not None)
    for e in sorted(mine, key=lambda e: e["ts"]):
        p = e["partition"]
        leo[p] = max(leo.get(p, 0), e["leader_leo"])
        if e["type"] != "fetch":
            continue
        key = (p, e["replica"])
        kind = judge(e, leo[p], previous.get(key, NEVER), NEVER[0])  # Kafka's credit has no age limit
        previous[key] = (leo[p], e["ts"])
        if t0 <= e["ts"] < t1:
            out[kind] += 1
    return out


def rates(n: Counter, partitions: int, seconds: float) -> dict:
    """Per follower-second and per partition-second."""
    return {
        "fetch_per_follower_s": n["fetch"] / (partitions * (RF - 1)) / seconds,
        "append_per_partition_s": n["append"] / partitions / seconds,
        "session_per_partition_s": n["session"] / partitions / seconds,
        "events_per_partition_s": (n["fetch"] + n["append"] + n["session"]) / partitions / seconds,
    }


FORMS = ("off", "on", "session")


def one_run(env: dict, logs: dict[int, Path], load: str, partitions: int, seconds: float) -> dict:
    from kafka.admin import KafkaAdminClient, NewTopic

    bootstrap = env["REPLMON_KAFKA_BOOTSTRAP"]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=60_000)
    topic = f"bench-collector-{load}-{int(time.time() * 1000)}"
    admin.create_topics([NewTopic(topic, partitions, RF)], timeout_ms=60_000)
    wait_full_isr(admin, topic, partitions)
    wait_fetching(admin, logs, topic, partitions)
    view = AdminView(admin, "bench", wanted=lambda t: t == topic)
    perf = None
    if load == "max":
        perf = start_perf(bootstrap, topic)
        # The JVM starts and the producer reaches its pace (20-30 s on this shared machine).
        deadline = time.monotonic() + PERF_WARMUP_S
        while end_offsets(bootstrap, topic, partitions) < PERF_WARMUP_RECORDS and time.monotonic() < deadline:
            time.sleep(2)
        time.sleep(3)
    start = {b: p.stat().st_size for b, p in logs.items()}
    before = end_offsets(bootstrap, topic, partitions)
    # The collector starts (its first metadata poll) COLLECTOR_WARM_S before the counted
    # window: what it sends once on start (each follower's first fetch after the metadata) is
    # not counted; the load runs through both.
    tm = int(time.time() * 1000)
    metadata = view.changes(view.ask(), tm)  # metadata (ISR, replica.lag.time.max.ms), brokers
    while sum(e["type"] == "metadata" for e in metadata) < partitions:  # a broker that lags
        time.sleep(0.2)
        metadata += view.changes(view.ask(), tm)
    wall0 = time.monotonic()
    if load == "moderate":
        produce_moderate(bootstrap, topic, partitions, COLLECTOR_WARM_S + seconds)
    elif load == "bursty":
        produce_bursty(bootstrap, topic, partitions, COLLECTOR_WARM_S + seconds)
    else:
        time.sleep(COLLECTOR_WARM_S + seconds)
    wall = time.monotonic() - wall0
    t0, t1 = tm + COLLECTOR_WARM_S * 1000, tm + int(wall * 1000)
    records = end_offsets(bootstrap, topic, partitions) - before
    if perf is not None:
        perf.send_signal(signal.SIGTERM)
        perf.wait(timeout=30)
    time.sleep(1.0)  # the last parked fetches are logged
    out: dict = {"load": load, "records_per_s": records / wall, "brokers": {}}
    parse_lines, parse_s = 0, 0.0
    events, named = list(metadata), list(metadata)  # named: fetches name their session
    for b, path in logs.items():
        with open(path, "rb") as f:
            warm = f.read(start[b]).decode(errors="replace").splitlines()
            data = f.read()
        lines = data.decode(errors="replace").splitlines()
        bl = BrokerLog("bench", b, view.name_of, lambda t: t == topic)
        sbl = BrokerLog("bench", b, view.name_of, lambda t: t == topic)
        sbl.session_ids = True  # as Collector sets it in session form
        for line in warm[-20000:]:  # the sessions, as the collector learns them on start
            bl.events(line, emit=False)
            sbl.events(line, emit=False)
        c0 = time.process_time()
        mine = [e for line in lines for e in bl.events(line)]
        spent = time.process_time() - c0
        named += [e for line in lines for e in sbl.events(line)]
        parse_lines += len(lines)
        parse_s += spent
        events += mine
        out["brokers"][b] = {"lines_per_s": len(lines) / wall, "bytes_per_s": len(data) / wall}
    out["collector_lines_per_cpu_s"] = parse_lines / parse_s if parse_s else 0.0
    sent, former = session_published(named, HOLD_MS, STEP_MS)
    counts = {
        "off": counted(published(events, None, HOLD_MS, STEP_MS), topic, t0, t1),
        "on": counted(published(events, Compactor(), HOLD_MS, STEP_MS), topic, t0, t1),
        "session": counted(sent, topic, t0, t1),
    }
    for form in FORMS:
        out[form] = rates(counts[form], partitions, (t1 - t0) / 1000)
        out[f"types_{form}"] = dict(counts[form])
    out["session_form"] = {"dropped": former.dropped, "restated": former.restated}
    out["reads"] = read_classes(events, topic, t0, t1)
    admin.delete_topics([topic], timeout_ms=60_000)
    wait_deleted(admin, topic)  # the next run's topic is not created while this one goes
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


def simulated_bursty(partitions: int, seconds: float, every_ms: int, seed: int) -> dict:
    """Events per partition-second, compaction on and session form, of a simulated RF 3 topic
    under bursts like the judge's: BURST_RECORDS round-robin over the partitions, sent over a
    second, every `every_ms`, nothing between (streaming/simulator: the followers fetch as a
    real broker's do, parked replica.fetch.wait.max.ms when caught up). One session per follower
    and leader, as Kafka's fetcher threads keep them. Counted over `seconds` after 10 s."""
    from replmon.streaming.collect.sessions import per_leader
    from replmon.streaming.simulator.cluster import ClusterSpec, TopicSpec
    from replmon.streaming.simulator.faults import BurstyProducer
    from replmon.streaming.simulator.model import simulate

    duration_ms = int(seconds * 1000) + 15_000
    spec = ClusterSpec(
        name="bench",
        topics=(TopicSpec(name="t", partitions=partitions, produce_rate=0.0),),
        duration_ms=duration_ms,
        replica_lag_time_max_ms=10_000,
        faults=tuple(
            BurstyProducer(
                topic="t",
                partition=p,
                start_ms=5_000,
                duration_ms=duration_ms - 5_000,
                every_ms=every_ms,
                burst_messages=BURST_RECORDS // partitions,
                burst_ms=1000,
            )
            for p in range(partitions)
        ),
    )
    events, _ = simulate(spec, seed=seed)
    t0 = min(e["ts"] for e in events) + 10_000
    t1 = t0 + int(seconds * 1000)
    on = counted(published(events, Compactor(), HOLD_MS, STEP_MS), "t", t0, t1)
    former = SessionForm(RESOLUTION_CAP_MS, session_key=per_leader)
    session = counted(published(events, Compactor(), HOLD_MS, STEP_MS, former), "t", t0, t1)
    return {"on": rates(on, partitions, seconds), "session": rates(session, partitions, seconds)}


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def fmt(v: dict, digits: int = 1) -> str:
    return f"{v['median']:,.{digits}f} ({v['min']:,.{digits}f}-{v['max']:,.{digits}f})"


def print_simulated_bursty(partitions: int, seconds: float, runs: int, every: str) -> int:
    summary: dict = {"partitions": partitions, "seconds": seconds, "runs": runs, "every_ms": {}}
    print(
        f"simulated bursty, {partitions} partitions, RF {RF}, {BURST_RECORDS:,} records a burst; "
        f"events per partition-second over {seconds:.0f} s, median (min-max) of {runs} seeds"
    )
    for every_ms in (int(v) for v in every.split(",")):
        rs = [simulated_bursty(partitions, seconds, every_ms, seed) for seed in range(runs)]
        row = {
            f"{k}_{form}": spread([r[form][k] for r in rs])
            for form in ("on", "session")
            for k in ("events_per_partition_s", "session_per_partition_s")
        }
        summary["every_ms"][every_ms] = row
        print(
            f"  every {every_ms} ms: compaction on {fmt(row['events_per_partition_s_on'], 3)}, "
            f"session form {fmt(row['events_per_partition_s_session'], 3)} "
            f"(session events {fmt(row['session_per_partition_s_session'], 3)})"
        )
    print(json.dumps(summary))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run-dir", default="deploy/local/.run")
    ap.add_argument("--loads", default="idle,moderate,max,bursty")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--offline", action="store_true", help="no brokers: the release loop on a simulated cluster"
    )
    ap.add_argument(
        "--partitions",
        type=int,
        default=None,
        help=f"the topic's partitions (RF 3; default {PARTITIONS}); --offline: simulated ones (default 200)",
    )
    ap.add_argument("--resolution-ms", type=int, default=None, help="--offline: compaction resolution")
    ap.add_argument(
        "--simulated-bursty",
        metavar="MS,MS",
        help="no brokers: events per partition-second, compaction on and session form, of a "
        "simulated topic under the judge's bursts every MS (e.g. 2000,3000), one seed per run",
    )
    args = ap.parse_args()
    if args.simulated_bursty:
        return print_simulated_bursty(args.partitions or 3, args.seconds, args.runs, args.simulated_bursty)
    if args.offline:
        args.partitions = args.partitions or 200
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
    partitions = args.partitions or PARTITIONS
    summary: dict = {"seconds": args.seconds, "runs": args.runs, "partitions": partitions, "loads": {}}
    print(
        f"{args.runs} runs of {args.seconds:.0f} s per load, {partitions} partitions, RF {RF}, "
        f"200 B records, acks=all; median (min-max) over runs"
    )
    for load in args.loads.split(","):
        runs = [one_run(env, logs, load, partitions, args.seconds) for _ in range(args.runs)]
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
        for mode in FORMS:
            for k in runs[0][mode]:
                row[f"{k}_{mode}"] = spread([r[mode][k] for r in runs])
            types = sorted({t for r in runs for t in r[f"types_{mode}"]})
            row[f"types_{mode}"] = {t: spread([r[f"types_{mode}"].get(t, 0) for r in runs]) for t in types}
        row["session_form"] = {
            k: spread([r["session_form"][k] for r in runs]) for k in ("dropped", "restated")
        }
        row["reads"] = {k: spread([r["reads"][k] for r in runs]) for k in READ_CLASSES}
        row["runs"] = runs  # each run's figures, as measured
        summary["loads"][load] = row
        print(
            f"  {load}: {fmt(row['records_per_s'], 0)} records/s; request log per broker "
            f"{fmt(row['lines_per_s_per_broker'], 0)} lines/s, {fmt(row['bytes_per_s_per_broker'], 0)} B/s; "
            f"collector {fmt(row['collector_lines_per_cpu_s'], 0)} lines per CPU s"
        )
        for mode in FORMS:
            label = "session form" if mode == "session" else f"compaction {mode}"
            print(
                f"    {label:14}: fetch events per follower-second "
                f"{fmt(row[f'fetch_per_follower_s_{mode}'], 3)}, appends per partition-second "
                f"{fmt(row[f'append_per_partition_s_{mode}'], 3)}, session events per partition-second "
                f"{fmt(row[f'session_per_partition_s_{mode}'], 3)}, events per partition-second "
                f"{fmt(row[f'events_per_partition_s_{mode}'], 3)}"
            )
            print(
                "      events by type: "
                + ", ".join(f"{t} {fmt(v, 0)}" for t, v in row[f"types_{mode}"].items())
            )
        print(
            f"    session form: fetches a session said {fmt(row['session_form']['dropped'], 0)}, "
            f"restated before a change {fmt(row['session_form']['restated'], 0)}"
        )
        print(
            "    follower reads (compaction off): "
            + ", ".join(f"{k} {fmt(row['reads'][k], 0)}" for k in READ_CLASSES)
        )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
