"""Which alert explains a partition's alert (docs/alerts.md, root causes): the `caused_by` a
firing episode carries (alert_rules.ROOT_OF_*), from the broker outages and fetcher stalls of its
cluster; and the brokers each record depends on, for the cluster step (state/cluster.py)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from replmon.state import alert_rules as rules
from replmon.state.alert_rules import PartitionFacts, ReplicaFacts
from replmon.state.alerts import AlertBook, AlertRecord, derived
from replmon.state.explain import BROKER_FENCED, BROKER_SHUTTING_DOWN
from replmon.state.fetcher import FetcherRoot, fetcher_id, fetcher_key
from replmon.state.partition import PartitionLeader
from replmon.state.root_cause import BrokerRoot, root_id

BROKER_CAUSES = (BROKER_FENCED, BROKER_SHUTTING_DOWN)

Root = BrokerRoot | FetcherRoot
# A cluster's roots: an unavailable broker by its id, a stalled fetcher by its fetcher.fetcher_key
Roots = Mapping[Any, Root]
# One partition's: each replica's outage or stalled fetcher
ReplicaRoots = dict[int, Root]


class Watched(Protocol):
    """What the roots read of a partition's watch (state/monitor.py PartitionWatch)."""

    cluster: str
    topic: str
    partition: int
    name: str
    leader: PartitionLeader
    book: AlertBook


def explains_lag(root: Root | None) -> bool:
    """A root cause that stops a replica's fetching: a stalled fetcher (a fenced or
    shutting-down broker explains the ISR exit itself, not lag before it; a silent broker is
    the cluster step's to decide: state/cluster.py)."""
    return isinstance(root, FetcherRoot)


def roots_here(watch: Watched, roots: Roots, num_replica_fetchers: int) -> ReplicaRoots:
    """Replica -> the outage or fetcher stall that explains it, for this partition."""
    here: ReplicaRoots = {k: v for k, v in roots.items() if isinstance(k, int)}
    leader = watch.leader.leader
    if len(here) < len(roots) and leader >= 0:
        k = fetcher_id(watch.topic, watch.partition, num_replica_fetchers)
        for r in watch.leader.followers:
            root = roots.get(fetcher_key(r, leader, k))
            if root is not None and r not in here:
                here[r] = root
    return here


def root_of(
    watch: Watched, how: str | None, f: ReplicaFacts | PartitionFacts, cause: str, roots: ReplicaRoots
) -> str | None:
    """The alert that explains a firing episode (alert_rules.ROOT_OF_*), or None."""
    p = watch.leader
    if isinstance(f, PartitionFacts):
        if how == rules.ROOT_OF_MISSING:  # a missing replica's own ReplicaOutOfSync may explain it
            return _partition_root(watch, roots)
        if how == rules.ROOT_OF_REPLICAS:
            return _single_root(roots, p.replicas)
        if how == rules.ROOT_OF_HOLDERS:
            return _single_root(roots, f.holders, every=True)
        return root_id(roots, p.leader)  # ROOT_OF_LEADER
    r = f.replica
    if how == rules.ROOT_OF_REPLICA:
        return root_id(roots, r)
    # a silent leader makes every follower look stuck: it is the cause
    leader_root = roots[p.leader].alert_id if explains_lag(roots.get(p.leader)) else None
    if how == rules.ROOT_OF_REPLICA_OR_LEADER:
        return root_id(roots, r) or leader_root
    if cause in BROKER_CAUSES or explains_lag(roots.get(r)):  # ROOT_OF_OUT_OF_SYNC
        return root_id(roots, r)
    return leader_root


def _partition_root(watch: Watched, roots: ReplicaRoots) -> str | None:
    """The alert that explains every replica missing from the ISR: a broker's
    BrokerUnavailable, or a missing replica's own ReplicaOutOfSync; of several, the latest
    to start (the one that made the partition cross its threshold). None when a missing
    replica has no such alert (then the partition alert stands on its own)."""
    p = watch.leader
    found = []
    for r in p.replicas:
        if r in p.isr or r in p.adding_replicas:
            continue
        root = roots.get(r)
        if root is not None:
            found.append((root.since_ms, root.alert_id))
            continue
        own = watch.book.open.get(("ReplicaOutOfSync", f"{watch.cluster}/{watch.name}/{r}"))
        if own is None:
            return None
        found.append((own.started_ms, own.alert_id))
    return max(found)[1] if found else None


def _single_root(roots: ReplicaRoots, brokers: Collection[int], every: bool = False) -> str | None:
    """The latest outage among the given brokers (with `every`, only if all of them are
    unavailable)."""
    found = [(roots[b].since_ms, roots[b].alert_id) for b in brokers if b in roots]
    if every and len(found) < len(brokers):
        return None
    return max(found)[1] if found else None


def with_brokers(
    p: PartitionLeader, records: Sequence[AlertRecord], holders: Sequence[int]
) -> list[AlertRecord]:
    """The partition's new records, each with the brokers it depends on, for the cluster step:
    the partition's leader and replicas, and for a partition alert the brokers whose absence
    explains it (the replicas missing from the ISR, the HW holders, every replica when offline)."""
    missing = [r for r in p.replicas if r not in p.isr and r not in p.adding_replicas]
    out = []
    for rec in records:
        name = rec["name"]
        if rec["replica"] is not None:
            brokers = [rec["replica"]]
        elif name == "HighWatermarkStalled":
            brokers = list(holders)
        elif name == "OfflinePartition":
            brokers = list(p.replicas)
        elif name == "TelemetryMissing":
            brokers = [p.leader] if p.leader >= 0 else []
        else:
            brokers = missing
        out.append(derived(rec, leader=p.leader, replicas=list(p.replicas), brokers=brokers))
    return out
