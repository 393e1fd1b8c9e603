"""Every alert, in one table: its row (name, severity, scope, cause, text templates, how a root
claims it) and, for the alerts the partition engine decides, one small pure condition function.

Adding an alert is one row in `RULES`, its condition function here and its templates in
`state/texts.py` (keyed `(name, cause)`); `PartitionWatch.evaluate` (state/monitor.py) derives
the facts once and applies the rows of its scopes in order. `tests/state/test_alert_rules.py`
holds one table per function, a reason per row. What each alert means and who gets it:
docs/alerts.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .explain import LAG, OUT_OF_ISR_CAUSES, out_of_isr_cause
from .partition import PartitionLeader

# Scopes. The first two are decided by the partition engine, row by row; the others elsewhere:
# BROKER by the cluster step (state/cluster.py, state/fetcher.py), CLUSTER by the bucket
# (state/bucket.py), MONITOR by the query's heartbeat (streaming/heartbeat.py).
REPLICA = "replica"
PARTITION = "partition"
BROKER = "broker"
CLUSTER = "cluster"
MONITOR = "monitor"


@dataclass(slots=True)
class PartitionFacts:
    """What the partition rules read, derived once per evaluation (PartitionWatch.evaluate). The
    partition predicates (under-replicated, under and at min ISR) are read from `p`: Kafka's,
    defined once in state/partition.py, so partition_status and the alerts cannot disagree."""

    p: PartitionLeader
    now_ms: int = 0
    has_metadata: bool = True  # a metadata event said who leads
    hw_waiting_since_ms: int | None = None  # since when the HW is below the leader LEO
    hw_stall_ms: int = 0  # alerts.hw_stall_ms
    holders: tuple[int, ...] = ()  # explain.hw_holders
    last_event_ms: int = 0  # the partition's last event
    telemetry_gap_ms: int = 0  # alerts.telemetry_gap_ms
    leader_silent: bool = False  # nothing from the leader for longer than alerts.stuck_after_ms
    new_leader: bool = False  # the leader was elected at now_ms


@dataclass(slots=True)
class ReplicaFacts:
    """What the per-replica rules read, for one follower, derived once per evaluation."""

    partition: PartitionFacts
    replica: int = 2
    in_isr: bool = True  # in the committed ISR
    behind: bool = False  # its LEO is not the leader LEO
    ms_since_caught_up: int = 0  # now - lastCaughtUpTimeMs
    imminent_after_ms: int = 0  # alerts.imminent_fraction of replica.lag.time.max.ms
    out_of_sync: bool = False  # Kafka's getOutOfSyncReplicas would remove it now
    ever_in_isr: bool = True
    exits_in_window: int = 0  # its ISR exits within alerts.flap_window_ms
    flap_count: int = 0  # alerts.flap_count


# ---- the conditions ---------------------------------------------------------------------------


# A follower still in the ISR, behind the leader LEO, past the warning fraction of
# replica.lag.time.max.ms but not yet failing Kafka's isCaughtUp.
def is_isr_exit_imminent(f: ReplicaFacts) -> bool:
    return f.in_isr and f.behind and f.ms_since_caught_up > f.imminent_after_ms and not f.out_of_sync


# Kafka's getOutOfSyncReplicas would remove it (still in the ISR), or it has left the ISR after
# having been in it (a replica that never joined is bootstrapping, not out of sync).
def is_replica_out_of_sync(f: ReplicaFacts) -> bool:
    return (f.in_isr and f.out_of_sync) or (not f.in_isr and f.ever_in_isr)


# At least `flap_count` ISR exits of this replica within the window ending now. An exit is a
# removal while the rule set's out-of-sync test holds (today's: not caught up): a replica in sync
# taken out by a cluster report (one that predates its rejoin) or by the controller has not left
# on its own (monitor._track_isr).
def is_isr_flapping(f: ReplicaFacts) -> bool:
    return f.exits_in_window >= f.flap_count


# Partition.isUnderReplicated (state/partition.py).
def is_under_replicated(f: PartitionFacts) -> bool:
    return f.p.under_replicated


# Partition.isUnderMinIsr, with min ISR capped at the replica count (state/partition.py).
def is_under_min_isr(f: PartitionFacts) -> bool:
    return f.p.under_min_isr


# Partition.isAtMinIsr, but only where losing one more replica matters: with min ISR equal to the
# replica count the partition is always "at min ISR" and that is the configuration, not a fault.
def is_at_min_isr(f: PartitionFacts) -> bool:
    p = f.p
    return p.at_min_isr and len(p.replicas) > p.effective_min_isr


# The controller reports no leader (-1): nothing can be produced or consumed.
def is_offline(f: PartitionFacts) -> bool:
    return f.has_metadata and f.p.leader < 0


# The HW has been below the leader LEO for longer than the stall limit, and it is not frozen by
# the min ISR rule (then UnderMinIsr is the true cause: acks=all produce is rejected, nobody waits).
def is_hw_stalled(f: PartitionFacts) -> bool:
    waiting = f.hw_waiting_since_ms
    return waiting is not None and f.now_ms - waiting > f.hw_stall_ms and not f.p.under_min_isr


# No event for the partition for longer than the telemetry gap.
def is_telemetry_missing(f: PartitionFacts) -> bool:
    return f.now_ms - f.last_event_ms > f.telemetry_gap_ms


# A broker the controller fenced or that is in controlled shutdown (KIP-841 states).
def is_broker_unavailable(*, state: str) -> bool:
    return state in ("fenced", "shutting_down")


# ---- causes: which template opens and closes an episode ---------------------------------------


def out_of_sync_cause(f: ReplicaFacts) -> str:
    """Why the replica is out of the ISR (explain.out_of_isr_cause, shared with replica_status)."""
    pf = f.partition
    return out_of_isr_cause(pf.p, f.replica, pf.now_ms, ever_in_isr=f.ever_in_isr)


def imminent_text_cause(f: ReplicaFacts) -> str:
    """`leader_silent` when nothing at all came from the partition's leader for longer than a
    follower may go without fetching: the followers are not seen, not necessarily late."""
    return "leader_silent" if f.partition.leader_silent else LAG


def imminent_close_cause(f: ReplicaFacts) -> str:
    if not f.in_isr:
        return "left_isr"
    if f.out_of_sync:
        return "out_of_sync"
    return "new_leader" if f.partition.new_leader else "caught_up"


def hw_stall_cause(f: PartitionFacts) -> str:
    return "holders" if f.holders else "isr"


def hw_stall_close_cause(f: PartitionFacts) -> str:
    return "min_isr" if f.p.under_min_isr else "moving"


def at_min_isr_close_cause(f: PartitionFacts) -> str:
    return "below" if f.p.under_min_isr else "above"


# ---- the table ----------------------------------------------------------------------------------

# How a firing episode finds the alert that explains it (`caused_by`), state/alert_roots.py:
ROOT_OF_REPLICA = "replica"  # the replica's broker outage or fetcher stall
ROOT_OF_REPLICA_OR_LEADER = "replica_or_leader"  # ... or a stalled fetcher on the partition's leader
ROOT_OF_OUT_OF_SYNC = "out_of_sync"  # as above, the replica's own only when its cause is its broker
ROOT_OF_MISSING = "missing"  # the alert behind every replica missing from the ISR
ROOT_OF_REPLICAS = "replicas"  # the latest outage among the replicas
ROOT_OF_HOLDERS = "holders"  # the latest outage, when every HW holder is unavailable
ROOT_OF_LEADER = "leader"  # the leader's broker outage


# The root causes' names, which other modules name in code (state/root_cause.py, state/fetcher.py).
BROKER_UNAVAILABLE = "BrokerUnavailable"
FETCHER_STALLED = "ReplicaFetcherStalled"


@dataclass(frozen=True, slots=True)
class AlertRule:
    """One alert. `cause` is the record's cause: a fixed string, or a function of the facts when
    it is decided as the episode fires. `opens` and `closes` are the template causes the alert
    may use (texts.OPEN / texts.CLOSE keys with `name`); `open_text` and `close_text` pick one
    (default: the record's cause to open, the first of `closes` to close). `condition` is None
    for an alert decided outside the partition engine."""

    name: str
    severity: str  # critical pages, warning goes to the team's channel, info only dashboards
    scope: str
    opens: tuple[str, ...]
    closes: tuple[str, ...] = ()
    condition: Callable[[Any], bool] | None = None  # of ReplicaFacts or PartitionFacts, by scope
    cause: str | Callable[[Any], str] | None = None
    open_text: Callable[[Any], str] | None = None
    close_text: Callable[[Any], str] | None = None
    root: str | None = None


RULES = (
    # per replica, in this order (the order of the records at one instant)
    AlertRule(
        "IsrExitImminent",
        "info",
        REPLICA,
        opens=("lag", "leader_silent"),
        closes=("caught_up", "out_of_sync", "new_leader", "left_isr"),
        condition=is_isr_exit_imminent,
        cause=LAG,
        open_text=imminent_text_cause,
        close_text=imminent_close_cause,
        root=ROOT_OF_REPLICA_OR_LEADER,
    ),
    AlertRule(
        "ReplicaOutOfSync",
        "warning",
        REPLICA,
        opens=OUT_OF_ISR_CAUSES,
        closes=("rejoined",),
        condition=is_replica_out_of_sync,
        cause=out_of_sync_cause,
        root=ROOT_OF_OUT_OF_SYNC,
    ),
    AlertRule(
        "IsrFlapping",
        "warning",
        REPLICA,
        opens=("exits",),
        closes=("exits",),
        condition=is_isr_flapping,
        cause="exits",
        root=ROOT_OF_REPLICA,
    ),
    # per partition, in this order
    AlertRule(
        "UnderReplicated",
        "warning",
        PARTITION,
        opens=("replicas",),
        closes=("replicas",),
        condition=is_under_replicated,
        cause="replicas",
        root=ROOT_OF_MISSING,
    ),
    AlertRule(
        "UnderMinIsr",
        "critical",
        PARTITION,
        opens=("min_isr",),
        closes=("min_isr",),
        condition=is_under_min_isr,
        cause="min_isr",
        root=ROOT_OF_MISSING,
    ),
    AlertRule(
        "AtMinIsr",
        "warning",
        PARTITION,
        opens=("min_isr",),
        closes=("below", "above"),
        condition=is_at_min_isr,
        cause="min_isr",
        close_text=at_min_isr_close_cause,
        root=ROOT_OF_MISSING,
    ),
    AlertRule(
        "OfflinePartition",
        "critical",
        PARTITION,
        opens=("no_leader",),
        closes=("no_leader",),
        condition=is_offline,
        cause="no_leader",
        root=ROOT_OF_REPLICAS,
    ),
    AlertRule(
        "HighWatermarkStalled",
        "critical",
        PARTITION,
        opens=("holders", "isr"),
        closes=("moving", "min_isr"),
        condition=is_hw_stalled,
        cause=hw_stall_cause,
        close_text=hw_stall_close_cause,
        root=ROOT_OF_HOLDERS,
    ),
    AlertRule(
        "TelemetryMissing",
        "warning",
        PARTITION,
        opens=("partition", "cluster"),
        closes=("partition", "cluster"),
        condition=is_telemetry_missing,
        cause="partition",
        root=ROOT_OF_LEADER,
    ),
    # decided elsewhere
    AlertRule(
        BROKER_UNAVAILABLE,
        "critical",
        BROKER,
        opens=("broker_fenced", "broker_silent", "broker_shutting_down"),
        closes=("running", "heard_again"),
    ),
    AlertRule(FETCHER_STALLED, "warning", BROKER, opens=("fetcher_stalled",), closes=("fetching",)),
    AlertRule(
        "MonitorLagging",
        "critical",
        MONITOR,
        opens=("stalled", "behind"),
        closes=("keeping_up",),
        cause="monitor",
    ),
)


def names(scope: str) -> tuple[str, ...]:
    """The names of the alerts of `scope`, in the table's order."""
    return tuple(rule.name for rule in RULES if rule.scope == scope)


REPLICA_ALERTS = names(REPLICA)
BROKER_ALERTS = names(BROKER)  # the root causes; their labels carry the broker in the replica slot


def _applied(scope: str) -> tuple[tuple[AlertRule, Callable[[Any], bool]], ...]:
    """The rows the partition engine applies for `scope`, in order, each with its condition."""
    return tuple((r, r.condition) for r in RULES if r.scope == scope and r.condition is not None)


REPLICA_RULES = _applied(REPLICA)
PARTITION_RULES = _applied(PARTITION)
