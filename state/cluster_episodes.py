"""Broker outages as the cluster step decides them (state/cluster.py): one episode, one
`BrokerUnavailable` alert, per outage of a broker.

A broker is unavailable while it is *silent* (state/cluster_activity.py), *fenced* or *shutting
down* (the controller's word). When the cause moves (silent -> fenced) the same episode, and
the same alert, carries the new cause. A broker the controller took out of an ISR just before
it stopped was shut down in a controlled way: a warning, not a page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replmon.state import texts
from replmon.state.alerts import SEVERITY, AlertRecord, alert_id
from replmon.state.cluster_activity import NEVER
from replmon.state.root_cause import BROKER_UNAVAILABLE, COUNTED, broker_subject

# a broker that stops (silent or fenced) within this of the controller taking it out of an ISR
# while it ran was shut down in a controlled way
CONTROLLED_WITHIN_MS = 10_000
COUNTS_EVERY_MS = 1000  # at most one counts update per episode per this much event time
SILENT, FENCED, SHUTTING_DOWN = "broker_silent", "broker_fenced", "broker_shutting_down"


@dataclass(slots=True)
class Episode:
    """One outage of one broker: one BrokerUnavailable alert."""

    alert_id: str
    broker: int
    started_ms: int
    cause: str
    controlled: bool = False  # a controlled shutdown: reported, not paged
    released: bool = False
    notify: bool = False
    ended_ms: int | None = None
    counted: dict[str, set[str]] = field(default_factory=dict)  # kind -> subjects it took down
    counts_dirty: bool = False
    counts_ms: int = -NEVER
    dirty_ms: int = -NEVER  # when the counts last changed
    cause_ms: int = -NEVER  # when the current cause was seen (the fence, the shutdown, the silence)

    def counts(self) -> dict[str, int]:
        out = {kind: len(self.counted.get(kind, ())) for kind in COUNTED.values()}
        out["leaders_lost"] = len(self.counted.get("leaders_lost", ()))
        return out

    def count(self, rec: AlertRecord, ts: int) -> None:
        """Count a claimed alert: a partition it took down, or a partition it led seen to
        suffer (a leader lost, counted from the alerts so that the figure depends on event
        times only)."""
        kind = COUNTED.get(rec["name"])
        if kind is not None:
            self.counted.setdefault(kind, set()).add(rec["subject"])
            self.counts_dirty, self.dirty_ms = True, ts
        if rec.get("topic") is not None and (
            rec.get("leader") == self.broker or rec["name"] == "OfflinePartition"
        ):
            led = self.counted.setdefault("leaders_lost", set())
            subject = f"{rec['cluster']}/{rec['topic']}-{rec['partition']}"
            if subject not in led:
                led.add(subject)
                self.counts_dirty, self.dirty_ms = True, ts

    def to_doc(self) -> dict[str, Any]:
        return {
            "alert_id": self.alert_id,
            "broker": self.broker,
            "started_ms": self.started_ms,
            "cause": self.cause,
            "controlled": self.controlled,
            "released": self.released,
            "notify": self.notify,
            "ended_ms": self.ended_ms,
            "counted": {k: sorted(v) for k, v in self.counted.items()},
            "counts_dirty": self.counts_dirty,
            "counts_ms": self.counts_ms,
            "dirty_ms": self.dirty_ms,
            "cause_ms": self.cause_ms,
        }

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> Episode:
        d = dict(d)
        d["counted"] = {k: set(v) for k, v in d["counted"].items()}
        return cls(**d)


@dataclass(slots=True)
class Outages:
    """What the controller and the silences say of each broker of one cluster, and the outage
    episodes they make."""

    silent: dict[int, int] = field(default_factory=dict)  # broker -> its last activity, while silent
    states: dict[int, str] = field(default_factory=dict)  # broker -> controller state (fenced, shutting_down)
    pending_states: list[tuple[int, int, str]] = field(default_factory=list)  # (ts, broker, state) to apply
    aliases: dict[str, int] = field(default_factory=dict)  # a bucket's BrokerUnavailable id -> broker
    open: dict[int, Episode] = field(default_factory=dict)  # broker -> its open episode
    ended: list[Episode] = field(default_factory=list)  # episodes ended less than 2 x group_wait ago
    controller_exits: dict[str, int] = field(
        default_factory=dict
    )  # broker -> last time the controller took it out

    def apply_state(self, broker: int, state: str) -> None:
        """The controller's word on a broker: registered and running (it is back), or not."""
        if state == "running":
            self.states.pop(broker, None)
            self.silent.pop(broker, None)
        else:
            self.states[broker] = state

    def cause_of(self, broker: int) -> str | None:
        """Why `broker` is unavailable now, if it is: the controller's word first, then silence."""
        state = self.states.get(broker)
        cause = FENCED if state == "fenced" else SHUTTING_DOWN if state == "shutting_down" else None
        if cause is None and broker in self.silent:
            cause = SILENT
        return cause

    def begin(self, cluster: str, broker: int, cause: str, ts: int, silent_after_ms: int) -> Episode:
        """Open the episode of `broker` made unavailable by `cause`, decided at `ts`."""
        started = self.silent[broker] + silent_after_ms + 1 if cause == SILENT else ts
        started = min(started, ts)
        if cause != SHUTTING_DOWN and started - self.controller_exits.get(str(broker), -NEVER) <= (
            CONTROLLED_WITHIN_MS
        ):
            # the controller emptied the broker just before it stopped: a controlled shutdown
            # (the Admin API does not show it, and the heartbeat asking for it may not be seen)
            cause = SHUTTING_DOWN
        ep = Episode(
            alert_id(BROKER_UNAVAILABLE, broker_subject(cluster, broker), started),
            broker,
            started,
            cause,
            controlled=cause == SHUTTING_DOWN,
            cause_ms=ts,
        )
        self.open[broker] = ep
        return ep

    def end(self, broker: int, ts: int) -> Episode:
        ep = self.open.pop(broker)
        ep.ended_ms = ts
        self.ended.append(ep)
        return ep

    def episode_for(self, broker: int | None, at_ms: int, group_wait_ms: int) -> Episode | None:
        """The outage of `broker` that explains something that started at `at_ms`: open then,
        or starting within group_wait after it, or ended less than group_wait before it."""
        if broker is None or broker < 0:
            return None
        for ep in (self.open.get(broker), *reversed(self.ended)):
            if ep is None or ep.broker != broker:
                continue
            if ep.started_ms <= at_ms + group_wait_ms and (
                ep.ended_ms is None or ep.ended_ms + group_wait_ms >= at_ms
            ):
                return ep
        return None

    def by_id(self, aid: str | None) -> Episode | None:
        """The episode (open, or ended and still kept) whose alert id is `aid`."""
        if aid is None:
            return None
        for ep in (*reversed(self.ended), *self.open.values()):
            if ep.alert_id == aid:
                return ep
        return None

    def forget(self, horizon_ms: int, group_wait_ms: int) -> None:
        """Drop what no decision after `horizon_ms` can need: an alert an ended outage claims
        started by its end + group_wait and is released group_wait later."""
        self.ended = [
            ep for ep in self.ended if ep.ended_ms is None or ep.ended_ms + 2 * group_wait_ms >= horizon_ms
        ]
        for key, at in list(self.controller_exits.items()):
            if at + CONTROLLED_WITHIN_MS < horizon_ms:
                del self.controller_exits[key]

    def to_doc(self) -> dict[str, Any]:
        return {
            "silent": [[b, t] for b, t in self.silent.items()],
            "states": [[b, s] for b, s in self.states.items()],
            "pending_states": [list(p) for p in self.pending_states],
            "aliases": dict(self.aliases),
            "open": [[b, ep.to_doc()] for b, ep in self.open.items()],
            "ended": [ep.to_doc() for ep in self.ended],
            "controller_exits": dict(self.controller_exits),
        }

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> Outages:
        return cls(
            silent={int(b): t for b, t in d["silent"]},
            states={int(b): s for b, s in d["states"]},
            pending_states=[(ts, broker, state) for ts, broker, state in d["pending_states"]],
            aliases=dict(d["aliases"]),
            open={int(b): Episode.from_doc(ep) for b, ep in d["open"]},
            ended=[Episode.from_doc(ep) for ep in d["ended"]],
            controller_exits=dict(d["controller_exits"]),
        )


def root_record(cluster: str, ep: Episode, status: str, ts: int, silent_after_ms: int) -> AlertRecord:
    """The BrokerUnavailable record of an episode's transition (`updated`: its cause or counts)."""
    counts = ep.counts()
    if status == "resolved":
        reason = texts.close_text(
            BROKER_UNAVAILABLE,
            "heard_again" if ep.cause == SILENT else "running",
            broker=ep.broker,
            cluster=cluster,
        )
    else:
        reason = texts.open_text(
            BROKER_UNAVAILABLE,
            ep.cause,
            broker=ep.broker,
            cluster=cluster,
            since=texts.fmt_clock(cause_since(ep, silent_after_ms)),
            counts=texts.fmt_counts(counts),
        )
    return {
        "alert_id": ep.alert_id,
        "name": BROKER_UNAVAILABLE,
        "status": status,
        "severity": "warning" if ep.controlled else SEVERITY[BROKER_UNAVAILABLE],
        "cluster": cluster,
        "topic": None,
        "partition": None,
        "replica": None,
        "broker": ep.broker,
        "subject": broker_subject(cluster, ep.broker),
        "started_ms": ep.started_ms,
        "ts": ts,
        "reason": reason,
        "cause": ep.cause,
        "caused_by": None,
        "root_cause": True,
        "notify": ep.notify and status != "updated",
        "silenced_by": [],
        "counts": counts,
        "cause_ms": ep.cause_ms,
    }


def cause_since(ep: Episode, silent_after_ms: int) -> int:
    """The time of the fact the open text names: for a silence, the broker's last activity
    (the episode starts silent_after_ms + 1 later, Outages.begin); else when the current
    cause was seen (a fence after a silence comes later than the episode's start)."""
    if ep.cause == SILENT:
        return ep.started_ms - silent_after_ms - 1
    return max(ep.cause_ms, ep.started_ms)  # (a state saved before cause_ms existed: the start)
