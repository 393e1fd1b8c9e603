"""What the request log at DEBUG (for `replmon collect`) costs a busy broker.

    python bench/broker_cost.py [--configs off,on,filter] [--partitions 6,600] [--runs 3]
        [--seconds 30] [--warmup 12] [--results FILE] [--lock /work/heavy.lock]
    python bench/broker_cost.py --report FILE     (the table and JSON of recorded runs only)

Per configuration it starts its own 3-broker KRaft cluster (deploy/local/services.sh up
--brokers 3, its own run dir and port offset: REPLMON_SERVICES_RUN, REPLMON_PORT_OFFSET), and
stops it after. Configurations:
  off     the request log off (kafka.request.logger at WARN, services.sh REPLMON_REQUEST_LOG=0)
  on      deploy/kafka/log4j2-request-log.properties without its filter: every request
  filter  the shipped fragment as it is: only the lines replmon collect reads
  filter-async  the filter, and the file written by an Async appender (no flush per line)
  filter-wait   the filter, and replica.fetch.wait.max.ms = 2000 (Kafka's default is 500)
  (the last two not yet run on brokers: check the brokers' server.log on their first run)
Each run: a fresh topic (RF 3, min.insync.replicas 2), and Kafka's own ProducerPerformance
(deploy/local/kafka-libs, --throughput -1, acks=all, 100 B records) producing as fast as it can.
After a warm-up (the JVM starts, the producer reaches its pace), a window of --seconds:
records acknowledged (growth of the partitions' high watermarks), the brokers' CPU (utime +
stime from /proc/<pid>/stat), and the growth of their request-log files (followed by inode
across rolls). Every run is appended to the results file at once (JSON lines), so an
interrupted bench still reports. Prints median (min-max) over the runs per configuration and
partition count, and the ratios to `off`; the last line is one JSON object.

With --lock, each configuration (start, runs, stop) holds an exclusive flock on that file: the
machine is otherwise quiet while it is measured.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBS = ROOT / "deploy" / "local" / "kafka-libs"
SERVICES_SH = ROOT / "deploy" / "local" / "services.sh"
FRAGMENT = ROOT / "deploy" / "kafka" / "log4j2-request-log.properties"
BROKERS, RF, MIN_ISR, RECORD_SIZE = (1, 2, 3), 3, 2, 100
CLK_TCK = os.sysconf("SC_CLK_TCK")
CONFIGS = ("off", "on", "filter", "filter-async", "filter-wait")
ASYNC_LINES = """
# bench/broker_cost.py filter-async: the file written by an Async appender's thread, flushed at
# the end of each batch it takes off its queue instead of after every line.
appender.replmonRequest.immediateFlush = false
appender.replmonAsync.type = Async
appender.replmonAsync.name = ReplmonRequestLogAsync
appender.replmonAsync.bufferSize = 8192
appender.replmonAsync.ref.type = AppenderRef
appender.replmonAsync.ref.ref = ReplmonRequestLog
logger.request.appenderRef.replmonRequest.ref = ReplmonRequestLogAsync
"""
_HEADER = re.compile(
    r'"requestApiKey":\d+,"requestApiVersion":\d+,"correlationId":-?\d+,"clientId":"([^"]*)"'
)
_FOLLOWER = re.compile(r"^broker-\d+-fetcher-\d+$")
_API_NAME = re.compile(r'"requestApiKeyName":"(\w+)"')


# ------------------------------------------------------------------ parsing and aggregation


def cpu_ticks(stat: str) -> int:
    """utime + stime (clock ticks) from the text of /proc/<pid>/stat (fields 14 and 15; the
    command name in parentheses may hold spaces, so count from its closing parenthesis)."""
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def grown_bytes(first: dict[int, int], samples: list[dict[int, int]]) -> int:
    """Bytes written to a set of rolling files between the first sample and the last: each
    sample maps inode -> size. A rename (a roll) keeps the inode; a file new since the first
    sample counts from 0; a deleted (oldest) file counts up to its last sample."""
    last: dict[int, int] = {}
    for sample in samples:
        last.update(sample)
    return sum(size - first.get(inode, 0) for inode, size in last.items())


def line_kind(line: str) -> str:
    """What a request-log line is, for the byte shares: 'follower FETCH', 'raft FETCH',
    'consumer FETCH', or the API name."""
    api = _API_NAME.search(line[:600])
    name = api.group(1) if api else "?"
    if name != "FETCH":
        return name
    header = _HEADER.search(line[:600])
    client = header.group(1) if header else ""
    if _FOLLOWER.match(client):
        return "follower FETCH"
    return "raft FETCH" if client.startswith("raft-client") else "consumer FETCH"


def kinds(lines) -> dict[str, dict[str, int]]:
    """Lines and bytes (with the newline) per line_kind."""
    n: Counter = Counter()
    size: Counter = Counter()
    for line in lines:
        k = line_kind(line)
        n[k] += 1
        size[k] += len(line.encode()) + (0 if line.endswith("\n") else 1)
    return {k: {"lines": n[k], "bytes": size[k]} for k in n}


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def fmt(v: dict, digits: int = 1) -> str:
    return f"{v['median']:,.{digits}f} ({v['min']:,.{digits}f}-{v['max']:,.{digits}f})"


def summarize(runs: list[dict]) -> dict:
    """Per partition count and configuration: median and spread of each figure over the runs,
    and the ratios to the same partition count's `off` (medians)."""
    out: dict = {}
    for r in runs:
        out.setdefault(str(r["partitions"]), {}).setdefault(r["config"], []).append(r)
    summary: dict = {}
    for parts, by_config in sorted(out.items(), key=lambda kv: int(kv[0])):
        rows = {}
        for config, rs in by_config.items():
            rows[config] = {
                key: spread([r[key] for r in rs])
                for key in (
                    "records_per_s",
                    "mb_per_s",
                    "broker_cpu_s",
                    "broker_cpu_pct",
                    "broker_cpu_s_per_1k_records",
                    "broker_cpu_s_per_mb",
                    "producer_cpu_pct",
                    "request_log_bytes_per_s",
                    "request_log_bytes_per_record",
                )
            }
            rows[config]["kinds"] = merged_kinds(rs)
        base = rows.get("off")
        for config, row in rows.items():
            if base is not None and config != "off":
                row["vs_off"] = {
                    key: row[key]["median"] / base[key]["median"]
                    for key in ("records_per_s", "broker_cpu_s_per_1k_records")
                    if base[key]["median"]
                }
        summary[parts] = rows
    return summary


def merged_kinds(runs: list[dict]) -> dict[str, dict[str, float]]:
    """Request-log lines per second and bytes per line, per kind, over the runs that counted."""
    lines: Counter = Counter()
    size: Counter = Counter()
    seconds = 0.0
    for r in runs:
        if r.get("kinds") is None:
            continue
        seconds += r["wall_s"]
        for k, v in r["kinds"].items():
            lines[k] += v["lines"]
            size[k] += v["bytes"]
    if not seconds:
        return {}
    return {
        k: {"lines_per_s": lines[k] / seconds, "bytes_per_line": size[k] / lines[k]}
        for k in sorted(lines, key=lambda k: -size[k])
    }


def print_report(runs: list[dict]) -> dict:
    summary = summarize(runs)
    print(
        "Broker cost of the request log: 3 KRaft brokers and the producer on one 2-core machine;\n"
        f"RF {RF}, min.insync.replicas {MIN_ISR}, acks=all, {RECORD_SIZE} B records, ProducerPerformance "
        "--throughput -1;\nmedian (min-max) over runs; CPU is the 3 brokers' together (200% = both cores)"
    )
    head = (
        f"{'partitions':>10} {'config':13} {'runs':>4} {'records/s':>26} {'broker CPU %':>20} "
        f"{'CPU s per 1k records':>22} {'request log B/s':>30} {'vs off: rec/s, CPU/rec':>24}"
    )
    print(head)
    for parts, rows in summary.items():
        for config in sorted(rows, key=lambda c: CONFIGS.index(c) if c in CONFIGS else 99):
            row = rows[config]
            ratio = row.get("vs_off", {})
            vs = (
                f"{ratio.get('records_per_s', float('nan')):.2f}, "
                f"{ratio.get('broker_cpu_s_per_1k_records', float('nan')):.2f}"
                if ratio
                else ""
            )
            print(
                f"{parts:>10} {config:13} {row['records_per_s']['n']:>4} {fmt(row['records_per_s'], 0):>26} "
                f"{fmt(row['broker_cpu_pct'], 0):>20} {fmt(row['broker_cpu_s_per_1k_records'], 4):>22} "
                f"{fmt(row['request_log_bytes_per_s'], 0):>30} {vs:>24}"
            )
            for kind, v in list(row["kinds"].items())[:4]:
                print(
                    f"{'':>29} {kind:16} {v['lines_per_s']:9,.1f} lines/s {v['bytes_per_line']:9,.0f} B/line"
                )
    return summary


# ------------------------------------------------------------------ the cluster and the runs


def services(env: dict, *args: str) -> None:
    p = subprocess.run(
        ["bash", str(SERVICES_SH), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    if p.returncode != 0:
        raise RuntimeError(f"services.sh {' '.join(args)} failed:\n{p.stderr[-3000:]}")


def fragment_for(config: str, run_dir: Path) -> Path:
    """The log4j2 lines services.sh appends for a configuration."""
    text = FRAGMENT.read_text()
    if config == "on":
        text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("logger.request.filter.")) + "\n"
    elif config == "filter-async":
        text += ASYNC_LINES
    path = run_dir / f"request-log-{config}.properties"
    path.write_text(text)
    return path


def cluster_env(config: str, run_dir: Path, offset: int) -> dict:
    run_dir.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        REPLMON_SERVICES_RUN=str(run_dir),
        REPLMON_PORT_OFFSET=str(offset),
        REPLMON_PYTHON=sys.executable,
        REPLMON_REQUEST_LOG="0" if config == "off" else "1",
        REPLMON_REQUEST_LOG_FRAGMENT=str(fragment_for(config, run_dir)),
    )
    for b in BROKERS:
        env.pop(f"REPLMON_KAFKA_NODE_PROPS_{b}", None)
        if config == "filter-wait":
            env[f"REPLMON_KAFKA_NODE_PROPS_{b}"] = "replica.fetch.wait.max.ms=2000"
    return env


@contextmanager
def exclusive(lock: str | None):
    if lock is None:
        yield
        return
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def broker_pids(run_dir: Path) -> dict[int, int]:
    return {b: int((run_dir / "kafka" / f"node-{b}" / "kafka.pid").read_text()) for b in BROKERS}


def request_logs(run_dir: Path, b: int) -> dict[int, int]:
    """inode -> size of broker b's kafka-request.log and its rolled files."""
    out = {}
    for p in (run_dir / "kafka" / f"node-{b}" / "logs").glob("kafka-request.log*"):
        try:
            st = p.stat()
        except FileNotFoundError:  # rolled away between the listing and the stat
            continue
        out[st.st_ino] = st.st_size
    return out


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=120_000)
    try:
        admin.create_topics(
            [NewTopic(topic, partitions, RF, topic_configs={"min.insync.replicas": str(MIN_ISR)})],
            timeout_ms=120_000,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # every partition led, its whole ISR in place
            (desc,) = admin.describe_topics([topic])
            parts = desc.get("partitions") or []
            if len(parts) == partitions and all(
                p["leader_id"] >= 0 and len(p["isr_nodes"]) == RF for p in parts
            ):
                return
            time.sleep(1)
        raise RuntimeError(f"{topic}: not all {partitions} partitions led with a full ISR in 120 s")
    finally:
        admin.close()


def delete_topic(bootstrap: str, topic: str) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        admin.delete_topics([topic], timeout_ms=60_000)
    finally:
        admin.close()


def end_offsets(consumer, topic: str, partitions: int) -> int:
    """The topic's records acknowledged so far: the sum of its partitions' high watermarks."""
    from kafka import TopicPartition

    return sum(consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)]).values())


def one_run(
    config: str, partitions: int, run_dir: Path, bootstrap: str, n: int, warmup_s: float, seconds: float
) -> dict:
    """ProducerPerformance unthrottled on a fresh topic; after `warmup_s` (the JVM starts, the
    producer reaches its pace), a window of `seconds`: records acknowledged (high watermarks),
    brokers' CPU, request-log growth."""
    from kafka import KafkaConsumer

    topic = f"cost-{partitions}-{config}-{n}-{int(time.time())}"
    create_topic(bootstrap, topic, partitions)
    time.sleep(3)  # followers' fetch sessions settle
    pids = broker_pids(run_dir)
    logs = {b: (run_dir / "kafka" / f"node-{b}" / "logs" / "kafka-request.log") for b in BROKERS}
    samples: dict[int, list] = {b: [] for b in BROKERS}
    cmd = [os.environ.get("JAVA", "java"), "-Xmx512m", "-cp", f"{LIBS}/*"]
    cmd += ["org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(10**10)]
    cmd += ["--record-size", str(RECORD_SIZE), "--throughput", "-1", "--producer-props"]
    cmd += [f"bootstrap.servers={bootstrap}", "acks=all"]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","))
    out_path = run_dir / "perf.out"
    born = time.monotonic()
    with open(out_path, "w") as out:
        perf = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        time.sleep(warmup_s)
        if perf.poll() is not None:
            raise RuntimeError(
                f"ProducerPerformance exited {perf.returncode}: {out_path.read_text()[-2000:]}"
            )
        start_pos = {b: (p.stat().st_ino, p.stat().st_size) if p.exists() else None for b, p in logs.items()}
        first = {b: request_logs(run_dir, b) for b in BROKERS}
        hw0 = end_offsets(consumer, topic, partitions)
        cpu0 = {b: cpu_ticks(Path(f"/proc/{pid}/stat").read_text()) for b, pid in pids.items()}
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            for b in BROKERS:
                samples[b].append(request_logs(run_dir, b))
            time.sleep(0.5)
        cpu1 = {b: cpu_ticks(Path(f"/proc/{pid}/stat").read_text()) for b, pid in pids.items()}
        wall = time.monotonic() - t0
        hw1 = end_offsets(consumer, topic, partitions)
        for b in BROKERS:
            samples[b].append(request_logs(run_dir, b))
        kinds_of_run = run_kinds(logs, start_pos)
    finally:
        perf.kill()
        _, _, usage = os.wait4(perf.pid, 0)
        lifetime = time.monotonic() - born
        perf.returncode = -9
        consumer.close()
    records = hw1 - hw0
    per_broker = {b: (cpu1[b] - cpu0[b]) / CLK_TCK for b in BROKERS}
    cpu = sum(per_broker.values())
    log_bytes = sum(grown_bytes(first[b], samples[b]) for b in BROKERS)
    delete_topic(bootstrap, topic)
    return {
        "config": config,
        "partitions": partitions,
        "run": n,
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "records": records,
        "records_per_s": records / wall,
        "mb_per_s": records * RECORD_SIZE / 1e6 / wall,
        "wall_s": wall,
        "broker_cpu_s": cpu,
        "broker_cpu_s_by_broker": per_broker,
        "broker_cpu_pct": 100 * cpu / wall,
        "broker_cpu_s_per_1k_records": cpu / (records / 1000),
        "broker_cpu_s_per_mb": cpu / (records * RECORD_SIZE / 1e6),
        "producer_cpu_pct": 100 * (usage.ru_utime + usage.ru_stime) / lifetime,
        "request_log_bytes": log_bytes,
        "request_log_bytes_per_s": log_bytes / wall,
        "request_log_bytes_per_record": log_bytes / records,
        "kinds": kinds_of_run,
    }


def run_kinds(logs: dict[int, Path], start_pos: dict) -> dict | None:
    """Lines and bytes per kind written during the run, when no file rolled (else None)."""
    total: dict[str, dict[str, int]] = {}
    for b, p in logs.items():
        if start_pos[b] is None:
            return None
        ino, pos = start_pos[b]
        if p.stat().st_ino != ino:
            return None
        with open(p, "rb") as f:
            f.seek(pos)
            lines = f.read().decode(errors="replace").splitlines(keepends=True)
        for k, v in kinds(lines).items():
            t = total.setdefault(k, {"lines": 0, "bytes": 0})
            t["lines"] += v["lines"]
            t["bytes"] += v["bytes"]
    return total


def load_results(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="off,on,filter")
    ap.add_argument("--partitions", default="6,600")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=30, help="the measured window of each run")
    ap.add_argument("--warmup", type=float, default=12, help="seconds of producing before the window")
    ap.add_argument("--run-dir", default=str(ROOT / "deploy" / "local" / ".run-cost"))
    ap.add_argument("--port-offset", type=int, default=int(os.environ.get("REPLMON_PORT_OFFSET", "2200")))
    ap.add_argument(
        "--results", help="JSON lines, one per run, appended (default: RUN_DIR/broker_cost.jsonl)"
    )
    ap.add_argument("--lock", help="flock -x this file around each configuration (e.g. /work/heavy.lock)")
    ap.add_argument("--report", help="only print the table and JSON of this results file")
    args = ap.parse_args()
    if args.report:
        runs = load_results(Path(args.report))
        print(json.dumps({"runs": len(runs), "summary": print_report(runs)}))
        return 0
    run_dir = Path(args.run_dir).resolve()
    results = Path(args.results or run_dir / "broker_cost.jsonl")
    configs = args.configs.split(",")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise SystemExit(f"--configs: unknown {unknown}; known: {', '.join(CONFIGS)}")
    bootstrap = ",".join(f"127.0.0.1:{19092 + args.port_offset + i}" for i in range(len(BROKERS)))
    for config in configs:
        env = cluster_env(config, run_dir, args.port_offset)
        with exclusive(args.lock):
            services(env, "up", "--brokers", "3")
            try:
                for parts in (int(p) for p in args.partitions.split(",")):
                    for n in range(args.runs):
                        run = one_run(config, parts, run_dir, bootstrap, n, args.warmup, args.seconds)
                        with open(results, "a") as f:
                            f.write(json.dumps(run) + "\n")
                        print(
                            f"  {config} {parts} partitions run {n}: {run['records_per_s']:,.0f} records/s, "
                            f"broker CPU {run['broker_cpu_pct']:.0f}%, request log "
                            f"{run['request_log_bytes_per_s']:,.0f} B/s",
                            flush=True,
                        )
            finally:
                services(env, "down")
    runs = load_results(results)
    print(json.dumps({"runs": len(runs), "summary": print_report(runs)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
