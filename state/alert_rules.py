"""When each alert holds: one small pure function per alert, over plain facts.

The monitor (`state/monitor.py`) derives the facts (with `state/explain.py`) and asks these
questions; `tests/state/test_alert_rules.py` holds one table per function, a reason per row.
What each alert means and who gets it: docs/alerts.md.
"""

from __future__ import annotations


# A follower still in the ISR, behind the leader LEO, past the warning fraction of
# replica.lag.time.max.ms but not yet failing Kafka's isCaughtUp.
def is_isr_exit_imminent(
    *, in_isr: bool, behind: bool, ms_since_caught_up: int, imminent_after_ms: int, out_of_sync: bool
) -> bool:
    return in_isr and behind and ms_since_caught_up > imminent_after_ms and not out_of_sync


# Kafka's getOutOfSyncReplicas would remove it (still in the ISR), or it has left the ISR after
# having been in it (a replica that never joined is bootstrapping, not out of sync).
def is_replica_out_of_sync(*, in_isr: bool, out_of_sync: bool, ever_in_isr: bool) -> bool:
    return (in_isr and out_of_sync) or (not in_isr and ever_in_isr)


# Partition.isUnderReplicated: fewer ISR members than assigned replicas (adding replicas excluded).
def is_under_replicated(*, isr_size: int, replica_count: int, adding_count: int) -> bool:
    return isr_size < replica_count - adding_count


# Partition.isUnderMinIsr, with min ISR capped at the replica count (3.7+, KAFKA-15221).
def is_under_min_isr(*, isr_size: int, effective_min_isr: int) -> bool:
    return isr_size < effective_min_isr


# Partition.isAtMinIsr, but only where losing one more replica matters: with min ISR equal to the
# replica count the partition is always "at min ISR" and that is the configuration, not a fault.
def is_at_min_isr(*, isr_size: int, effective_min_isr: int, replica_count: int) -> bool:
    return isr_size == effective_min_isr and replica_count > effective_min_isr


# The controller reports no leader (-1): nothing can be produced or consumed.
def is_offline(*, leader: int, has_metadata: bool) -> bool:
    return has_metadata and leader < 0


# The HW has been below the leader LEO for longer than the stall limit, and it is not frozen by
# the min ISR rule (then UnderMinIsr is the true cause: acks=all produce is rejected, nobody waits).
def is_hw_stalled(*, waiting_since_ms: int | None, now_ms: int, stall_ms: int, under_min_isr: bool) -> bool:
    return waiting_since_ms is not None and now_ms - waiting_since_ms > stall_ms and not under_min_isr


# At least `flap_count` ISR exits of this replica within the window ending now.
def is_isr_flapping(*, exits_in_window: int, flap_count: int) -> bool:
    return exits_in_window >= flap_count


# No event for the partition for longer than the telemetry gap.
def is_telemetry_missing(*, last_event_ms: int, now_ms: int, gap_ms: int) -> bool:
    return now_ms - last_event_ms > gap_ms


# A broker the controller fenced or that is in controlled shutdown (KIP-841 states).
def is_broker_unavailable(*, state: str) -> bool:
    return state in ("fenced", "shutting_down")
