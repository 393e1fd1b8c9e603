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

A leader that stops (SIGSTOP, a long GC pause, a hung host) holds its followers' fetches in
purgatory; it logs them when it runs again, with read times from before it stopped, behind
everything released meanwhile. With `silent_hold_ms` > 0 (off by default), while a broker that
was answering followers' fetches is silent the watermark stays at its last such line, at most
that long (silent_waits), so those lines come out in event-time order. Not for a broker known to
be done: its port refuses connections (a dead process logs nothing more), it is shutting down,
or the Admin API shows it running and leading no replicated partition (its leaderships moved).
The cost is the whole cluster's: nothing is published while it waits, so an outage shorter
than the wait reaches replmon after it ended (docs/real-cluster.md). Events that come behind
the watermark are counted.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import threading
import time
from datetime import UTC
from pathlib import Path

from replmon.state.monitor import LONG_LAG_RESOLUTION_MS
from replmon.streaming.collect.broker_log import BrokerLog
from replmon.streaming.collect.compact import Compactor
from replmon.streaming.collect.reorder import ReorderBuffer
from replmon.streaming.collect.requestlog import BadLine, follower_of, log_time_ms
from replmon.streaming.collect.sessions import SessionForm
from replmon.streaming.collect.tail import MAX_LINE_BYTES, FileTail

log = logging.getLogger(__name__)
CHECKPOINT_VERSION = 1
HOLD_UNKNOWN_S = 120  # longest a line waits for a metadata poll to name its topic ids
CATCH_UP_READS = 8  # extra reads per step in a backlog (tail.MAX_READ each)
COUNTS_EVERY_S = 60  # the counts are logged this often when they changed
SILENT_HOLD_MS = 0  # `replmon collect --silent-hold`'s default (collect.silent_hold_ms): off
SILENT_AFTER_MS = 1000  # a leader's follower fetches are this far apart at most (maxWaitMs 500)
PROBE_EVERY_MS = 2000  # a silent broker's port is tried this often (each try is one connection)
PROBE_TIMEOUT_S = 0.2
LATE = "published behind the release watermark (late for replmon)"

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
    interval: the requested resolution, else the default's largest (LONG_LAG_RESOLUTION_MS, at
    L = 30 s and above; `stated_scheme` says it follows each partition's L); a session form's; 0
    when every event is sent."""
    stated = 0
    if compactor is not None:
        stated = compactor.requested_ms or LONG_LAG_RESOLUTION_MS
    if session_form is not None:
        stated = max(stated, session_form.resolution_ms)
    return stated


def stated_scheme(compactor: Compactor | None) -> str:
    """How the heartbeats say the resolution applies: "lag", the default by each partition's L
    (state/monitor.py resolution_ms), when compaction is on at no requested resolution; else
    "fixed"."""
    return "lag" if compactor is not None and not compactor.requested_ms else "fixed"


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
        silent_hold_ms: int = SILENT_HOLD_MS,
        probe=None,
    ) -> None:
        """`probe(broker)`: whether a silent broker's process may be there, stopped (default:
        probe_port, a TCP connection to the address the Admin API gave)."""
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
        self._init_silent_hold(silent_hold_ms, probe)
        self._counts_logged: tuple[float, dict] = (time.monotonic(), {})
        self.buffer = ReorderBuffer(hold_ms, max_held, indexed=compactor is not None)
        self.compactor = compactor  # None: every event goes out (--no-compact)
        # None: a fetch event per partition per read; else session form (--session-form)
        self.session_form = session_form
        # what every heartbeat states, so that the monitor allows for it (state/monitor.py quiet_after_ms)
        self.resolution_ms = stated_resolution_ms(compactor, session_form)
        self.scheme = stated_scheme(compactor)
        for bl in self.logs.values():
            bl.session_ids = session_form is not None
        self._last_heartbeat = 0
        self.published = 0
        self._admin_events: queue.Queue = queue.Queue()
        self._admin_stop = threading.Event()
        self._admin_thread: threading.Thread | None = None

    def _init_silent_hold(self, silent_hold_ms: int, probe) -> None:
        """A stopped leader's parked fetches (module docstring): per broker, the log time of its
        last follower FETCH line; what the Admin API says (broker states, the leader of each
        replicated partition, the brokers' addresses); the last port probe (when, answer)."""
        self.silent_hold_ms = silent_hold_ms
        self._answered_ms: dict[int, int] = {}
        self._broker_state: dict[int, str] = {}
        self._leader_of: dict[tuple, int] = {}
        self._addresses: dict[int, tuple[str, int]] = {}
        self._probed: dict[int, tuple[int, bool]] = {}
        self._probe = probe or self.probe_port
        self._waiting_for: set[int] = set()  # the silent brokers the watermark waits for now
        self._late = 0

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
                    "answered_ms": self._answered_ms.get(b),
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
                    if saved.get("answered_ms") is not None:
                        self._answered_ms[b] = saved["answered_ms"]
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
                ev = self._admin_events.get_nowait()
            except queue.Empty:
                break
            self._admin_said(ev)
            self.buffer.add(ev)
        out = self.buffer.release(
            min([now, *(self._read_up_to_ms(b) for b in self.tails), *self.silent_waits(now)])
        )
        if self.compactor is not None:  # decided inside the hold: no added latency (compact.py)
            out = self.compactor.release(out, self.buffer)
        if self.session_form is not None:  # idle followers' reads said once per session
            out = self.session_form.release(out, self.buffer.watermark_ms)
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
                    "compaction_scheme": self.scheme,
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
                if follower_of(req) is not None:
                    self._answered_ms[b] = max(req.log_ms, self._answered_ms.get(b, 0))
                for ev in bl.events_of(req, line):
                    if ev["ts"] < self.buffer.watermark_ms:
                        self._late += 1
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

    def _admin_said(self, ev: dict) -> None:
        """What silent_waits needs of an Admin API event: broker states, replicated leaders."""
        if ev["type"] == "broker":
            self._broker_state[ev["broker"]] = ev["state"]
        elif ev["type"] == "metadata":
            key = (ev["topic"], ev["partition"])
            if len(ev.get("replicas") or ()) > 1 and ev.get("leader", -1) >= 0:
                self._leader_of[key] = ev["leader"]
            else:
                self._leader_of.pop(key, None)

    def silent_waits(self, now: int) -> list[int]:
        """The log times the watermark waits at for silent brokers that may still log older
        lines (module docstring): a broker whose last follower FETCH line is more than the hold
        and at most silent_hold_ms old, unless it is known to be done."""
        out, waiting = [], set()
        for b, answered in self._answered_ms.items():
            silent = now - answered
            if silent <= min(SILENT_AFTER_MS, self.buffer.hold_ms) or silent > self.silent_hold_ms:
                continue
            state = self._broker_state.get(b, "running")
            if state == "shutting_down":
                continue
            if state == "running" and b not in self._leader_of.values():
                continue  # its leaderships moved: its followers fetch elsewhere
            if self._refused(b, now):
                continue
            out.append(answered)
            waiting.add(b)
        for b in waiting - self._waiting_for:
            log.info(
                "broker %s: no follower fetch logged for %d ms while its port accepts connections; "
                "the release waits for its stopped requests (at most %d ms)",
                b,
                now - self._answered_ms[b],
                self.silent_hold_ms,
            )
        for b in self._waiting_for - waiting:
            if now - self._answered_ms[b] > self.silent_hold_ms:
                log.warning(
                    "broker %s: silent for more than --silent-hold (%d ms); the release goes on "
                    "without it (lines it logs later with older read times are late for replmon)",
                    b,
                    self.silent_hold_ms,
                )
        self._waiting_for = waiting
        return out

    def _refused(self, b: int, now: int) -> bool:
        """Whether the broker's last probe (one every PROBE_EVERY_MS) says it is gone."""
        at, stopped = self._probed.get(b, (None, False))
        if at is None or now - at >= PROBE_EVERY_MS:
            stopped = self._probe(b)
            self._probed[b] = (now, stopped)
        return not stopped

    def probe_port(self, b: int) -> bool:
        """Whether the broker's process may be there, stopped: its listener accepted a
        connection (the kernel accepts for a stopped process), or did not answer in time (a
        stopped process's full accept queue drops the attempt). False when it refused (no
        process), its host is unreachable, or the Admin API gave no address yet."""
        address = self._addresses.get(b)
        if address is None:
            return False
        try:
            with socket.create_connection(address, timeout=PROBE_TIMEOUT_S):
                return True
        except TimeoutError:
            return True
        except OSError:
            return False

    def poll_admin(self) -> None:
        """One Admin API poll; its events go to the loop through a queue, stamped when the
        answers came (admin.py: never before the cluster said it, never behind the watermark)."""
        self._polls_begun += 1
        poll = self._polls_begun
        try:
            answers = self.admin.ask()
            for node in (answers[1].get("brokers") or []) if isinstance(answers, tuple) else []:
                if node.get("host") and node.get("port"):
                    self._addresses[int(node["broker_id"])] = (node["host"], int(node["port"]))
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
        total[LATE] = self._late
        return total

    def log_counts(self, every_s: float = COUNTS_EVERY_S) -> None:
        """The counts, every `every_s` when a skip or late count changed (the lines and events
        published move all the time and say nothing new)."""
        at, last = self._counts_logged
        if time.monotonic() - at < every_s:
            return
        counts = self.counts()
        skips = {
            k: v
            for k, v in counts.items()
            if k.startswith(("skipped", "bad", "unusable", "not a", "published behind"))
        }
        if skips != last:
            log.info("collect counts: %s", counts)
        self._counts_logged = (time.monotonic(), skips)
