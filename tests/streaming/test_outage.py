"""`replmon run` outlives a Redis outage: the real redis-server is stopped in the middle of a run
and started again; the supervisor restarts the query from its checkpoint, the failed batches
replay, and every alert transition ends up in Redis exactly once, with the query still running.

A subprocess, as a deployment runs it (its own JVM), over a simulated cluster split into files
that are read one per micro-batch, so that batches keep coming while Redis is away.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import redis

from replmon.sinks.keys import Keys
from replmon.streaming.cli import main as replmon
from tests.redis_server import REDIS_SERVER, free_port
from tests.streaming.helpers import exactly_once, read_outputs, transition_key

pytestmark = pytest.mark.spark

OUTAGE_S = 20  # longer than stalled_after_s below: MonitorLagging must fire, then resolve
FILES = 5


class PersistentRedis:
    """A redis-server that keeps its data in an append-only file, so that it can be stopped and
    started again on the same port with what it had (as a production Redis would)."""

    def __init__(self, folder: Path) -> None:
        self.port, self.folder, self.proc = free_port(), folder, None
        folder.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self._ping, 15, "redis-server to answer PING")

    def _ping(self) -> bool:
        try:
            return self.client().ping()
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: redis flushes the AOF and exits
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def wait_later_trigger(client: redis.Redis, keys: Keys, after_ms: int, proc: subprocess.Popen) -> dict:
    """Wait until the query's heartbeat reports a trigger that started after `after_ms` (wall
    clock): the positive marker that the query went on past that moment, so that what it did
    not write by then it also did not write on the triggers after. Spark reports an idle
    trigger every 10 s (spark.sql.streaming.noDataProgressEventInterval)."""

    def later():
        if proc.poll() is not None:
            return {"exited": str(proc.returncode)}
        hb = {k.decode(): v.decode() for k, v in client.hgetall(keys.heartbeat("replmon")).items()}
        return hb if int(hb.get("last_batch_ms") or 0) > after_ms else None

    return wait_for(later, 60, "a trigger after the last write to be reported")


def split_into_files(events_file: Path, folder: Path, n: int) -> None:
    """The event lines in n files, in event-time order; increasing mtimes, since the file source
    takes the oldest first."""
    lines = events_file.read_text().splitlines()
    folder.mkdir(parents=True)
    size = -(-len(lines) // n)
    for i in range(n):
        f = folder / f"part-{i:05d}.jsonl"
        f.write_text("\n".join(lines[i * size : (i + 1) * size]) + "\n")
        os.utime(f, (1_700_000_000 + i, 1_700_000_000 + i))


def transitions_in_redis(client: redis.Redis, keys: Keys) -> Counter:
    return Counter(
        transition_key(a)
        for a in (
            {k.decode(): v.decode() for k, v in f.items()} for _, f in client.xrange(keys.alerts_stream())
        )
        if exactly_once(a)
    )


def test_a_redis_outage_loses_and_duplicates_no_alert_and_the_query_keeps_running(tmp_path):
    assert replmon(["simulate", "--scenario", "paused_and_slow", "--output", str(tmp_path / "sim")]) == 0
    split_into_files(tmp_path / "sim" / "events" / "part-00000.jsonl", tmp_path / "events", FILES)
    server = PersistentRedis(tmp_path / "redis")
    server.start()
    keys, client = Keys("replmon"), server.client()
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLMON_")}
    env.update(
        REPLMON_STREAM__BUCKETS="4",
        REPLMON_SPARK__MAX_FILES_PER_TRIGGER="1",
        REPLMON_SPARK__TRIGGER_INTERVAL="2 seconds",
        REPLMON_REDIS__RETRIES="1",
        REPLMON_SUPERVISE__HEARTBEAT_INTERVAL_S="1",
        REPLMON_SUPERVISE__RESTART_BACKOFF_INITIAL_S="1",
        REPLMON_SUPERVISE__RESTART_BACKOFF_MAX_S="4",
        REPLMON_SUPERVISE__STALLED_AFTER_S="15",
        REPLMON_SUPERVISE__MAX_EVENT_LAG_S="0",
    )  # a replay of old events: no lag check
    log_path = tmp_path / "replmon.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "replmon.streaming.cli",
                "run",
                "--input",
                str(tmp_path / "events"),
                "--output",
                str(out),
                "--redis-url",
                server.url,
                "--no-timeline",
                "--verbose",
            ],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        # Redis goes away once the first batches are in it, while files are still to be read.
        wait_for(
            lambda: client.scard(keys.clusters()) > 0 or proc.poll() is not None,
            240,
            "the first batch in Redis",
        )
        assert proc.poll() is None, log_path.read_text()[-3000:]
        server.stop()
        outage_started = time.monotonic()
        wait_for(
            lambda: "from its checkpoint in" in log_path.read_text(),
            120,
            "the query to fail and a restart to be scheduled",
        )
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - outage_started)))
        server.start()
        client = server.client()

        def caught_up():
            hb = {k.decode(): v.decode() for k, v in client.hgetall(keys.heartbeat("replmon")).items()}
            text = log_path.read_text()
            # Files are read one per trigger: a trigger that reads nothing comes after the last.
            return (
                hb.get("running") == "1"
                and int(hb.get("restarts") or 0) >= 1
                and hb.get("last_input_rows") == "0"
                and "MonitorLagging resolved" in text
                and hb
            )

        heartbeat = wait_for(
            caught_up, 240, "all files read after the outage and the monitor keeping up again"
        )
        (tmp_path.parent / "outage-last.log").write_text(log_path.read_text())  # for a reader
        # A later trigger: nothing may be written twice by the triggers after the last file either.
        wait_later_trigger(client, keys, int(time.time() * 1000), proc)
        assert proc.poll() is None, "the process outlived the outage"
        log_text = log_path.read_text()
        restarts = int(heartbeat["restarts"])
        assert restarts >= 1, log_text[-5000:]
        assert log_text.count("from its checkpoint in") == restarts

        in_redis = transitions_in_redis(client, keys)
        files = read_outputs(out)["alerts"]
        query_alerts = Counter(
            transition_key(a) for a in files if a["name"] != "MonitorLagging" and exactly_once(a)
        )
        lagging = Counter(
            (a["alert_id"], a["status"], a["name"]) for a in files if a["name"] == "MonitorLagging"
        )
        assert query_alerts and max(query_alerts.values()) == 1
        assert any(name == "ReplicaOutOfSync" for _, _, name in query_alerts)
        # Every transition the query made, once, and nothing else, plus MonitorLagging's pair.
        assert in_redis == query_alerts + lagging
        # It fired during the outage (maybe also while a loaded machine started the query) and
        # resolved each time: every episode a firing and a resolve.
        assert lagging and max(lagging.values()) == 1
        assert sorted(aid for aid, s, _ in lagging if s == "firing") == sorted(
            aid for aid, s, _ in lagging if s == "resolved"
        )
        firing = {k.decode() for k in client.hkeys(keys.alerts_firing())}
        assert firing == {aid for aid, s, _ in query_alerts if s == "firing"} - {
            aid for aid, s, _ in query_alerts if s == "resolved"
        }
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait(timeout=30)
        server.stop()
    assert rc == 0, log_path.read_text()[-3000:]
