"""Record a request-log fixture of one Kafka version from real brokers (tests/collect/data/).

    .venv/bin/python tests/collect/record_version.py 3.9.1                 # KRaft
    .venv/bin/python tests/collect/record_version.py 3.9.1 --mode zk --ibp 3.0   # topic-name FETCH

Starts a fresh 3-broker cluster of that version with deploy/local/services.sh (jars from Maven
Central through deploy/local/fetch-jars.sh; REPLMON_PORT_OFFSET and REPLMON_SERVICES_RUN say
where, default offset 2250 and deploy/local/.run-versions), creates a topic of 4 partitions with
replication factor 3, produces a few hundred small acks=all records for a few seconds, waits
until the followers have caught up, and writes to tests/collect/data/<label>/:

- broker-<id>.log.gz: each broker's request log from just before the topic was created to the
  end, as the broker wrote it (only whole lines are cut at the two ends);
- facts.json: what the Admin API and the producer said at capture time, independent of
  replmon's parser: the brokers, the topic's id, each partition's leader, replicas, ISR and
  end offset, the offsets the producer's acks gave, and the FETCH/PRODUCE request versions
  seen in the logs' JSON headers.

The services are stopped and the run dir deleted at the end. tests/collect/test_versions.py
checks replmon's parser against these facts.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
SERVICES = ROOT / "deploy" / "local" / "services.sh"
TOPIC = "replmon-fixture"  # a fresh cluster's only topic (-<n> on a running cluster that has it)
PARTITIONS = 4
JAVA_PARTITIONS, JAVA_RECORDS = 2, 100
MARKER = "Completed request:"


def request_versions(data: bytes) -> dict[str, int]:
    """'FETCH v17 (replica fetcher)' -> lines, from each line's JSON header (read here with json,
    not with replmon's parser): who sent it tells the brokers' follower fetches from the
    KRaft controllers' (raft-client-N) and clients'."""
    seen: Counter = Counter()
    for line in data.decode().splitlines():
        at = line.find(MARKER)
        if at < 0:
            continue
        body, _ = json.JSONDecoder().raw_decode(line, at + len(MARKER))
        h = body["requestHeader"]
        api, client = h["requestApiKeyName"], h.get("clientId", "")
        if api not in ("FETCH", "PRODUCE"):
            continue
        who = " (java)" if client.endswith("-java") else " (kafka-python)"
        if api == "FETCH":
            who = " (replica fetcher)" if re.match(r"broker-\d+-fetcher-\d+$", client) else " (other)"
            who = " (raft)" if client.startswith("raft-client") else who
        seen[f"{api} v{h['requestApiVersion']}{who}"] += 1
    return dict(sorted(seen.items()))


def recount(out: Path) -> None:
    """Rewrite facts.json's request_versions_seen from the fixture's logs."""
    facts = json.loads((out / "facts.json").read_text())
    seen: Counter = Counter()
    for f in sorted(out.glob("broker-*.log.gz")):
        seen.update(request_versions(gzip.decompress(f.read_bytes())))
    facts["request_versions_seen"] = dict(sorted(seen.items()))
    (out / "facts.json").write_text(json.dumps(facts, indent=1) + "\n")


def services(env: dict, *args: str) -> None:
    subprocess.run(["bash", str(SERVICES), *args], env=env, check=True)


def read_env(run: Path) -> dict:
    return dict(line.split("=", 1) for line in (run / "env").read_text().splitlines() if "=" in line)


def positions(kafka_run: Path, brokers: list[int]) -> dict[int, int]:
    return {b: (kafka_run / f"node-{b}" / "logs" / "kafka-request.log").stat().st_size for b in brokers}


def whole_lines(data: bytes) -> bytes:
    """The complete lines of a cut: up to the last newline."""
    return data[: data.rfind(b"\n") + 1]


def kafka_topic_id(desc: dict) -> str | None:
    """The request log writes topic ids as Kafka's Uuid.toString: base64url without padding."""
    tid = desc.get("topic_id")
    return base64.urlsafe_b64encode(uuid.UUID(str(tid)).bytes).decode().rstrip("=") if tid else None


def partition_facts(desc: dict, ends: dict) -> dict[str, dict]:
    from kafka import TopicPartition

    return {
        str(p["partition_index"]): {
            "leader": p["leader_id"],
            "leader_epoch": p["leader_epoch"],
            "replicas": p["replica_nodes"],
            "isr": sorted(p["isr_nodes"]),
            "end_offset": ends[TopicPartition(desc["name"], p["partition_index"])],
        }
        for p in sorted(desc["partitions"], key=lambda p: p["partition_index"])
    }


def java_producer(senv: dict, bootstrap: str, topic: str, log: Path) -> subprocess.Popen | None:
    """Kafka's ProducerPerformance from the brokers' own jars, in the background."""
    version = senv.get("REPLMON_KAFKA_VERSION", "")
    libs = ROOT / "deploy" / "local" / f"kafka-libs-{version}"
    if not libs.is_dir():
        libs = ROOT / "deploy" / "local" / "kafka-libs"
    args = ["java", "-Xmx128m", "-cp", f"{libs}/*", "org.apache.kafka.tools.ProducerPerformance"]
    args += ["--topic", topic, "--num-records", str(JAVA_RECORDS), "--record-size", "100"]
    args += ["--throughput", "50", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all"]
    args += ["linger.ms=5", "client.id=replmon-fixture-java"]
    try:
        return subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT)
    except OSError as e:
        print(f"WARNING: {e}", file=sys.stderr)
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("version", help="Kafka version on Maven Central, e.g. 3.9.1")
    ap.add_argument("--mode", choices=("kraft", "zk"), default="kraft")
    ap.add_argument("--ibp", help="inter.broker.protocol.version (zk mode), e.g. 3.0")
    ap.add_argument("--label", help="fixture folder name (default <version>[-zk[-ibp<ibp>]])")
    ap.add_argument("--seconds", type=float, default=4.0, help="how long to produce")
    ap.add_argument("--rate", type=float, default=60.0, help="records per second")
    ap.add_argument(
        "--use-running",
        action="store_true",
        help="record from the cluster already up in the run dir (freshly set up, of this version and mode)",
    )
    ap.add_argument("--recount", action="store_true", help="only recount facts.json's request versions")
    args = ap.parse_args()
    label = args.label or args.version + (
        f"-zk{'-ibp' + args.ibp if args.ibp else ''}" if args.mode == "zk" else ""
    )
    out = DATA / label
    if args.recount:
        recount(out)
        return 0

    run = Path(os.environ.get("REPLMON_SERVICES_RUN", ROOT / "deploy" / "local" / ".run-versions"))
    env = dict(os.environ)
    env.update(
        REPLMON_SERVICES_RUN=str(run),
        REPLMON_PORT_OFFSET=os.environ.get("REPLMON_PORT_OFFSET", "2250"),
        REPLMON_KAFKA_VERSION=args.version,
        REPLMON_KAFKA_MODE=args.mode,
        REPLMON_REQUEST_LOG="1",
        REPLMON_KAFKA_HEAP=os.environ.get("REPLMON_KAFKA_HEAP", "-Xms128m -Xmx384m"),
    )
    env.pop("REPLMON_KAFKA_IBP", None)
    if args.ibp:
        env["REPLMON_KAFKA_IBP"] = args.ibp
    if args.use_running:
        senv = read_env(run)
        if senv.get("REPLMON_KAFKA_VERSION") != args.version or senv.get("REPLMON_KAFKA_MODE") != args.mode:
            raise SystemExit(f"the cluster in {run} is not Kafka {args.version} ({args.mode}): {senv}")
        return record(senv, args, out)
    services(env, "clean")
    services(env, "up", "--brokers", "3")
    try:
        return record(read_env(run), args, out)
    finally:
        services(env, "clean")


def record(senv: dict, args, out: Path) -> int:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    from replmon.streaming.collect.admin import describe_cluster

    bootstrap = senv["REPLMON_KAFKA_BOOTSTRAP"]
    kafka_run = Path(senv["REPLMON_KAFKA_RUN"])
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="replmon-fixture-admin")
    brokers = sorted(b["broker_id"] for b in describe_cluster(admin)["brokers"])
    assert len(brokers) == 3, brokers
    time.sleep(2.0)  # let the start-up requests finish before the cut
    topic, n = TOPIC, 1
    while topic in admin.list_topics():
        n += 1
        topic = f"{TOPIC}-{n}"
    java_topic = f"{topic}-java"
    start = positions(kafka_run, brokers)
    admin.create_topics([NewTopic(topic, PARTITIONS, 3), NewTopic(java_topic, JAVA_PARTITIONS, 3)])
    for _ in range(100):
        descs = admin.describe_topics([topic, java_topic])
        if all(
            len(d.get("partitions") or []) == {topic: PARTITIONS, java_topic: JAVA_PARTITIONS}[d["name"]]
            and all(p["leader_id"] >= 0 and len(p["isr_nodes"]) == 3 for p in d["partitions"])
            for d in descs
        ):
            break
        time.sleep(0.2)
    else:
        raise SystemExit(f"the topics' partitions did not all get a leader and a full ISR: {descs}")
    java = java_producer(
        senv, bootstrap, java_topic, Path(tempfile.gettempdir()) / f"replmon-fixture-{out.name}-java.log"
    )

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, client_id="replmon-fixture"
    )
    acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    futures = []
    n = int(args.seconds * args.rate)
    t0 = time.monotonic()
    for i in range(n):
        futures.append(producer.send(topic, value=b"r%06d" % i, partition=i % PARTITIONS))
        time.sleep(max(0.0, t0 + (i + 1) / args.rate - time.monotonic()))
    producer.flush()
    for f in futures:
        md = f.get(timeout=30)
        acked[md.partition].append(md.offset)
    producer.close()
    java_ok = java is not None and java.wait(timeout=180) == 0
    if not java_ok:
        print(
            f"WARNING: Kafka's Java producer failed (see {tempfile.gettempdir()}/replmon-fixture-*-java.log)",
            file=sys.stderr,
        )
    time.sleep(3.0)  # the followers fetch up to the end; their caught-up fetches wait and are logged

    desc, jdesc = sorted(admin.describe_topics([topic, java_topic]), key=lambda d: d["name"] != topic)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="replmon-fixture-offsets")
    ends = consumer.end_offsets(
        [TopicPartition(topic, p) for p in range(PARTITIONS)]
        + [TopicPartition(java_topic, p) for p in range(JAVA_PARTITIONS)]
    )
    consumer.close()
    time.sleep(1.0)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("broker-*.log.gz"):
        old.unlink()
    versions: Counter = Counter()
    sizes = {}
    for b in brokers:
        with open(kafka_run / f"node-{b}" / "logs" / "kafka-request.log", "rb") as fh:
            fh.seek(start[b])
            data = whole_lines(fh.read())
        versions.update(request_versions(data))
        (out / f"broker-{b}.log.gz").write_bytes(gzip.compress(data, mtime=0))
        sizes[b] = len(data)
    admin.close()

    partitions = partition_facts(desc, ends)
    for i, facts_of in partitions.items():
        facts_of["acked_offsets"] = sorted(acked[int(i)])
    topic_id = kafka_topic_id(desc)
    facts = {
        "kafka_version": senv.get("REPLMON_KAFKA_VERSION"),
        "mode": args.mode,
        "inter_broker_protocol": args.ibp,
        "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "log_date": "epoch-ms" if not senv.get("REPLMON_KAFKA_VERSION", "").startswith("3.") else "UTC",
        "brokers": brokers,
        "topic": topic,
        "topic_id": str(topic_id) if topic_id else None,
        "partitions": partitions,
        # Kafka's own producer (ProducerPerformance from the same jars, acks=all): its PRODUCE
        # versions are the Java client's; only the end offsets are known of its records.
        "java_topic": {
            "topic": java_topic,
            "topic_id": kafka_topic_id(jdesc),
            "records": JAVA_RECORDS,
            "partitions": partition_facts(jdesc, ends),
        }
        if java_ok
        else None,
        "request_versions_seen": dict(sorted(versions.items())),
        "log_bytes": {str(b): s for b, s in sizes.items()},
        "recorded_with": "tests/collect/record_version.py " + " ".join(sys.argv[1:]),
    }
    (out / "facts.json").write_text(json.dumps(facts, indent=1) + "\n")
    print(json.dumps({k: facts[k] for k in ("kafka_version", "mode", "request_versions_seen", "log_bytes")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
