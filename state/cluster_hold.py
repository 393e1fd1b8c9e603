"""Holding and claims (state/cluster.py): every alert is held until `alerts.group_wait_ms` of
event time after it started, so that a root found within that window claims it (Alertmanager's
group_wait, decided on event time, so a replay decides the same).

A replica alert of an unavailable broker, the followers' alerts of a partition whose leader is
unavailable (cause `leader_unavailable`), and a partition alert whose leader, missing replicas
or HW holders are unavailable carry the outage's id in `caused_by` and are not notified
(except UnderMinIsr and OfflinePartition, which always page, unless the outage pages already).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from replmon.state.alert_rules import REPLICA_ALERTS
from replmon.state.alerts import ALWAYS_NOTIFIED, AlertRecord, derived, is_notified
from replmon.state.cluster_episodes import Episode, Outages
from replmon.state.root_cause import BROKER_UNAVAILABLE, FETCHER_STALLED

LEADER_UNAVAILABLE = "leader_unavailable"


@dataclass(frozen=True, slots=True)
class Decision:
    """What the step decided of a released firing alert, kept until its resolve."""

    episode: str | None  # the alert id of the outage that claims it
    caused_by: str | None
    cause: str | None
    quiet: bool = False  # over within group_wait: recorded, not notified


@dataclass(slots=True)
class Holding:
    """The alerts of one cluster waiting for their release, and the decisions of those released
    and still firing."""

    held: list[AlertRecord] = field(default_factory=list)
    decided: dict[str, Decision] = field(default_factory=dict)  # alert_id -> its decision

    def to_doc(self) -> dict[str, Any]:
        return {
            "held": list(self.held),
            "decided": {
                aid: {"episode": d.episode, "caused_by": d.caused_by, "cause": d.cause, "quiet": d.quiet}
                for aid, d in self.decided.items()
            },
        }

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> Holding:
        decided = {
            aid: Decision(x["episode"], x["caused_by"], x["cause"], x.get("quiet", False))
            for aid, x in d["decided"].items()
        }
        return cls(list(d["held"]), decided)


def decide(outages: Outages, decided: dict[str, Decision], rec: AlertRecord, group_wait_ms: int) -> Decision:
    """The outage (if any) that claims the firing alert `rec`, and its cause and caused_by."""
    name, at = rec["name"], rec["started_ms"]
    caused_by, cause = rec.get("caused_by"), rec.get("cause")

    def episode_for(broker: int | None) -> Episode | None:
        return outages.episode_for(broker, at, group_wait_ms)

    ep = None
    if name in REPLICA_ALERTS:
        ep = episode_for(rec.get("replica"))
        if ep is not None:
            cause = ep.cause if cause in ("lag", None) else cause
        else:
            ep = episode_for(rec.get("leader"))
            if ep is not None:
                cause = LEADER_UNAVAILABLE
    elif name == FETCHER_STALLED:
        ep = episode_for(rec.get("broker")) or episode_for(rec.get("leader"))
    elif name not in (BROKER_UNAVAILABLE, "TelemetryMissing") or rec.get("topic") is not None:
        ep = _partition_episode(outages, decided, rec, episode_for)
    if ep is None and caused_by in outages.aliases:  # named a bucket's BrokerUnavailable
        ep = episode_for(outages.aliases[caused_by])
    if ep is not None:
        caused_by = ep.alert_id
    elif caused_by in outages.aliases:
        caused_by = None
    return Decision(ep.alert_id if ep is not None else None, caused_by, cause)


def _partition_episode(
    outages: Outages,
    decided: dict[str, Decision],
    rec: AlertRecord,
    episode_for: Callable[[int | None], Episode | None],
) -> Episode | None:
    """A partition alert's outage: what the partition's own alerts say first (its missing
    replica's alert, or the controller decision the bucket saw cross the threshold), then its
    leader, then the outages of all the brokers it misses (the latest to start crossed it)."""
    caused_by = rec.get("caused_by")
    upstream = decided.get(caused_by) if caused_by else None
    ep = outages.by_id(upstream.episode) if upstream is not None else None
    if ep is None and caused_by in outages.aliases:
        ep = episode_for(outages.aliases[caused_by])
    if ep is None:
        ep = episode_for(rec.get("leader"))
    brokers = rec.get("brokers") or []
    if ep is None and brokers:
        eps = [episode_for(b) for b in brokers]
        found = [e for e in eps if e is not None]
        if len(found) == len(eps):
            ep = max(found, key=lambda e: e.started_ms)
    if ep is None:
        # a partition one of whose replicas is out: its leadership moved, its new leader's HW
        # waits for followers that now fetch from it, ... (a replica's own lag still notifies
        # on its own ReplicaOutOfSync)
        found = [e for e in (episode_for(b) for b in rec.get("replicas") or []) if e is not None]
        if found:
            ep = min(found, key=lambda e: e.started_ms)
    return ep


def claimed(rec: AlertRecord, decision: Decision, ep: Episode | None) -> AlertRecord:
    """The record `rec` as the step releases it: its cause, caused_by and whether it pages."""
    caused_by = decision.caused_by
    changes: dict[str, Any] = {}
    if (
        ep is not None
        and decision.cause == LEADER_UNAVAILABLE
        and rec.get("cause") != LEADER_UNAVAILABLE
        and rec["status"] == "firing"
    ):
        changes["reason"] = f"its leader, broker {ep.broker}, is unavailable ({ep.cause}): {rec['reason']}"
    notify = is_notified(rec["name"], caused_by) and not decision.quiet
    if notify and ep is not None and not ep.controlled and rec["name"] in ALWAYS_NOTIFIED:
        # acks=all rejected or a partition offline pages on its own, except as part of an
        # outage that pages already: then it is in that one page's counts (a controlled
        # shutdown is a warning, so what it takes below min ISR still pages)
        notify = False
    return derived(
        rec, **changes, cause=decision.cause, caused_by=caused_by, root_cause=caused_by is None, notify=notify
    )
