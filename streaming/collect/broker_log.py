"""One broker's request log -> events: follower fetches it answered as leader, and appends."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, tzinfo

from replmon.streaming.collect import infer
from replmon.streaming.collect.requestlog import BadLine, Request, follower_of, parse_line
from replmon.streaming.collect.sessions import FetchSessions

log = logging.getLogger(__name__)


class BrokerLog:
    """Turns the lines of one broker's request log into contract events.

    `names(topic_id)` gives a topic's name or None; `wanted(topic)` says whether to report it.
    `counts` says what was skipped and why (nothing is dropped silently).
    """

    def __init__(self, cluster: str, broker: int, names, wanted=lambda topic: True, tz: tzinfo = UTC) -> None:
        self.cluster, self.broker, self.names, self.wanted, self.tz = cluster, broker, names, wanted, tz
        self.sessions = FetchSessions()
        self.bounds = infer.LeoBounds()
        self.counts: Counter = Counter()
        self.shutting_down: set[int] = set()  # brokers whose heartbeats ask to shut down

    def _topic(self, topic_id: str | None, name: str | None) -> str | None:
        topic = name if name else (self.names(topic_id) if topic_id else None)
        if topic is None:
            self.counts["skipped: unknown topic id"] += 1
        elif not self.wanted(topic):
            self.counts["skipped: topic not monitored"] += 1
            return None
        return topic

    def events(self, line: str, emit: bool = True) -> list[dict]:
        """Events for one line. emit=False only rebuilds session state (warm-up)."""
        try:
            req = parse_line(line, self.tz)
        except BadLine as e:
            self.counts["bad line"] += 1
            log.warning("broker %s: unreadable request-log line (%s): %.200s", self.broker, e, line)
            return []
        if req is None:
            return []
        self.counts["lines"] += 1
        untested = req.untested_version()
        if untested is not None:
            self._untested(untested, line)
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
            self.counts["skipped: heartbeat without a broker id"] += 1
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
                self.counts["skipped: empty after the response's maxBytes"] += 1
                continue
            tp = (topic, f.partition)
            if caught_up and not f.error_code and f.diverging_epoch is None:
                self.bounds.prove(tp, req.read_ms, f.fetch_offset)
            out.append(
                infer.fetch_event(
                    self.cluster, topic, req, follower, f, bool(caught_up), self.bounds.at(tp, req.read_ms)
                )
            )
        self.counts["fetch events"] += len(out)
        return out
