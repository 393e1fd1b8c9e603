"""The cluster step's state (state/cluster.py) and its saved document.

What the step knows of one cluster is a few parts, each with its own state and its own
document: the brokers' activity (state/cluster_activity.py), the outages
(state/cluster_episodes.py), the held alerts and decisions (state/cluster_hold.py), the lag
groups (state/cluster_lag.py) and the restart gate's view (state/restart_gate.py).

The document is versioned (`FORMAT`); a document names what its values are, never an object
graph (an outage a decision refers to is named by its alert id). Format 3 holds the restart
gate's partitions as one JSON text (state/restart_gate.py `to_doc`), format 2 as a list; format 1
(the document before the parts, also written with no version) is read too; a newer format than
this code knows is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replmon.state import restart_gate
from replmon.state.cluster_activity import NEVER, Activity
from replmon.state.cluster_episodes import Outages
from replmon.state.cluster_hold import Holding
from replmon.state.cluster_lag import LagGroups

FORMAT = 3


@dataclass(slots=True)
class ClusterFacts:
    """What the step knows of one cluster, part by part."""

    horizon_ms: int = -NEVER  # decided up to here
    activity: Activity = field(default_factory=Activity)
    outages: Outages = field(default_factory=Outages)
    holding: Holding = field(default_factory=Holding)
    lag: LagGroups = field(default_factory=LagGroups)
    gate: restart_gate.GateFacts = field(default_factory=restart_gate.GateFacts)

    def to_doc(self) -> dict[str, Any]:
        return {
            "horizon_ms": self.horizon_ms,
            "activity": self.activity.to_doc(),
            "outages": self.outages.to_doc(),
            "holding": self.holding.to_doc(),
            "lag": self.lag.to_doc(),
            "gate": restart_gate.to_doc(self.gate),
        }

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> ClusterFacts:
        return cls(
            horizon_ms=d["horizon_ms"],
            activity=Activity.from_doc(d["activity"]),
            outages=Outages.from_doc(d["outages"]),
            holding=Holding.from_doc(d["holding"]),
            lag=LagGroups.from_doc(d["lag"]),
            gate=restart_gate.from_doc(d["gate"]),
        )


class StateFormatError(ValueError):
    """A saved state this code cannot read."""


def to_doc(clusters: dict[str, ClusterFacts]) -> dict[str, Any]:
    """The step's state as plain JSON-able data (kept with the query's checkpoint)."""
    return {"format": FORMAT, "clusters": {name: f.to_doc() for name, f in clusters.items()}}


def from_doc(doc: dict[str, Any] | None) -> dict[str, ClusterFacts]:
    """The state `to_doc` wrote, of this format or format 1; None: a new state."""
    if not doc:
        return {}
    version = doc.get("format", 1)
    if version not in (1, 2, FORMAT):
        raise StateFormatError(
            f"the cluster step's saved state has format {version!r}; this replmon reads formats 1 to "
            f"{FORMAT}: a newer replmon wrote it (run that version, or start from a new checkpoint)"
        )
    clusters = doc.get("clusters", {})
    if version == 1:
        clusters = {name: upgrade_v1(d) for name, d in clusters.items()}
    return {name: ClusterFacts.from_doc(d) for name, d in clusters.items()}


def upgrade_v1(d: dict[str, Any]) -> dict[str, Any]:
    """One cluster's format-1 document (all facts side by side, outages in a table that the
    open and ended lists and the decisions name) as format 2."""
    # (states written before episodes were named by alert id name them by a number: str() reads both)
    eps = {str(k): v for k, v in d["episodes"].items()}

    def episode_id(ref: Any) -> str | None:
        ep = eps.get(str(ref)) if ref is not None else None
        return None if ep is None else str(ep["alert_id"])

    return {
        "horizon_ms": d["horizon_ms"],
        "activity": {k: d[k] for k in ("newest_activity_ms", "segments", "replicas")},
        "outages": {
            **{k: d[k] for k in ("silent", "states", "pending_states", "aliases")},
            "open": [[b, eps[str(k)]] for b, k in d["open"]],
            "ended": [eps[str(k)] for k in d["ended"]],
            "controller_exits": d.get("controller_exits", {}),
        },
        "holding": {
            "held": d["held"],
            "decided": {
                aid: {"episode": episode_id(x["episode"]), "caused_by": x["caused_by"], "cause": x["cause"]}
                for aid, x in d["decided"].items()
            },
        },
        "lag": {
            "groups": {
                k: {"first_id": v[0], "open_ids": v[1], "resolved_ms": v[2]}
                for k, v in d.get("lagging", {}).items()
            }
        },
        "gate": restart_gate.to_doc(restart_gate.from_doc(d.get("gate"))),
    }
