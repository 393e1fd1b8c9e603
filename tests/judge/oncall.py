"""The on-call channels the judge counts: replmon's Redis on-call stream, and a real Prometheus
Alertmanager (Debian's package, deploy/local/alertmanager.sh) whose every notification goes to a
webhook served here, so a notification is counted where a person would get it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.judge.cluster import ROOT, RUN_DIR

SCRIPT = ROOT / "deploy" / "local" / "alertmanager.sh"
# Grouped as deploy/alertmanager/alertmanager.yml groups (by cluster and root cause), but with a
# short group_wait (replmon already waits in event time: alerts.group_wait_ms) and no follow-up
# notifications within a run, so each notification the webhook gets is one a person would get.
CONFIG = """
route:
  receiver: hook
  group_by: [cluster, root_cause_id]
  group_wait: 1s
  group_interval: 1h
  repeat_interval: 24h
receivers:
  - name: hook
    webhook_configs:
      - url: http://127.0.0.1:{port}/
        send_resolved: false
"""


class Webhook:
    """An HTTP server on loopback that records every notification Alertmanager sends it."""

    def __init__(self) -> None:
        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append((int(time.time() * 1000), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class JudgeAlertmanager:
    """Its own instance (own run dir and port, next to the judge's brokers)."""

    def __init__(self, port_offset: int, run_dir: Path = RUN_DIR) -> None:
        self.hook = Webhook()
        run = run_dir / "alertmanager"
        run.mkdir(parents=True, exist_ok=True)
        config = run / "alertmanager.yml"
        config.write_text(CONFIG.format(port=self.hook.port))
        self.env = dict(
            os.environ,
            REPLMON_PYTHON=sys.executable,
            REPLMON_PORT_OFFSET=str(port_offset),
            REPLMON_ALERTMANAGER_RUN=str(run),
            REPLMON_ALERTMANAGER_CONFIG=str(config),
        )
        self._script("down")  # one left by an earlier run has another webhook port
        out = self._script("up")
        self.url = next(x for x in out.splitlines() if x.startswith("REPLMON_ALERTMANAGER__URL=")).split(
            "=", 1
        )[1]

    def _script(self, cmd: str) -> str:
        proc = subprocess.run(
            ["bash", str(SCRIPT), cmd],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"alertmanager.sh {cmd} failed:\n{proc.stderr}{proc.stdout}")
        return proc.stdout

    def notifications(self, since_ms: int, cluster: str) -> list[dict]:
        """The firing alerts of every notification received since since_ms (wall clock), one
        entry per notification: its alerts' labels."""
        out = []
        for at, payload in list(self.hook.received):
            if at < since_ms or payload.get("status") != "firing":
                continue
            alerts = [a["labels"] for a in payload["alerts"] if a["labels"].get("cluster") == cluster]
            if alerts:
                out.append({"at_ms": at, "alerts": alerts})
        return out

    def sync(self, timeout_s: float = 60) -> None:
        """Post a marker alert of its own group and wait for its notification: Alertmanager
        takes posts in order and waits the same group_wait for every new group, so every group
        posted before it has been notified by then (the positive marker before counting)."""
        marker = f"judge-marker-{uuid.uuid4().hex[:8]}"
        body = json.dumps([{"labels": {"alertname": "JudgeMarker", "cluster": marker}}]).encode()
        req = urllib.request.Request(
            f"{self.url}/api/v2/alerts",
            data=body,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10):
            pass
        deadline = time.monotonic() + timeout_s
        while not self.notifications(0, marker):
            if time.monotonic() > deadline:
                raise AssertionError(f"Alertmanager sent no notification of its marker in {timeout_s:.0f} s")
            time.sleep(0.2)

    def close(self) -> None:
        try:
            self._script("down")
        finally:
            self.hook.close()


def redis_notified(pipeline, since_ms: int) -> list[dict]:
    """The notified firing transitions on replmon's on-call stream (Redis) that started at or
    after since_ms (event time), of the judged cluster."""
    out = []
    for _, fields in pipeline.redis.xrange(f"{pipeline.prefix}:alerts:notify"):
        rec = dict(fields)
        if rec.get("status") != "firing" or rec.get("cluster") != "judge":
            continue
        if int(rec.get("started_ms") or 0) >= since_ms:
            out.append(rec)
    return out


def episode(pipeline, alert_id: str) -> list[dict]:
    """Every transition of one alert (firing, updates, resolved), in order."""
    return [a for a in pipeline.alerts() if a["alert_id"] == alert_id]
