"""Lag groups (state/cluster.py): a follower broker out of sync on several partitions for its
own reason (no outage explains it) is one notification. The first notified ReplicaOutOfSync of
the broker stands for the others while any is open, or it resolved less than REGROUP_MS ago
(Alertmanager's group_interval)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replmon.state.alerts import AlertRecord
from replmon.state.cluster_activity import NEVER

REGROUP_MS = 300_000  # a lagging broker's alerts stay one group this long after the last resolves


@dataclass(slots=True)
class LagGroup:
    """The notified lag of one follower broker and the alerts it stands for."""

    first_id: str  # the ReplicaOutOfSync that was notified
    open_ids: list[str]  # the group's ReplicaOutOfSync alerts still firing
    resolved_ms: int = -NEVER  # when the last of them resolved

    def stands_for(self, at_ms: int) -> bool:
        return bool(self.open_ids) or at_ms <= self.resolved_ms + REGROUP_MS


@dataclass(slots=True)
class LagGroups:
    """The lag groups of one cluster, by follower broker."""

    groups: dict[str, LagGroup] = field(default_factory=dict)  # follower broker (as text) -> its group

    def claim(self, rec: AlertRecord, caused_by: str | None, quiet: bool) -> str | None:
        """The `caused_by` of a released firing alert once lag grouping is applied: the id of
        its broker's group, or what it was; a notified lag of its own starts a group."""
        if (
            rec["name"] not in ("ReplicaOutOfSync", "IsrFlapping")
            or caused_by is not None
            or rec.get("replica") is None
        ):
            return caused_by
        key = str(rec["replica"])
        group = self.groups.get(key)
        at = rec["started_ms"]
        if group is not None and group.stands_for(at):
            if rec["name"] == "ReplicaOutOfSync":
                group.open_ids.append(rec["alert_id"])
            return group.first_id
        if rec["name"] == "IsrFlapping" or quiet:
            # (an IsrFlapping only joins its broker's group; a lag recorded, not notified (over
            # within group_wait) cannot stand for a later lag of the broker, which on-call would
            # then never hear of)
            return caused_by
        self.groups[key] = LagGroup(rec["alert_id"], [rec["alert_id"]])
        return caused_by

    def resolved(self, rec: AlertRecord, horizon_ms: int) -> None:
        """A resolve released: out of its group; groups over for REGROUP_MS before
        `horizon_ms` are forgotten."""
        if rec["name"] != "ReplicaOutOfSync" or rec.get("replica") is None:
            return
        group = self.groups.get(str(rec["replica"]))
        if group is not None and rec["alert_id"] in group.open_ids:
            group.open_ids.remove(rec["alert_id"])
            if not group.open_ids:
                group.resolved_ms = rec["ts"]
        for key, g in list(self.groups.items()):
            if not g.open_ids and g.resolved_ms + REGROUP_MS < horizon_ms:
                del self.groups[key]

    def to_doc(self) -> dict[str, Any]:
        return {
            "groups": {
                key: {"first_id": g.first_id, "open_ids": list(g.open_ids), "resolved_ms": g.resolved_ms}
                for key, g in self.groups.items()
            }
        }

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> LagGroups:
        return cls(
            {
                key: LagGroup(g["first_id"], list(g["open_ids"]), g["resolved_ms"])
                for key, g in d["groups"].items()
            }
        )
