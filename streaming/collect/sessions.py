"""KIP-227 fetch sessions, as the leader keeps them, rebuilt from request-log lines.

An incremental fetch names only the partitions whose fetch state changed, and its response
only the partitions with records or a changed high watermark, log start or error; the leader
still reads every partition of the session on every fetch (FetchSession.scala: the cached
fetch offset is used for the ones not named). So each follower fetch is one observation per
partition in the session (docs/kafka-rules.md §11), and the cache of the session must be kept here.

Epochs: sessionEpoch 0 opens a session with a full request (the response says its id),
-1 is a full fetch without a session, > 0 is incremental on sessionId. A top-level error
answers nothing and ends the session (the fetcher starts over with a full request).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

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
