"""The collector's cost and speed on the local 3-broker cluster with the request log on.

    REPLMON_SERVICES_RUN=$PWD/deploy/local/.run-bench REPLMON_PORT_OFFSET=600 \
        bash deploy/local/services.sh up --brokers 3
    python bench/collector.py --run-dir deploy/local/.run-bench [--rate 1000] [--seconds 20] [--runs 3]

Per run: a producer writes --rate records/s (200 B, acks=all) for --seconds to a 6-partition,
RF 3 topic. Then, from each broker's kafka-request.log, what the load cost the broker (request-log
lines and bytes per second) and what the collector makes of those lines: events per second per
broker, and how fast one process (one core) turns lines into events (the request-log parse,
the fetch sessions and the inference; publishing is not in it). Prints median and spread over
the runs, and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from replmon.streaming.collect.admin import kafka_topic_id
from replmon.streaming.collect.broker_log import BrokerLog


def env_of(run_dir: Path) -> dict:
    out = {}
    for line in (run_dir / "env").read_text().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def one_run(
    bootstrap: str, logs: dict[int, Path], topic: str, names: dict, rate: int, seconds: float
) -> dict:
    from kafka import KafkaProducer

    start = {b: p.stat().st_size for b, p in logs.items()}
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", linger_ms=5)
    t0 = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - t0) < seconds:
        while sent < elapsed * rate:
            producer.send(topic, b"x" * 200)
            sent += 1
        time.sleep(0.005)
    producer.flush()
    wall = time.monotonic() - t0
    producer.close()
    time.sleep(1.0)  # the last parked fetches are logged
    out = {"records_per_s": sent / wall, "brokers": {}}
    parse_lines = parse_s = 0.0
    for b, path in logs.items():
        with open(path, "rb") as f:
            f.seek(start[b])
            data = f.read()
        lines = data.decode(errors="replace").splitlines()
        bl = BrokerLog("bench", b, names.get)
        # Warm the sessions on the lines before the run, as the collector does on start.
        with open(path, "rb") as f:
            for line in f.read(start[b]).decode(errors="replace").splitlines():
                bl.events(line, emit=False)
        c0 = time.process_time()
        events = sum(len(bl.events(line)) for line in lines)
        spent = time.process_time() - c0
        parse_lines += len(lines)
        parse_s += spent
        out["brokers"][b] = {
            "lines_per_s": len(lines) / wall,
            "bytes_per_s": len(data) / wall,
            "events_per_s": events / wall,
            "bytes_per_line": len(data) / max(1, len(lines)),
        }
    out["collector_lines_per_cpu_s"] = parse_lines / parse_s if parse_s else 0.0
    return out


def summary(values: list[float]) -> str:
    med = statistics.median(values)
    return f"{med:,.0f} (min {min(values):,.0f}, max {max(values):,.0f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run-dir", default="deploy/local/.run")
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    run_dir = Path(args.run_dir).resolve()
    env = env_of(run_dir)
    bootstrap = env["REPLMON_KAFKA_BOOTSTRAP"]
    kafka_run = Path(env.get("REPLMON_KAFKA_RUN", run_dir / "kafka"))
    logs = {b: kafka_run / f"node-{b}" / "logs" / "kafka-request.log" for b in (1, 2, 3)}
    missing = [str(p) for p in logs.values() if not p.is_file()]
    if missing:
        raise SystemExit(
            f"no request log at {missing}: start the cluster with "
            "services.sh up --brokers 3 (the request log is on with 3 brokers)"
        )
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    topic = f"bench-collector-{int(time.time())}"
    admin.create_topics([NewTopic(topic, 6, 3)])
    time.sleep(2)
    names = {kafka_topic_id(t["topic_id"]): t["name"] for t in admin.describe_topics()}
    runs = [one_run(bootstrap, logs, topic, names, args.rate, args.seconds) for _ in range(args.runs)]
    admin.delete_topics([topic])
    print(
        f"{args.runs} runs of {args.seconds:.0f} s at {args.rate} records/s (200 B, acks=all, "
        f"6 partitions, RF 3); median (min, max) over runs"
    )
    print(f"  produced records/s: {summary([r['records_per_s'] for r in runs])}")
    for b in (1, 2, 3):
        per = [r["brokers"][b] for r in runs]
        print(
            f"  broker {b}: request-log lines/s {summary([p['lines_per_s'] for p in per])}, "
            f"bytes/s {summary([p['bytes_per_s'] for p in per])}, "
            f"events/s {summary([p['events_per_s'] for p in per])}"
        )
    print(
        f"  collector: request-log lines per CPU second (one core): "
        f"{summary([r['collector_lines_per_cpu_s'] for r in runs])}"
    )
    print(json.dumps({"rate": args.rate, "seconds": args.seconds, "runs": runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
