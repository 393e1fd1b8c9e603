"""The judge's real 3-broker cluster: its own run dir and ports next to the 1-broker services,
the brokers' own verdicts read from their server.log, and faults (SIGSTOP, SIGKILL)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tests.local_cluster import ROOT, bootstrap_of, run_services, services_env

RUN_DIR = ROOT / "deploy" / "local" / ".run-judge"
PORT_SHIFT = 500  # the judge's ports: the worktree's offset + this
_SHRINK = re.compile(
    r"^\[(?P<when>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO "
    r"\[Partition (?P<topic>[\w.-]+)-(?P<partition>\d+) broker=(?P<leader>\d+)\] "
    r"Shrinking ISR from (?P<old>[\d,]+) to (?P<new>[\d,]+)\..*Out of sync replicas: "
    r"(?P<replicas>.*)\. \(kafka\.cluster\.Partition\)"
)
# Every KRaft controller logs the committed fence when it replays it (fenced=1: fence, -1: unfence).
_FENCE = re.compile(
    r"^\[(?P<when>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO .*Replayed "
    r"BrokerRegistrationChangeRecord .*brokerId=(?P<broker>\d+), brokerEpoch=\d+, fenced=1,"
)
# A leader's ISR change: committed (`ISR updated to`, once the controller accepted its
# AlterPartition), or proposed (`Shrinking ISR ... to`: the committed shrink may reach the leader
# as a new partition registration instead, which it logs elsewhere).
_ISR_UPDATED = re.compile(
    r"^\[(?P<when>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO "
    r"\[Partition (?P<topic>[\w.-]+)-(?P<partition>\d+) broker=\d+\] "
    r"(?:ISR updated to|Shrinking ISR from [\d,]+ to) (?P<isr>[\d,]+)"
)
# A committed change that reached the leader as a new partition registration (state.change.logger).
_REGISTERED = re.compile(
    r"^\[(?P<when>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO \[Broker id=\d+\] Skipped the "
    r"become-leader state change for (?P<topic>[\w.-]+)-(?P<partition>\d+) .*?isr=\[(?P<isr>[\d, ]+)\]"
)
_OUT = re.compile(r"brokerId: (\d+), endOffset: (-?\d+), lastCaughtUpTimeMs: (\d+)")


@dataclass(frozen=True)
class Shrink:
    """One `Shrinking ISR` line of a leader: the broker's own verdict."""

    log_ms: int
    topic: str
    partition: int
    leader: int
    replica: int
    last_caught_up_ms: int


def log_ms(stamp: str) -> int:
    """server.log's [%d] date, in the JVM's (= this machine's) time zone."""
    return round(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000)


def parse_shrinks(text: str) -> list[Shrink]:
    out = []
    for line in text.splitlines():
        m = _SHRINK.match(line)
        if not m:
            continue
        for broker, _end, lcu in _OUT.findall(m["replicas"]):
            out.append(
                Shrink(
                    log_ms(m["when"]),
                    m["topic"],
                    int(m["partition"]),
                    int(m["leader"]),
                    int(broker),
                    int(lcu),
                )
            )
    return out


class JudgeCluster:
    def __init__(
        self,
        lag_ms: int,
        session_timeout_ms: int | None,
        node_props: dict[int, str] | None = None,
        kafka_version: str = "",
        run_dir: Path = RUN_DIR,
        port_shift: int = PORT_SHIFT,
    ):
        """session_timeout_ms None: Kafka's default broker.session.timeout.ms (9 s).
        kafka_version "": REPLMON_JUDGE_KAFKA_VERSION, else deploy/kafka/pom.xml's; a module
        that runs another version has its own run_dir and port_shift, so that its cluster never
        meets the default one."""
        offset = int(os.environ.get("REPLMON_PORT_OFFSET", "0")) + port_shift
        self.lag_ms = lag_ms
        self.run_dir = run_dir
        self.env = services_env(run_dir, offset, REPLMON_REPLICA_LAG_TIME_MAX_MS=str(lag_ms))
        self.env.pop("REPLMON_BROKER_SESSION_TIMEOUT_MS", None)
        # REPLMON_JUDGE_KAFKA_VERSION (e.g. 3.9.1): the brokers' Kafka version, KRaft mode
        # (services.sh fetches its jars); default deploy/kafka/pom.xml's.
        for k in ("REPLMON_KAFKA_VERSION", "REPLMON_KAFKA_MODE", "REPLMON_KAFKA_IBP"):
            self.env.pop(k, None)
        self.kafka_version = kafka_version or os.environ.get("REPLMON_JUDGE_KAFKA_VERSION", "")
        if self.kafka_version:
            self.env["REPLMON_KAFKA_VERSION"] = self.kafka_version
        if session_timeout_ms is not None:
            self.env["REPLMON_BROKER_SESSION_TIMEOUT_MS"] = str(session_timeout_ms)
        for i, props in (node_props or {}).items():
            self.env[f"REPLMON_KAFKA_NODE_PROPS_{i}"] = props
        self.bootstrap = bootstrap_of(offset)

    def services(self, *args: str, timeout: float = 600) -> None:
        proc = run_services(self.env, *args, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"services.sh {' '.join(args)} failed:\n{proc.stderr}{proc.stdout}")

    def node_dir(self, broker: int) -> Path:
        return self.run_dir / "kafka" / f"node-{broker}"

    def request_log(self, broker: int) -> Path:
        return self.node_dir(broker) / "logs" / "kafka-request.log"

    def pid(self, broker: int) -> int:
        return int((self.node_dir(broker) / "kafka.pid").read_text())

    def resume_all(self) -> None:
        """SIGCONT every node (a test that failed mid-pause must not leave one stopped)."""
        for b in (1, 2, 3):
            with contextlib.suppress(OSError, ValueError):  # not running, or a pid file not written yet
                os.kill(self.pid(b), signal.SIGCONT)

    def fresh(self) -> None:
        if (self.run_dir / "kafka").is_dir():
            self.resume_all()
        self.services("clean")
        self.services("up", "--brokers", "3")

    def restart_node_with(self, broker: int, props: str) -> None:
        """Start the (stopped) node again with extra server.properties lines."""
        self.env[f"REPLMON_KAFKA_NODE_PROPS_{broker}"] = props
        self.services("up", "--brokers", "3")

    def shrinks(self, topic: str, since_ms: int) -> list[Shrink]:
        out = []
        for b in (1, 2, 3):
            f = self.node_dir(b) / "logs" / "server.log"
            if f.is_file():
                out += [
                    s
                    for s in parse_shrinks(f.read_text(errors="replace"))
                    if s.topic == topic and s.log_ms >= since_ms
                ]
        return out

    def isr_updates(self, topic: str, since_ms: int) -> dict[int, list[tuple[int, frozenset[int]]]]:
        """partition -> (log time, ISR) of every ISR change its leaders logged since since_ms,
        earliest first (the same ISR may repeat): the ISRs the cluster had, from when (a shrink:
        from when the leader asked for it, a little before it was committed)."""
        out: dict[int, list[tuple[int, frozenset[int]]]] = {}
        for b in (1, 2, 3):
            f = self.node_dir(b) / "logs" / "server.log"
            if not f.is_file():
                continue
            for line in f.read_text(errors="replace").splitlines():
                m = _ISR_UPDATED.match(line) or _REGISTERED.match(line)
                if m and m["topic"] == topic and log_ms(m["when"]) >= since_ms:
                    isr = frozenset(int(x) for x in m["isr"].split(","))
                    out.setdefault(int(m["partition"]), []).append((log_ms(m["when"]), isr))
        return {p: sorted(v, key=lambda x: x[0]) for p, v in out.items()}

    def fences(self, since_ms: int) -> list[tuple[int, int]]:
        """(log time, broker) of every fence the controllers replayed since since_ms (the
        controller's own verdict, e.g. a broker whose session timed out), earliest first."""
        out = set()
        for b in (1, 2, 3):
            for f in (self.node_dir(b) / "logs").glob("*.log"):
                if f.name.startswith("kafka-request"):
                    continue
                for line in f.read_text(errors="replace").splitlines():
                    m = _FENCE.match(line)
                    if m and log_ms(m["when"]) >= since_ms:
                        out.add((log_ms(m["when"]), int(m["broker"])))
        first: dict[int, int] = {}
        for t, b in sorted(out):  # the same record, replayed by each controller: keep the first
            if all(abs(t - u) > 2000 for u, c in first.items() if c == b):
                first[t] = b
        return sorted(first.items())

    def server_log(self, broker: int) -> str:
        return (self.node_dir(broker) / "logs" / "server.log").read_text(errors="replace")


def wait_for(what: str, check, timeout_s: float, interval_s: float = 0.5):
    """Call check() until it returns something truthy; fail after timeout_s."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what} (last: {last!r})")
