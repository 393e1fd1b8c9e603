"""KIP-227 fetch sessions, as the leader keeps them, rebuilt from request-log lines.

An incremental fetch names only the partitions whose fetch state changed, and its response
only the partitions with records or a changed high watermark, log start or error; the leader
still reads every partition of the session on every fetch (FetchSession.scala: the cached
fetch offset is used for the ones not named). So each follower fetch is one observation per
partition in the session (docs/kafka-rules.md §11), and the cache of the session must be kept here.

Epochs: sessionEpoch 0 opens a session with a full request (the response says its id),
-1 is a full fetch without a session, > 0 is incremental on sessionId. A top-level error
answers nothing and ends the session (the fetcher starts over with a full request).

**Session form** (`SessionForm`, docs/events.md `session`): what `replmon collect` publishes by
default. A follower's fetch of a partition whose picture did not change (the follower still at
the LEO, nothing appended, no election, no error, the same epochs, the partition still in its
session and in the ISR) is dropped: its session's read says it. Each session's reads are
published as `session` events at most once per resolution, each with the exact time of the
newest read: a read is held until its flush time, on a grid of the resolution from the first
read held (so a session's last read before it falls silent is always sent, at most one
resolution after its time); the first read after a silence (reads further apart than two
resolutions and a parked fetch) is sent at once, with its time. Any other fetch is sent as it
is, naming its session (the id the request log shows); before it, and before an append or a
metadata event of the partition, the partition's last read that only its session said is sent
as a fetch of its own (restated), so that the engine's previous-fetch credit (lastFetchTimeMs)
stays exact, unless a session event published in an earlier step said it (it is on the metrics
topic before the change). A held read whose followers were all restated before its flush time
says nothing more: it is dropped (between bursts, a follower's one idle read is restated before
the next append, and a `session` event for it would only repeat it).
tests/state/test_session_form.py builds this form from simulated and captured per-partition
events for the differential test. Pure: events in, events out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from replmon.state.events import TIE_RANK, event
from replmon.streaming.collect.requestlog import Request

log = logging.getLogger(__name__)
INITIAL_EPOCH, FINAL_EPOCH = 0, -1


@dataclass(frozen=True)
class PartitionFetch:
    """One partition of one follower fetch, as the leader read it."""

    topic_id: str | None
    topic: str | None  # older FETCH versions name the topic instead
    partition: int
    fetch_offset: int
    current_leader_epoch: int | None
    log_start_offset: int | None  # the follower's
    partition_max_bytes: int
    error_code: int
    high_watermark: int | None
    records_bytes: int
    diverging_epoch: int | None
    in_response: bool  # False: left out of an incremental response (no change, no records)


@dataclass
class _Cached:
    fetch_offset: int
    current_leader_epoch: int | None
    log_start_offset: int | None
    partition_max_bytes: int


@dataclass
class _Session:
    session_id: int
    partitions: dict = field(default_factory=dict)  # (topic key, partition) -> _Cached


def _topic_key(t: dict[str, Any]) -> tuple[str | None, str | None]:
    return t.get("topicId"), t.get("topic") if t.get("topic") is not None else t.get("name")


def _requested(request: dict[str, Any]) -> dict:
    out = {}
    for t in request.get("topics") or []:
        tid, name = _topic_key(t)
        for p in t.get("partitions") or []:
            out[((tid, name), int(p["partition"]))] = _Cached(
                fetch_offset=int(p["fetchOffset"]),
                current_leader_epoch=p.get("currentLeaderEpoch"),
                log_start_offset=p.get("logStartOffset"),
                partition_max_bytes=int(p.get("partitionMaxBytes", 0)),
            )
    return out


def _forgotten(request: dict[str, Any]) -> set:
    out = set()
    for t in request.get("forgottenTopicsData") or []:
        tid, name = _topic_key(t)
        for p in t.get("partitions") or []:
            out.add(((tid, name), int(p)))
    return out


def _responded(response: dict[str, Any]) -> dict:
    out = {}
    for t in response.get("responses") or []:
        tid, name = _topic_key(t)
        for p in t.get("partitions") or t.get("partitionResponses") or []:
            index = p.get("partitionIndex", p.get("partition"))
            out[((tid, name), int(index))] = p
    return out


def _diverging(p: dict[str, Any]) -> int | None:
    d = p.get("divergingEpoch")
    if isinstance(d, dict) and int(d.get("epoch", -1)) >= 0:
        return int(d["epoch"])
    return None


class FetchSessions:
    """The sessions of every (follower, fetcher client) on one leader."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[int, str], _Session] = {}
        self.unknown_sessions = 0  # incremental fetches on a session opened before we started
        self.session_id = 0  # the session of the last fetch observed (0: none, a full fetch)

    def observe(self, req: Request, follower: int, client: str) -> list[PartitionFetch]:
        request, response = req.body.get("request") or {}, req.body.get("response") or {}
        key = (follower, client)
        session_id = int(request.get("sessionId", 0))
        epoch = int(request.get("sessionEpoch", FINAL_EPOCH))
        named = _requested(request)
        self.session_id = 0
        if int(response.get("errorCode", 0)) != 0:
            self._sessions.pop(key, None)
            return []
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            partitions = named
            new_id = int(response.get("sessionId", 0))
            if epoch == INITIAL_EPOCH and new_id != 0:
                self._sessions[key] = _Session(new_id, dict(named))
                self.session_id = new_id
            else:
                self._sessions.pop(key, None)
        else:
            self.session_id = session_id
            session = self._sessions.get(key)
            if session is None or session.session_id != session_id:
                # Opened before the collector started: only what this request names is known.
                self.unknown_sessions += 1
                session = self._sessions[key] = _Session(session_id)
            for k in _forgotten(request):
                session.partitions.pop(k, None)
            session.partitions.update(named)
            partitions = session.partitions
        answered = _responded(response)
        out = []
        for (tkey, partition), c in partitions.items():
            r = answered.get((tkey, partition))
            out.append(
                PartitionFetch(
                    topic_id=tkey[0],
                    topic=tkey[1],
                    partition=partition,
                    fetch_offset=c.fetch_offset,
                    current_leader_epoch=c.current_leader_epoch,
                    log_start_offset=c.log_start_offset,
                    partition_max_bytes=c.partition_max_bytes,
                    error_code=int(r.get("errorCode", 0)) if r else 0,
                    high_watermark=r.get("highWatermark") if r else None,
                    records_bytes=int(r.get("recordsSizeInBytes", 0) or 0) if r else 0,
                    diverging_epoch=_diverging(r) if r else None,
                    in_response=r is not None,
                )
            )
        return out

    def snapshot(self) -> dict:
        """The session caches, for the collector's checkpoint (plain JSON)."""
        return {
            f"{f}|{c}": {
                "session_id": s.session_id,
                "partitions": [
                    [
                        t[0],
                        t[1],
                        p,
                        v.fetch_offset,
                        v.current_leader_epoch,
                        v.log_start_offset,
                        v.partition_max_bytes,
                    ]
                    for (t, p), v in s.partitions.items()
                ],
            }
            for (f, c), s in self._sessions.items()
        }

    def restore(self, snap: dict[str, Any]) -> None:
        self._sessions.clear()
        for k, s in snap.items():
            f, c = k.split("|", 1)
            self._sessions[(int(f), c)] = _Session(
                s["session_id"],
                {
                    ((tid, name), p): _Cached(off, cle, lso, pmb)
                    for tid, name, p, off, cle, lso, pmb in s["partitions"]
                },
            )


# ---- session form ------------------------------------------------------------------------

# The fields of a fetch that the engine reads: a fetch that repeats them is no news.
_SAME = ("fetch_offset", "leader_leo", "leader_epoch", "broker_epoch", "log_start_offset")

SessionKey = Callable[[str, int, int, str, int], tuple]


def per_partition(cluster: str, replica: int, leader: int, topic: str, partition: int) -> tuple:
    """One session per follower and partition: the simulator fetches each partition on a
    schedule of its own, so only then are a session's reads exactly its partitions' reads."""
    return (cluster, replica, leader, topic, partition)


def per_leader(cluster: str, replica: int, leader: int, topic: str, partition: int) -> tuple:
    """One session per follower and leader (one fetcher thread), as Kafka runs them by default."""
    return (cluster, replica, leader)


@dataclass
class _Follower:
    last: dict | None = None  # the follower's last fetch (sent or only said by its session)
    session: int = 0  # the session its last sent fetch named (0: none)
    carried: bool = False  # whether the engine takes its session's reads for it
    changed: bool = True  # the partition changed since that fetch
    unsent: int | None = None  # the time of its last read that only its session said
    key: tuple | None = None  # the session key of that read
    waits_on: tuple | None = None  # (session key, generation) of the held read that says it


@dataclass
class _Partition:
    leader: int = -1
    isr: tuple = ()
    leo: int = 0
    followers: dict = field(default_factory=dict)


def session_form(
    events: Iterable[dict[str, Any]], resolution_ms: int, session_key: SessionKey = per_partition
) -> list[dict[str, Any]]:
    """The events in session form, in event-time order (ties in the contract's order)."""
    former = SessionForm(resolution_ms, session_key)
    out = former.release(sorted(events, key=_order)) + former.finish()
    out.sort(key=_order)
    return out


def _order(e: dict[str, Any]) -> tuple[int, int]:
    return e["ts"], TIE_RANK[e["type"]]


@dataclass
class _Reads:
    """A session's reads not yet published: the newest one held, and the next flush time."""

    held: int | None = None
    next_flush: int | None = None
    sent: int = -1  # the newest read published
    sent_step: int = -1  # the release step that published it
    waiting: int = 0  # followers whose last read only the held read says (not restated since)
    generation: int = 0  # one per held read: a follower waits on one held read at a time
    last: int = -1  # the newest read seen, published or not


class SessionForm:
    """Turns per-partition events, released in event-time order, into session form as they go
    (`release`), and publishes each session's held read at its flush time (`finish` at the
    end). A fetch that carries its own `session_id` (the collector read it from the request
    log) is in that session of its follower and leader; `session_key` names the session of one
    that does not (None: it is in none)."""

    def __init__(self, resolution_ms: int, session_key: SessionKey | None = per_partition) -> None:
        self.resolution_ms = resolution_ms
        # a session whose reads are further apart than this was silent: the longest a live
        # one's are (a parked fetch, replica.fetch.wait.max.ms 500 ms) and two resolutions
        self.silence_ms = 2 * resolution_ms + 500
        self.session_key = session_key
        self._partitions: dict[tuple, _Partition] = {}
        self._ids: dict[tuple, int] = {}
        self._reads: dict[tuple, _Reads] = {}  # (cluster, replica, leader, session id) -> reads
        self.dropped = 0  # fetches a session read said
        self.restated = 0  # reads only a session said, sent as fetches before a change
        self.unneeded = 0  # held session reads dropped: every follower they said was restated
        self.said = 0  # reads not restated: a session event of an earlier step had said them
        self._step = 0  # release calls so far

    def release(self, released: list[dict[str, Any]], now_ms: int | None = None) -> list[dict[str, Any]]:
        """The session form of `released` (in event-time order), and the held reads whose flush
        time has come: up to `now_ms` (the collector's release watermark: no read at or before
        it is still to come), else up to the last released event's time."""
        self._step += 1
        out: list[dict] = []
        for ev in released:
            self._one(ev, out)
        now = max(released[-1]["ts"] if released else -1, now_ms if now_ms is not None else -1)
        if now >= 0:
            self._flush(now, out)
        out.sort(key=_order)
        return out

    def finish(self) -> list[dict[str, Any]]:
        """Every held read (the end of the input)."""
        out: list[dict] = []
        for key, reads in self._reads.items():
            if reads.held is not None:
                self._publish(key, reads, out)
            reads.next_flush = None
        return out

    def _one(self, ev: dict, out: list) -> None:
        kind = ev["type"]
        if kind not in ("fetch", "append", "metadata"):
            out.append(ev)
            return
        key = (ev["cluster"], ev["topic"], ev["partition"])
        part = self._partitions.setdefault(key, _Partition())
        if kind != "fetch":
            for f in part.followers.values():
                self._restate(f, ev["ts"], out)
                f.changed = True
            if kind == "append":
                part.leo = max(part.leo, ev["leader_leo"])
            else:
                part.leader, part.isr = ev["leader"], tuple(ev["isr"])
                part.leo = max(part.leo, ev.get("leader_leo") or 0)
            out.append(ev)
            return
        r = ev["replica"]
        f = part.followers.setdefault(r, _Follower())
        part.leo = max(part.leo, ev["leader_leo"])
        sid = 0
        failed = ev.get("error") is not None or ev.get("diverging_epoch") is not None
        if part.leader >= 0 and part.leader != r and not failed:
            sid = ev.get("session_id") or 0
            if not sid and self.session_key is not None:
                sid = self._ids.setdefault(
                    self.session_key(ev["cluster"], r, part.leader, ev["topic"], ev["partition"]),
                    len(self._ids) + 1,
                )
        same = (
            f.carried
            and not f.changed
            and not failed
            and sid == f.session
            and f.last is not None
            and all(ev.get(n) == f.last.get(n) for n in _SAME)
        )
        if same:  # a read only the session says (a session that carries no one says nothing)
            f.key = (ev["cluster"], r, part.leader, sid)
            self._read(f, f.key, ev["ts"], out)
            f.unsent = ev["ts"]
            f.last = ev
            self.dropped += 1
            return
        self._restate(f, ev["ts"], out)
        out.append({**ev, "session_id": sid} if sid else ev)
        if sid:  # the session read: not silent (`_read`)
            reads = self._reads.get((ev["cluster"], r, part.leader, sid))
            if reads is not None and ev["ts"] > reads.last:
                reads.last = ev["ts"]
        f.last, f.session, f.changed = ev, sid, False
        f.carried = bool(sid) and ev["fetch_offset"] == ev["leader_leo"] >= part.leo and r in part.isr

    def _read(self, f: _Follower, key: tuple, ts: int, out: list) -> None:
        """The follower's read, by its session at `ts`: held until the session's next flush
        time (each session publishes at most once per resolution: on a grid from the first read
        held), unless a published read already says it."""
        reads = self._reads.setdefault(key, _Reads())
        if ts <= reads.sent:  # one request reads all its partitions at once
            return
        self._flush_one(key, reads, ts - 1, out)
        silent = 0 <= reads.last < ts - self.silence_ms
        reads.last = max(reads.last, ts)
        if silent and reads.held is None:
            # heard from again after a silence: said at once, so that a partition it carries
            # is heard from at this read, as by its own fetch (its TelemetryMissing resolves)
            reads.held = ts
            self._publish(key, reads, out)
            return
        if reads.next_flush is None:
            reads.next_flush = ts + self.resolution_ms
        if reads.held is None or ts > reads.held:
            reads.held = ts
        if f.waits_on != (key, reads.generation):
            f.waits_on = (key, reads.generation)
            reads.waiting += 1

    def _restate(self, f: _Follower, now: int, out: list) -> None:
        """The follower's last read that only its session said, as a fetch of its own (before
        an event at `now` changes its partition). The held read it waited on is dropped when
        no follower waits on it any more and its flush time has not come: it says nothing the
        restated fetches do not. Not when a session event of an earlier step said it: that one
        is on the metrics topic before this step's events, so the engine takes it before the
        change, and a restated fetch of a follower that fell silent long ago (a paused broker)
        would only come behind its partition's newer events, late."""
        if f.unsent is None or f.last is None:
            return
        reads = self._reads.get(f.key) if f.key is not None else None
        if reads is not None and reads.sent >= f.unsent and reads.sent_step < self._step:
            f.unsent, f.waits_on = None, None
            self.said += 1
            return
        out.append({**f.last, "ts": f.unsent, "session_id": f.session})
        f.unsent = None
        self.restated += 1
        if f.waits_on is None:
            return
        key, generation = f.waits_on
        f.waits_on = None
        reads = self._reads[key]
        if reads.generation != generation:  # that read was published
            return
        reads.waiting -= 1
        if (
            reads.waiting == 0
            and reads.held is not None
            and reads.next_flush is not None
            and now < reads.next_flush
        ):
            # nothing published: the session's next read starts a grid of its own (its flush
            # is still a resolution after the last one published)
            reads.held, reads.next_flush = None, None
            reads.generation += 1
            self.unneeded += 1

    def _flush(self, now: int, out: list) -> None:
        for key, reads in self._reads.items():
            self._flush_one(key, reads, now, out)

    def _flush_one(self, key: tuple, reads: _Reads, now: int, out: list) -> None:
        """Publish the held read at each flush time up to `now`; a flush time with nothing
        held ends the grid (the next read held starts a new one)."""
        while reads.next_flush is not None and reads.next_flush <= now:
            if reads.held is None:
                reads.next_flush = None
            else:
                self._publish(key, reads, out)
                reads.next_flush += self.resolution_ms

    def _publish(self, key: tuple, reads: _Reads, out: list) -> None:
        assert reads.held is not None
        cluster, replica, leader, sid = key
        out.append(event("session", reads.held, cluster, replica=replica, leader=leader, session_id=sid))
        reads.sent, reads.held, reads.sent_step = reads.held, None, self._step
        reads.waiting = 0
        reads.generation += 1
