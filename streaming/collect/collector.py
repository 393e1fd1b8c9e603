"""The collect loop: tail every broker's request log, poll the Admin API, publish in order.

Every step (default 200 ms): read new lines, turn them into events, add the Admin API's
changes, release what the reorder buffer lets go, add a heartbeat once a second, publish and
wait for the acknowledgements, then write the checkpoint (file positions, fetch sessions,
held events, release watermark). A restart resumes from the checkpoint: nothing before it is
read or published again; only a crash between an acknowledgement and the checkpoint write
republishes that one step's events (see docs/real-cluster.md for what replmon does with them).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from datetime import UTC
from pathlib import Path

from replmon.streaming.collect.broker_log import BrokerLog
from replmon.streaming.collect.reorder import ReorderBuffer
from replmon.streaming.collect.tail import FileTail

log = logging.getLogger(__name__)
CHECKPOINT_VERSION = 1
# What one `replmon collect` publishes (docs/real-cluster.md, "One collector per broker"): `all`
# every request log it is given, the Admin API's events and the heartbeats; `broker` only its
# request logs' events (it asks the Admin API for topic names, and publishes nothing of it);
# `cluster` only the Admin API's events and the heartbeats, which must come from one place.
ROLES = ("all", "broker", "cluster")


def source_name(cluster: str, role: str, brokers) -> str:
    """What a collector publishes, in its checkpoint's and its transactional id's name."""
    if role == "broker":
        return f"{cluster}-broker-{'-'.join(str(b) for b in sorted(brokers))}"
    return cluster if role == "all" else f"{cluster}-cluster"


def rotated_files(path: Path) -> list[Path]:
    """log4j2's DefaultRolloverStrategy keeps path.1 (newest) .. path.N: oldest first."""
    olds = [p for p in path.parent.glob(path.name + ".*") if p.suffix[1:].isdigit()]
    return sorted(olds, key=lambda p: -int(p.suffix[1:]))


class Collector:
    def __init__(
        self,
        cluster: str,
        request_logs: dict[int, str],
        admin_view,
        publisher,
        state_dir: str | Path,
        *,  # the pace: `replmon collect`'s flags state the defaults (collect/cli.py)
        hold_ms: int,
        heartbeat_ms: int,
        metadata_ms: int,
        max_held: int,
        wanted=lambda t: True,
        tz=None,
        clock=time.time,
        role: str,  # --role states the default (collect/cli.py)
    ) -> None:
        assert role in ROLES, role
        self.role = role

        self.cluster, self.admin, self.publisher, self.clock = cluster, admin_view, publisher, clock
        self.state_dir = Path(state_dir)
        self.heartbeat_ms, self.metadata_ms = heartbeat_ms, metadata_ms
        self.tails = {b: FileTail(p) for b, p in request_logs.items()}
        self.logs = {b: BrokerLog(cluster, b, admin_view.name_of, wanted, tz or UTC) for b in request_logs}
        self.buffer = ReorderBuffer(hold_ms, max_held)
        self._last_heartbeat = 0
        self.published = 0
        self._admin_events: queue.Queue = queue.Queue()
        self._admin_stop = threading.Event()
        self._admin_thread: threading.Thread | None = None

    # ---------------------------------------------------------------- checkpoint

    @property
    def checkpoint_path(self) -> Path:
        return self.state_dir / f"checkpoint-{self.source}.json"

    @property
    def source(self) -> str:
        return source_name(self.cluster, self.role, self.tails)

    def save(self) -> None:
        state = {
            "version": CHECKPOINT_VERSION,
            "cluster": self.cluster,
            "watermark_ms": self.buffer.watermark_ms,
            "held": self.buffer.held(),
            "brokers": {
                str(b): {"position": t.position(), "sessions": self.logs[b].sessions.snapshot()}
                for b, t in self.tails.items()
            },
        }
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.checkpoint_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.checkpoint_path)

    def start(self) -> None:
        """Resume from the checkpoint, or warm up: read the retained request logs once, only
        to learn the open fetch sessions, and start publishing from their end."""
        state = None
        if self.checkpoint_path.is_file():
            state = json.loads(self.checkpoint_path.read_text())
            if state.get("version") != CHECKPOINT_VERSION:
                raise SystemExit(
                    f"replmon collect: {self.checkpoint_path} has checkpoint version "
                    f"{state.get('version')}, this replmon reads {CHECKPOINT_VERSION}"
                )
        if state:
            self.buffer.watermark_ms = state["watermark_ms"]
            for e in state["held"]:
                self.buffer.add(e)
            for b, tail in self.tails.items():
                saved = state["brokers"].get(str(b))
                tail.open_at(saved["position"] if saved else None)
                if saved:
                    self.logs[b].sessions.restore(saved["sessions"])
            log.info(
                "resumed from %s: %d held events, watermark %d",
                self.checkpoint_path,
                len(self.buffer),
                self.buffer.watermark_ms,
            )
            return
        for b, tail in self.tails.items():
            warm = 0
            for old in rotated_files(tail.path):
                for line in old.read_text(errors="replace").splitlines():
                    self.logs[b].events(line, emit=False)
                    warm += 1
            tail.open_at(None)
            while lines := tail.read_lines():
                for line in lines:
                    self.logs[b].events(line, emit=False)
                warm += len(lines)
            log.info(
                "broker %s: warmed up on %d request-log lines (%d fetch sessions)",
                b,
                warm,
                len(self.logs[b].sessions.snapshot()),
            )

    # ---------------------------------------------------------------- the loop

    def step(self) -> int:
        """One round; returns how many events were published."""
        now = int(self.clock() * 1000)
        for b, tail in self.tails.items():
            for line in tail.read_lines():
                for ev in self.logs[b].events(line):
                    self.buffer.add(ev)
        while True:
            try:
                self.buffer.add(self._admin_events.get_nowait())
            except queue.Empty:
                break
        out = self.buffer.release(now)
        if self.role != "broker" and now - self._last_heartbeat >= self.heartbeat_ms:
            self._last_heartbeat = now
            out.append({"type": "heartbeat", "ts": self.buffer.watermark_ms, "cluster": self.cluster})
        self.publisher.send(out)
        self.published += len(out)
        self.save()
        return len(out)

    def poll_admin(self) -> None:
        """One Admin API poll; its events go to the loop through a queue, stamped when the
        answers came (admin.py: never before the cluster said it, never behind the watermark)."""
        try:
            answers = self.admin.ask()
            for ev in self.admin.changes(answers, int(self.clock() * 1000)):
                if self.role != "broker":  # a broker collector only learns the topic names
                    self._admin_events.put(ev)
        except Exception as e:  # noqa: BLE001 - the cluster may be partly down; keep tailing
            log.warning("Admin API poll failed (%s); metadata events wait for the next one", e)

    def _admin_loop(self) -> None:
        # Its own thread: a request to a stopped broker blocks until its timeout, and the
        # request logs and heartbeats must not wait for it.
        while not self._admin_stop.is_set():
            started = time.monotonic()
            self.poll_admin()
            self._admin_stop.wait(max(0.0, self.metadata_ms / 1000 - (time.monotonic() - started)))

    def run(self, stop, interval_s: float = 0.2) -> None:
        self.start()
        self._admin_thread = threading.Thread(target=self._admin_loop, name="admin-poll", daemon=True)
        self._admin_thread.start()
        try:
            while not stop.is_set():
                started = time.monotonic()
                self.step()
                stop.wait(max(0.0, interval_s - (time.monotonic() - started)))
        finally:
            self._admin_stop.set()

    def counts(self) -> dict:
        total: dict = {}
        for bl in self.logs.values():
            for k, v in bl.counts.items():
                total[k] = total.get(k, 0) + v
        total["published"] = self.published
        total["rotations"] = sum(t.rotations for t in self.tails.values())
        return total
