"""The collect loop: tail every broker's request log, poll the Admin API, publish in order.

Every step (default 200 ms): read new lines, turn them into events, add the Admin API's
changes, release what the reorder buffer lets go, add a heartbeat once a second, publish and
wait for the acknowledgements, then write the checkpoint (file positions, fetch sessions,
held events, release watermark). A restart resumes from the checkpoint: nothing before it is
read or published again; only a crash between an acknowledgement and the checkpoint write
republishes that one step's events (see docs/real-cluster.md for what replmon does with them).

Kafka 4.x FETCH lines name topics by id only, and only the Admin API maps ids to names. A
line naming an id the last poll did not list waits, and that broker's later lines behind it
(their fetch sessions follow it), until a poll that began after the line was read has
answered; the release watermark waits for it too. So no start loses the lines read before its
first poll. An id still unknown then is a deleted topic, counted as such; an id waits at most
`HOLD_UNKNOWN_S` when no poll answers. Waiting lines are part of the checkpoint.

A backlog (a restart after minutes down, a burst) is read a few MB per broker and step; while
a broker's file has more to read, the watermark stays behind the last line read from it, so
the backlog's events leave in event-time order, not late.
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
from replmon.streaming.collect.compact import RESOLUTION_CAP_MS, Compactor
from replmon.streaming.collect.reorder import ReorderBuffer
from replmon.streaming.collect.requestlog import BadLine, log_time_ms
from replmon.streaming.collect.sessions import SessionForm
from replmon.streaming.collect.tail import MAX_LINE_BYTES, FileTail

log = logging.getLogger(__name__)
CHECKPOINT_VERSION = 1
HOLD_UNKNOWN_S = 120  # longest a line waits for a metadata poll to name its topic ids
CATCH_UP_READS = 8  # extra reads per step in a backlog (tail.MAX_READ each)
COUNTS_EVERY_S = 60  # the counts are logged this often when they changed

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


def stated_resolution_ms(compactor: Compactor | None, session_form: SessionForm | None) -> int:
    """The compaction resolution the heartbeats state (docs/events.md, `heartbeat`): the longest
    compaction leaves between two sent events of a caught-up follower, beyond its fetch
    interval: the requested resolution, else the default's largest (L/8, at most
    RESOLUTION_CAP_MS); a session form's; 0 when every event is sent."""
    stated = 0
    if compactor is not None:
        stated = compactor.requested_ms or RESOLUTION_CAP_MS
    if session_form is not None:
        stated = max(stated, session_form.resolution_ms)
    return stated


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
        compactor: Compactor | None = None,
        session_form: SessionForm | None = None,
        wanted=lambda t: True,
        tz=None,
        clock=time.time,
        role: str,  # --role states the default (collect/cli.py)
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        assert role in ROLES, role
        self.role = role

        self.cluster, self.admin, self.publisher, self.clock = cluster, admin_view, publisher, clock
        self.state_dir = Path(state_dir)
        self.heartbeat_ms, self.metadata_ms = heartbeat_ms, metadata_ms
        self.tz = tz or UTC
        self.tails = {b: FileTail(p, max_line_bytes) for b, p in request_logs.items()}
        self.logs = {b: BrokerLog(cluster, b, admin_view.name_of, wanted, self.tz) for b in request_logs}
        # Lines waiting for a metadata poll to name their topic ids (module docstring), per
        # broker: the lines, the poll they wait for, since when (collector clock, ms).
        self.waiting: dict[int, list[str]] = {b: [] for b in request_logs}
        self._wait_for: dict[int, tuple[int, int]] = {}
        self._polls_begun = self._polls_done = 0
        self._read_to_ms: dict[int, int] = {}  # log time of the last line read, per broker
        self._counts_logged: tuple[float, dict] = (time.monotonic(), {})
        self.buffer = ReorderBuffer(hold_ms, max_held, indexed=compactor is not None)
        self.compactor = compactor  # None: every event goes out (--no-compact)
        # None: a fetch event per partition per read; else session form (--session-form)
        self.session_form = session_form
        # what every heartbeat states, so that the monitor allows for it (state/monitor.py quiet_after_ms)
        self.resolution_ms = stated_resolution_ms(compactor, session_form)
        for bl in self.logs.values():
            bl.session_ids = session_form is not None
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
                str(b): {
                    "position": t.position(),
                    "sessions": self.logs[b].sessions.snapshot(),
                    "bounds": self.logs[b].bounds.snapshot(),
                    "waiting": self.waiting[b],  # read, behind the position, not yet used
                }
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
                    self.logs[b].bounds.restore(saved.get("bounds") or [])
                    self.waiting[b] = list(saved.get("waiting") or [])
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
        for b in self.tails:
            self._read(b, now)
        self._catch_up(now)
        while True:
            try:
                self.buffer.add(self._admin_events.get_nowait())
            except queue.Empty:
                break
        out = self.buffer.release(min([now, *(self._read_up_to_ms(b) for b in self.tails)]))
        if self.compactor is not None:  # decided inside the hold: no added latency (compact.py)
            out = self.compactor.release(out, self.buffer)
        if self.session_form is not None:  # idle followers' reads said once per session
            out = self.session_form.release(out)
        if self.role == "broker":  # the cluster role publishes the Admin API's events
            out = [ev for ev in out if ev["type"] not in ("metadata", "broker")]
        if self.role != "broker" and now - self._last_heartbeat >= self.heartbeat_ms:
            self._last_heartbeat = now
            out.append(
                {
                    "type": "heartbeat",
                    "ts": self.buffer.watermark_ms,
                    "cluster": self.cluster,
                    "compaction_resolution_ms": self.resolution_ms,
                }
            )
        self.publisher.send(out)
        self.published += len(out)
        self.save()
        return len(out)

    def _read(self, b: int, now: int) -> None:
        """The broker's waiting lines, then its new ones, up to a line that must wait."""
        bl, tail = self.logs[b], self.tails[b]
        waiting, self.waiting[b] = self.waiting[b], []
        for lines in self._batches(waiting, tail):
            for i, line in enumerate(lines):
                req = bl.read(line)
                if req is None:
                    continue
                if bl.unknown_ids(req) and self._must_wait(b, now):
                    self.waiting[b] = lines[i:]
                    return
                self._wait_for.pop(b, None)
                self._read_to_ms[b] = req.log_ms
                for ev in bl.events_of(req, line):
                    self.buffer.add(ev)

    def _catch_up(self, now: int) -> None:
        """In a backlog, the broker furthest behind in log time reads on (a controller's file
        grows several times faster than a broker's): the others' events would wait for it in
        the reorder buffer, and each step writes them all into the checkpoint."""
        for _ in range(CATCH_UP_READS):
            behind = [b for b, t in self.tails.items() if t.behind and not self.waiting[b]]
            if not behind:
                return
            self._read(min(behind, key=lambda b: self._read_to_ms.get(b, 0)), now)

    @staticmethod
    def _batches(waiting: list[str], tail: FileTail):
        if waiting:
            yield waiting
        yield tail.read_lines()  # only once the waiting lines are through

    def _must_wait(self, b: int, now: int) -> bool:
        """Whether a line with unknown topic ids waits: until a poll that began after it was
        read has answered, at most HOLD_UNKNOWN_S."""
        poll, since = self._wait_for.setdefault(b, (self._polls_begun + 1, now))
        if self._polls_done >= poll:
            return False
        if now - since >= HOLD_UNKNOWN_S * 1000:
            log.warning(
                "broker %s: no metadata poll answered in %d s; lines with unknown topic ids go on",
                b,
                HOLD_UNKNOWN_S,
            )
            return False
        return True

    def _read_up_to_ms(self, b: int) -> int:
        """How far in log time the broker's lines have been used (the watermark stays behind
        it): up to its first waiting line, or its last line read while its file has more."""
        for line in self.waiting[b]:
            try:
                return log_time_ms(line, self.tz)
            except BadLine:
                continue
        if self.tails[b].behind and b in self._read_to_ms:
            return self._read_to_ms[b]
        return 2**62

    def poll_admin(self) -> None:
        """One Admin API poll; its events go to the loop through a queue, stamped when the
        answers came (admin.py: never before the cluster said it, never behind the watermark)."""
        self._polls_begun += 1
        poll = self._polls_begun
        try:
            answers = self.admin.ask()
            for ev in self.admin.changes(answers, int(self.clock() * 1000)):
                # a broker collector publishes none of these (step), but its compaction reads
                # the ISR and L they say
                self._admin_events.put(ev)
            self._polls_done = poll
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
                self.log_counts()
                stop.wait(max(0.0, interval_s - (time.monotonic() - started)))
        finally:
            self._admin_stop.set()

    def counts(self) -> dict:
        """Lines read, events published, and every skip by its reason (docs/real-cluster.md)."""
        total: dict = {}
        for counter in [*(bl.counts for bl in self.logs.values()), *(t.counts for t in self.tails.values())]:
            for k, v in counter.items():
                total[k] = total.get(k, 0) + v
        total["published"] = self.published
        if self.compactor is not None:
            for kind, n in self.compactor.dropped.items():
                total[f"compacted {kind} events"] = n
        if self.session_form is not None:
            total["fetch events said by sessions"] = self.session_form.dropped
        total["rotations"] = sum(t.rotations for t in self.tails.values())
        total["lines waiting for topic names"] = sum(len(w) for w in self.waiting.values())
        return total

    def log_counts(self, every_s: float = COUNTS_EVERY_S) -> None:
        """The counts, every `every_s` when a skip count changed (the lines and events
        published move all the time and say nothing new)."""
        at, last = self._counts_logged
        if time.monotonic() - at < every_s:
            return
        counts = self.counts()
        skips = {k: v for k, v in counts.items() if k.startswith(("skipped", "bad", "unusable", "not a"))}
        if skips != last:
            log.info("collect counts: %s", counts)
        self._counts_logged = (time.monotonic(), skips)
