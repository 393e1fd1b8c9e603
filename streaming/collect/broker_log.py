"""One broker's request log -> events: follower fetches it answered as leader, and appends."""

from __future__ import annotations

import logging
import time
from collections import Counter
from datetime import UTC, tzinfo

from replmon.streaming.collect import infer
from replmon.streaming.collect.requestlog import BadLine, Request, follower_of, parse_line
from replmon.streaming.collect.sessions import FetchSessions

log = logging.getLogger(__name__)
EXAMPLE_EVERY_S = 3600.0  # one example line per reason, again at most this often
UNKNOWN_ID = "skipped: unknown topic id after a metadata poll (a deleted topic)"
# What a line the collector cannot use raises while it is read: a missing or mistyped field.
UNUSABLE = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def named_topic_ids(req: Request) -> set[str]:
    """The topic ids a FETCH or PRODUCE line names (Kafka 4.x names topics by id only)."""
    request, response = req.body.get("request") or {}, req.body.get("response") or {}
    out = set()
    for group in (
        request.get("topics"),
        request.get("forgottenTopicsData"),
        request.get("topicData"),
        response.get("responses"),
    ):
        for t in group if isinstance(group, list) else []:
            tid = t.get("topicId") if isinstance(t, dict) else None
            if isinstance(tid, str) and tid:
                out.add(tid)
    return out


class BrokerLog:
    """Turns the lines of one broker's request log into contract events.

    `names(topic_id)` gives a topic's name or None; `wanted(topic)` says whether to report it.
    `counts` says what was skipped and why (nothing is dropped silently), and the first line
    skipped for each reason is logged as an example (then at most once an hour).
    """

    def __init__(self, cluster: str, broker: int, names, wanted=lambda topic: True, tz: tzinfo = UTC) -> None:
        self.cluster, self.broker, self.names, self.wanted, self.tz = cluster, broker, names, wanted, tz
        self.sessions = FetchSessions()
        self.bounds = infer.LeoBounds()
        self.counts: Counter = Counter()
        self.shutting_down: set[int] = set()  # brokers whose heartbeats ask to shut down
        # name each fetch's session (KIP-227) in its event: for the session form (sessions.py: SessionForm)
        self.session_ids = False
        self._shown: dict[str, float] = {}  # reason -> when its last example was logged

    def skip(self, reason: str, line: str | None = None) -> None:
        """Count a skip by reason; log the line as the reason's example now and then."""
        self.counts[reason] += 1
        if line is None:
            return
        now = time.monotonic()
        if reason not in self._shown or now - self._shown[reason] >= EXAMPLE_EVERY_S:
            self._shown[reason] = now
            log.warning(
                "broker %s: %s (%d so far); example line: %.500s",
                self.broker,
                reason,
                self.counts[reason],
                line,
            )

    def _topic(self, topic_id: str | None, name: str | None) -> str | None:
        topic = name if name else (self.names(topic_id) if topic_id else None)
        if topic is None:
            self.skip(UNKNOWN_ID)
        elif not self.wanted(topic):
            self.skip("skipped: internal topic" if topic.startswith("__") else "skipped: topic not monitored")
            return None
        return topic

    def read(self, line: str) -> Request | None:
        """The request on a line; None (counted by reason) for a line that is not one."""
        try:
            req = parse_line(line, self.tz)
        except BadLine as e:
            self.skip(f"bad line: {str(e).split(':')[0]}", line)
            return None
        if req is None:
            self.skip("not a request line", line)
        return req

    def unknown_ids(self, req: Request) -> set[str]:
        """Topic ids on this line that the Admin API has not named (yet), on the lines that
        become events: a follower's FETCH, a PRODUCE (a KRaft controller's `raft-client` FETCH
        of __cluster_metadata names an id no poll lists, and is not an event)."""
        if not (req.api == "PRODUCE" or follower_of(req) is not None):
            return set()
        return {tid for tid in named_topic_ids(req) if self.names(tid) is None}

    def events(self, line: str, emit: bool = True) -> list[dict]:
        """Events for one line. emit=False only rebuilds session state (warm-up)."""
        req = self.read(line)
        return [] if req is None else self.events_of(req, line, emit)

    def events_of(self, req: Request, line: str, emit: bool = True) -> list[dict]:
        """Events for one parsed line; a line with a missing or mistyped field is counted by
        reason with an example (an unknown request version, a damaged line), never a crash."""
        untested = req.untested_version()
        if untested is not None:
            self._untested(untested, line)
        try:
            return self._events(req, emit)
        except UNUSABLE as e:
            what = f"no {e.args[0]!r}" if isinstance(e, KeyError) and e.args else type(e).__name__
            self.skip(f"unusable {req.api or 'untyped'} line: {what}", line)
            return []

    def _events(self, req: Request, emit: bool) -> list[dict]:
        self.counts["lines"] += 1
        if req.api == "PRODUCE":
            return self._produce(req) if emit else []
        if req.api == "BROKER_HEARTBEAT":
            out = self._heartbeat(req)
            return out if emit else []
        who = follower_of(req)
        if who is None:
            return []
        fetches = self.sessions.observe(req, *who)
        return self._fetch(req, who[0], fetches) if emit else []

    def _untested(self, what: str, line: str) -> None:
        """A request version replmon was not checked against: read as usual, counted by version,
        and shown once with its line, so that a new Kafka release is noticed."""
        key = f"warning: untested request version {what}"
        if not self.counts[key]:
            log.warning(
                "broker %s: %s is a request version replmon was not tested with (docs/real-cluster.md);"
                " reading it as the tested ones, counted as %r. Example: %.300s",
                self.broker,
                what,
                key,
                line,
            )
        self.counts[key] += 1

    def _heartbeat(self, req: Request) -> list[dict]:
        """A broker's heartbeat to the KRaft controller, in the controller's request log: one
        that asks to shut down (`wantShutDown`) starts a controlled shutdown, which the Admin
        API does not show (it lists the broker as registered and unfenced until it is gone).
        One `broker` event (shutting_down) per shutdown; the Admin API's fence and the broker's
        registration when it is back follow as usual (admin.py)."""
        request = req.body.get("request") or {}
        broker = request.get("brokerId")
        if not isinstance(broker, int) or isinstance(broker, bool):
            self.skip("skipped: heartbeat without a broker id")
            return []
        if not request.get("wantShutDown"):
            self.shutting_down.discard(broker)
            return []
        if broker in self.shutting_down:
            return []
        self.shutting_down.add(broker)
        epoch = request.get("brokerEpoch")
        event = {"type": "broker", "ts": req.log_ms, "cluster": self.cluster, "broker": broker}
        event["state"] = "shutting_down"
        if isinstance(epoch, int) and epoch >= 0:
            event["broker_epoch"] = epoch
        self.counts["controlled shutdowns"] += 1
        return [event]

    def _produce(self, req: Request) -> list[dict]:
        out = []
        for tid, name, partition, base in infer.produced(req):
            topic = self._topic(tid, name)
            if topic is None:
                continue
            self.bounds.prove((topic, partition), req.local_done_ms, base + 1)
            out.append(infer.append_event(self.cluster, topic, partition, req, base))
        return out

    def _fetch(self, req: Request, follower: int, fetches) -> list[dict]:
        cut = infer.response_cut_short(req, fetches)
        out = []
        for f in fetches:
            topic = self._topic(f.topic_id, f.topic)
            if topic is None:
                continue
            caught_up = infer.is_caught_up_at_read(req, f, cut)
            if caught_up is None and not f.error_code:
                self.skip("skipped: empty after the response's maxBytes")
                continue
            tp = (topic, f.partition)
            if caught_up and not f.error_code and f.diverging_epoch is None:
                self.bounds.prove(tp, req.read_ms, f.fetch_offset)
            ev = infer.fetch_event(
                self.cluster, topic, req, follower, f, bool(caught_up), self.bounds.at(tp, req.read_ms)
            )
            if self.session_ids and self.sessions.session_id and "error" not in ev:
                ev["session_id"] = self.sessions.session_id
            out.append(ev)
        self.counts["fetch events"] += len(out)
        return out
