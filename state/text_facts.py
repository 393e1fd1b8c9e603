"""The facts a partition's alert texts may name (the templates of state/texts.py), built only on
a transition, from the watch's state at that time."""

from __future__ import annotations

from typing import Protocol

from replmon.state import texts
from replmon.state.alert_roots import ReplicaRoots
from replmon.state.alert_rules import PartitionFacts, ReplicaFacts
from replmon.state.explain import ReplicaView
from replmon.state.monitor_config import MonitorConfig
from replmon.state.partition import PartitionLeader
from replmon.state.texts import fmt_clock

Facts = dict[str, object]  # a template's field -> its value


class Watched(Protocol):
    """What the texts read of a partition's watch (state/monitor.py PartitionWatch)."""

    name: str
    leader: PartitionLeader
    hw_waiting_since_ms: int | None
    last_event_ms: int

    def explain(self, r: int, now: int, cfg: MonitorConfig) -> ReplicaView: ...


def text_facts(
    watch: Watched, f: ReplicaFacts | PartitionFacts, now: int, cfg: MonitorConfig, roots: ReplicaRoots
) -> Facts:
    """Every fact a template of the rule's scope may name."""
    if isinstance(f, ReplicaFacts):
        facts = _replica_facts(watch, f.replica, now, cfg, roots)
        facts["exits"] = f.exits_in_window
        facts["window"] = f"{cfg.flap_window_ms / 1000:g} s"
        return facts
    facts = _partition_facts(watch)
    facts["holders"] = list(f.holders)
    facts["stalled"] = texts.fmt_seconds(now - (watch.hw_waiting_since_ms or now))
    facts["since"] = fmt_clock(watch.last_event_ms)
    facts["silent"] = texts.fmt_seconds(now - watch.last_event_ms)
    return facts


def replica_close(watch: Watched, name: str, cause: str, r: int) -> str:
    """The text that closes a per-replica episode for a reason of the partition (the replica
    became the leader, or left the assignment)."""
    return texts.close_text(name, cause, replica=r, partition=watch.name, leader=watch.leader.leader)


def _partition_facts(watch: Watched) -> Facts:
    p = watch.leader
    return {
        "partition": watch.name,
        "isr": list(p.isr),
        "replicas": list(p.replicas),
        "isr_size": len(p.isr),
        "replica_count": len(p.replicas),
        "hw": p.hw,
        "leader": p.leader,
        "leader_leo": p.leader_leo,
        "min_isr": p.effective_min_isr,
        "out": [r for r in p.replicas if r not in p.isr],
    }


def _replica_facts(watch: Watched, r: int, now: int, cfg: MonitorConfig, roots: ReplicaRoots) -> Facts:
    p = watch.leader
    st = p.followers[r]
    view = watch.explain(r, now, cfg)
    fetch = (
        f"no fetch since {fmt_clock(st.last_fetch_ms)}" if st.last_fetch_ms else "no fetch since the election"
    )
    limit = p.config.replica_lag_time_max_ms
    if st.last_caught_up_ms:  # 0 means never (Kafka's reset for a non-ISR follower)
        lag = f"not caught up for {texts.fmt_against_limit(now - st.last_caught_up_ms, limit)}"
    else:
        lag = f"never caught up since the election (limit {limit / 1000:g} s)"
    return {
        "replica": r,
        "partition": watch.name,
        "lag": lag,
        "lag_messages": view.lag_messages,
        "state": view.state,
        "fetch": fetch,
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "silent_since": fmt_clock(watch.last_event_ms),
        "since": fmt_clock(roots[r].since_ms if r in roots else now),
    }
