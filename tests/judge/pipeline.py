"""The pipeline under judgement, as an operator runs it: `replmon collect` on the judge
cluster's request logs -> a metrics topic (on the 1-broker services cluster, so that faults
on the judged brokers do not stop the telemetry) -> `replmon run` -> Redis."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

from tests.judge.cluster import ROOT, JudgeCluster, wait_for

CLUSTER = "judge"


class Pipeline:
    def __init__(
        self, judge: JudgeCluster, services: dict, workdir: Path, alertmanager_url: str | None = None
    ) -> None:
        tag = uuid.uuid4().hex[:8]
        self.alertmanager_url = alertmanager_url
        self.judge, self.services, self.workdir = judge, services, workdir
        self.metrics_topic = f"judge-metrics-{tag}"
        self.prefix = f"judge{tag}"
        self.procs: dict[str, subprocess.Popen] = {}
        import redis

        self.redis = redis.Redis.from_url(services["redis_url"], decode_responses=True)

    def _spawn(self, name: str, args: list[str], env: dict) -> None:
        with open(self.workdir / f"{name}.log", "ab") as log:  # the child keeps its own copy
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "replmon.streaming.cli", *args],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def start_collect(self) -> None:
        args = [
            "collect",
            "--cluster",
            CLUSTER,
            "--bootstrap",
            self.judge.bootstrap,
            "--metrics-bootstrap",
            self.services["kafka_bootstrap"],
            "--metrics-topic",
            self.metrics_topic,
            "--create-topic",
            "--partitions",
            "3",
            "--state-dir",
            str(self.workdir / "collect-state"),
        ]
        for b in (1, 2, 3):
            args += ["--request-log", f"{b}={self.judge.request_log(b)}"]
        self._spawn("collect", args, dict(os.environ))

    def start_run(self) -> None:
        env = dict(
            os.environ,
            REPLMON_KAFKA__SUBSCRIBE=self.metrics_topic,
            REPLMON_KAFKA__STARTING_OFFSETS="earliest",
            REPLMON_REDIS__PREFIX=self.prefix,
            REPLMON_OUTPUT_DIR=str(self.workdir / "out"),
            REPLMON_SPARK__DRIVER_MEMORY="1g",
            REPLMON_SPARK__SHUFFLE_PARTITIONS="1",
            REPLMON_STREAM__BUCKETS="4",
            REPLMON_RULES__REPLICA_LAG_TIME_MAX_MS=str(self.judge.lag_ms),
            REPLMON_RULES__MIN_INSYNC_REPLICAS="2",
            REPLMON_SPARK__JARS=json.dumps(self.services["spark_jars"]),
        )
        if self.alertmanager_url:
            env["REPLMON_ALERTMANAGER__URL"] = self.alertmanager_url
        self._spawn(
            "run",
            [
                "run",
                "--kafka-bootstrap",
                self.services["kafka_bootstrap"],
                "--redis-url",
                self.services["redis_url"],
                "--no-timeline",
                "--verbose",
            ],
            env,
        )

    def check_alive(self) -> None:
        for name, p in self.procs.items():
            if p.poll() is not None:
                tail = (self.workdir / f"{name}.log").read_text(errors="replace")[-3000:]
                raise AssertionError(f"replmon {name} exited with {p.returncode}:\n{tail}")

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)

    # ------------------------------------------------------------ what replmon said (Redis)

    def partition(self, topic: str, partition: int) -> dict:
        return self.redis.hgetall(f"{self.prefix}:partition:{CLUSTER}:{topic}:{partition}")

    def clock(self) -> int:
        """replmon's event time for the cluster: the newest point of its cluster series, which
        every micro-batch writes (a healthy partition's own status is refreshed only every
        stream.status_refresh_ms, so its `ts` is no clock)."""
        last = self.redis.xrevrange(f"{self.prefix}:series:cluster:{CLUSTER}", count=1)
        return int(last[0][0].split("-")[0]) if last else 0

    def isr(self, topic: str, partition: int) -> list[int] | None:
        h = self.partition(topic, partition)
        return sorted(json.loads(h["isr"])) if h.get("isr") else None

    def alerts(self) -> list[dict]:
        """Every alert transition with the wall time Redis got it (the stream entry id)."""
        self.check_alive()
        out = []
        for entry_id, fields in self.redis.xrange(f"{self.prefix}:alerts"):
            rec = dict(fields)
            rec["written_ms"] = int(entry_id.split("-")[0])
            for k in ("ts", "started_ms", "partition", "replica", "broker"):
                if rec.get(k) not in (None, ""):
                    rec[k] = int(rec[k])
            out.append(rec)
        return out


class Producer:
    """A steady acks=1 producer on every partition (the leader LEOs grow; produce to a paused
    leader just times out), in a thread, until stopped."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        per_second: int = 300,
        acks=1,
        size: int = 200,
        burst: tuple[int, float] | None = None,
    ) -> None:
        from kafka import KafkaProducer

        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap.split(","),
            acks=acks,
            linger_ms=5,
            request_timeout_ms=5000,
            max_block_ms=2000,
            retries=0,
        )
        self.topic, self.partitions, self.per_second, self.size = topic, partitions, per_second, size
        self.burst = burst  # (records, every_s): bursts instead of a steady rate
        self.errors = 0
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _send(self, partition: int) -> None:
        try:
            self.producer.send(self.topic, b"x" * self.size, partition=partition).add_errback(self._err)
            self.sent += 1
        except Exception:  # noqa: BLE001 - a blocked partition; the fault is the point
            self.errors += 1

    def _err(self, _exc) -> None:
        self.errors += 1

    def _loop(self) -> None:
        i = 0
        while not self._stop.is_set():
            if self.burst:
                n, every = self.burst
                for _ in range(n):
                    self._send(i % self.partitions)
                    i += 1
                self._stop.wait(every)
                continue
            self._send(i % self.partitions)
            i += 1
            self._stop.wait(1.0 / self.per_second)

    def start(self) -> Producer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        with contextlib.suppress(Exception):  # closing is best effort: the broker may be down
            self.producer.close(timeout=5)


def describe(admin, topic: str) -> dict[int, dict]:
    (t,) = admin.describe_topics([topic])
    return {
        p["partition_index"]: {
            "leader": p["leader_id"],
            "leader_epoch": p["leader_epoch"],
            "isr": sorted(p["isr_nodes"]),
            "replicas": p["replica_nodes"],
        }
        for p in t["partitions"]
    }


def controller(admin) -> int:
    from replmon.streaming.collect.admin import describe_cluster  # also Kafka 3.4-3.6's answer

    return int(describe_cluster(admin)["controller_id"])


def wait_full_isr(admin, topic: str, timeout_s: float) -> dict:
    return wait_for(
        f"every ISR of {topic} to be full again",
        lambda: (
            (d := describe(admin, topic))
            and all(len(v["isr"]) == len(v["replicas"]) for v in d.values())
            and d
        ),
        timeout_s,
    )


class JavaProducer:
    """Kafka's own producer at a fixed rate (kafka-tools' ProducerPerformance, a JVM from
    deploy/local/kafka-libs): one record per batch (batch.size 1, linger.ms 0), up to 5 produce
    requests in flight per broker, so a leader takes batches faster than a follower that is
    given one batch per fetch can copy them, whatever the machine's load."""

    def __init__(
        self, bootstrap: str, topic: str, per_second: int, seconds: float, size: int, log: Path
    ) -> None:
        props = [
            f"bootstrap.servers={bootstrap}",
            "acks=1",
            "batch.size=1",
            "linger.ms=0",
            "max.in.flight.requests.per.connection=5",
        ]
        self.args = [
            "java",
            "-Xmx256m",
            "-cp",
            str(ROOT / "deploy" / "local" / "kafka-libs") + "/*",
            "org.apache.kafka.tools.ProducerPerformance",
            "--topic",
            topic,
            "--num-records",
            str(int(per_second * seconds)),
            "--record-size",
            str(size),
            "--throughput",
            str(per_second),
            "--reporting-interval",
            "5000",
            "--command-property",
            *props,
        ]
        self.log = log
        self.proc: subprocess.Popen | None = None

    def start(self) -> JavaProducer:
        with open(self.log, "ab") as log:  # the child keeps its own copy
            self.proc = subprocess.Popen(
                self.args,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self

    def stop(self) -> str:
        """Stop it (if still sending) and return its last report line."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        lines = [x for x in self.log.read_text(errors="replace").splitlines() if "records sent" in x]
        return lines[-1] if lines else ""
