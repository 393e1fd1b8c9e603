"""Per-broker collectors on real brokers: a 3-broker KRaft cluster with the request log on (its
own run dir, ports shifted by 600 from the worktree's offset), one `replmon collect --role
broker` per broker's log plus one `--role cluster`, beside one `--role all` collector over the
same logs. Over the same window they publish the same events (modulo order and the Admin poll's
stamps), and a second cluster-role instance fences the first: one publisher at a time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.local_cluster import bootstrap_of, kill_brokers, run_services, services_env

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]
RUN_DIR = ROOT / "deploy" / "local" / ".run-collect-roles"
PORT_SHIFT = 600  # the judge's cluster is at +500
CLUSTER = "roles"


class Cluster:
    def __init__(self) -> None:
        offset = int(os.environ.get("REPLMON_PORT_OFFSET", "0")) + PORT_SHIFT
        self.env = services_env(RUN_DIR, offset)
        self.bootstrap = bootstrap_of(offset)

    def services(self, *args: str) -> None:
        proc = run_services(self.env, *args)
        assert proc.returncode == 0, f"services.sh {args} failed:\n{proc.stderr}{proc.stdout}"

    def request_log(self, broker: int) -> Path:
        return RUN_DIR / "kafka" / f"node-{broker}" / "logs" / "kafka-request.log"


@pytest.fixture(scope="module")
def cluster():
    c = Cluster()
    c.services("clean")
    c.services("up", "--brokers", "3")
    try:
        yield c
    finally:
        kill_brokers(RUN_DIR)  # the next run cleans the run dir first
        c.services("down")


class Collect:
    """One `replmon collect` subprocess, as an operator (or a sidecar) runs it."""

    def __init__(self, workdir: Path, name: str, args: list[str]) -> None:
        self.log = workdir / f"{name}.log"
        with open(self.log, "ab") as out:  # the child keeps its own copy
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "replmon.streaming.cli", "collect", *args],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait(timeout=10)

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def read_topic(bootstrap: str, topic: str) -> list[dict]:
    """Every committed record up to the topic's end offsets now (the collectors keep writing)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","), enable_auto_commit=False, isolation_level="read_committed"
    )
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        out: list[dict] = []
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            assert time.monotonic() < deadline, f"could not read {topic} to its end"
            for records in consumer.poll(timeout_ms=1000).values():
                out += [
                    json.loads(r.value)
                    for r in records
                    if r.offset < ends[TopicPartition(r.topic, r.partition)]
                ]
        return out
    finally:
        consumer.close()


def wait_for(what: str, check, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if got := check():
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def produce(bootstrap: str, topic: str, seconds: float) -> int:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", linger_ms=5)
    sent, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for p in range(3):
            producer.send(topic, b"x" * 200, partition=p)
            sent += 1
        time.sleep(0.01)
    producer.flush(timeout=30)
    producer.close(timeout=5)
    return sent


def log_events(events: list[dict], start_ms: int, end_ms: int) -> Counter:
    """The request logs' events in the window, as a multiset (their order across partitions
    depends on the topic's partitions and the collectors' steps, not on what they say)."""
    return Counter(
        json.dumps(e, sort_keys=True)
        for e in events
        if e["type"] in ("fetch", "append") and start_ms <= e["ts"] <= end_ms
    )


def states(events: list[dict]) -> dict:
    """The Admin API's last report of each partition and broker, without its stamp (each
    collector polls on its own clock)."""
    last = {}
    for e in sorted((e for e in events if e["type"] in ("metadata", "broker")), key=lambda e: e["ts"]):
        last[(e.get("topic"), e.get("partition"), e.get("broker"))] = {
            k: v for k, v in e.items() if k != "ts"
        }
    return last


def test_per_broker_collectors_publish_what_one_collector_does_and_one_cluster_role_at_a_time(cluster):
    # Not pytest's tmp_path: other pytest sessions on this machine prune /tmp/pytest-of-* under
    # a long test; the cluster's own run dir is fresh for every module.
    tmp_path = RUN_DIR / "collect"
    tmp_path.mkdir()
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","), request_timeout_ms=5000)
    single_topic, split_topic = "roles-single", "roles-split"
    admin.create_topics([NewTopic("orders", 3, 3), NewTopic(single_topic, 1, 3), NewTopic(split_topic, 3, 3)])
    admin.close()
    common = [
        "--cluster",
        CLUSTER,
        "--bootstrap",
        cluster.bootstrap,
        "--metrics-bootstrap",
        cluster.bootstrap,
    ]
    common += ["--exclude-topic", single_topic, "--exclude-topic", split_topic]
    # Every event, compared one by one: compaction and the session form decide at each
    # collector's release, whose timing differs between processes (their own differential
    # tests show what they keep).
    common += ["--no-compact", "--no-session-form"]
    logs = {b: f"{b}={cluster.request_log(b)}" for b in (1, 2, 3)}
    procs = {
        "all": Collect(
            tmp_path,
            "all",
            [*common, "--metrics-topic", single_topic, "--state-dir", str(tmp_path / "all")]
            + [a for b in logs for a in ("--request-log", logs[b])],
        )
    }
    split = [*common, "--metrics-topic", split_topic, "--state-dir", str(tmp_path / "split")]
    for b in logs:
        procs[f"broker-{b}"] = Collect(
            tmp_path, f"broker-{b}", [*split, "--role", "broker", "--request-log", logs[b]]
        )
    procs["cluster"] = Collect(tmp_path, "cluster", [*split, "--role", "cluster"])
    try:
        # Every collector has warmed up and mapped the topic ids (its first events are out).
        wait_for(
            "every collector's first events",
            lambda: (
                all(p.proc.poll() is None for p in procs.values())
                and {e["type"] for e in read_topic(cluster.bootstrap, split_topic)} >= {"fetch", "heartbeat"}
                and read_topic(cluster.bootstrap, single_topic)
            ),
            90,
        )
        time.sleep(3)
        start_ms = int(time.time() * 1000)
        sent = produce(cluster.bootstrap, "orders", 8)
        end_ms = int(time.time() * 1000)
        # Failover: a second cluster role takes over; the first is fenced at its next step.
        second_ms = int(time.time() * 1000)
        procs["cluster-2"] = Collect(tmp_path, "cluster-2", [*split, "--role", "cluster"])
        wait_for("the first cluster role to be fenced", lambda: procs["cluster"].proc.poll() is not None, 60)
        fenced_rc, fenced_ms = procs["cluster"].proc.returncode, int(time.time() * 1000)
        time.sleep(12)  # the hold (1.5 s) and the second role's heartbeats for ~10 s
        after_ms = int(time.time() * 1000)
    finally:
        codes = {name: p.stop() for name, p in procs.items()}
    single = read_topic(cluster.bootstrap, single_topic)
    published = read_topic(cluster.bootstrap, split_topic)
    for name, p in procs.items():
        assert "Traceback" not in p.text(), (name, p.text()[-3000:])
    assert fenced_rc == 4, procs["cluster"].text()[-2000:]
    assert "another collector started with this one's transactional id" in procs["cluster"].text()
    assert all(rc == 0 for name, rc in codes.items() if name != "cluster"), codes

    # The same request-log events over the window in which every collector ran.
    one, per_broker = log_events(single, start_ms, end_ms), log_events(published, start_ms, end_ms)
    kinds = Counter(json.loads(e)["type"] for e in one.elements())
    # (8 s of sends paced by 10 ms sleeps: ~2,400 on a quiet machine, 831 once on a loaded one)
    assert sent > 300 and kinds["fetch"] > 100 and kinds["append"] > 20, (sent, kinds)
    assert per_broker == one, (len(per_broker), len(one), list((per_broker - one).items())[:3])
    # The same Admin API reports; no request-log event published more often than the single
    # collector published it (the multisets above are equal: two fetches a follower sent within
    # one millisecond at the same offset are two equal events in both, seen in a run here).
    assert states(published) == states(single)
    repeats = log_events([e for e in published if e["type"] == "fetch"], start_ms, end_ms)
    assert all(n <= one[k] for k, n in repeats.items()), [k for k, n in repeats.items() if n > one[k]]

    # Heartbeats come from one place: one a second, however many collectors run, and from one
    # cluster role at a time (the fenced one wrote nothing after the second started, so the
    # committed heartbeats' times only grow, with no second series interleaved).
    beats = [e["ts"] for e in published if e["type"] == "heartbeat"]
    assert beats == sorted(beats), "two cluster roles' heartbeats interleaved"
    window = [t for t in beats if fenced_ms + 1000 <= t + 1500 <= after_ms - 1000]
    seconds = (after_ms - 1000 - fenced_ms - 1000) / 1000
    # At most one a second (two cluster roles would send two); at least a few (the second one
    # publishes: its steps, a transaction each, took 1-2.6 s on this shared machine).
    assert 3 <= len(window) <= 1.3 * seconds + 1, (len(window), seconds)
    # The second role started with the cluster's whole state: every partition's metadata again.
    assert any(e["type"] == "metadata" and e["ts"] >= second_ms for e in published)
