"""What the partition leader records about one follower, and the rules that read it.

Mirrors `kafka.cluster.Replica` / `ReplicaState` (docs/kafka-rules.md §1.1, §1.2, §1.4, §2.1). Pure:
time is always an argument, nothing here reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_OFFSET = -1  # Kafka's "unknown" LEO / log start offset
NO_BROKER_EPOCH = -1  # a fetch that carried no broker epoch (FetchRequest.replicaEpoch default)


@dataclass(slots=True)
class ReplicaState:
    """Kafka's `ReplicaState` as the leader records it; the defaults are `ReplicaState.Empty` (§1.1)."""

    leo: int = UNKNOWN_OFFSET  # logEndOffset: fetch offset of the last accepted fetch
    log_start_offset: int = UNKNOWN_OFFSET  # follower's log start, as sent in its fetch
    last_caught_up_ms: int = 0  # lastCaughtUpTimeMs (lcu); 0 = never
    last_fetch_leader_leo: int = 0  # lastFetchLeaderLogEndOffset (lflo)
    last_fetch_ms: int = 0  # lastFetchTimeMs (lft)
    broker_epoch: int | None = None  # brokerEpoch from the last fetch (KIP-903); None = none since reset
    # Legacy rule sets (docs/kafka-rules.md §3.2, §10.4 `legacy`); both start at election / creation time.
    leo_update_ms: int = 0  # 0.8's logEndOffsetUpdateTimeMs: every accepted fetch
    read_to_log_end_ms: int = 0  # 0.9's lastCaughtUpTimeMs: only fetches at the leader LEO at read time
    # replmon's, not Kafka's: the fetch session (KIP-227) whose reads carry this follower's
    # progress while it idles at the leader LEO; 0 = none (state/sessions.py)
    session_id: int = 0


def new_replica_state(now_ms: int) -> ReplicaState:
    """`ReplicaState.Empty` for a replica object created at now_ms (e.g. added by a reassignment)."""
    return ReplicaState(leo_update_ms=now_ms, read_to_log_end_ms=now_ms)


# Kafka: ReplicaState.isCaughtUp (KAFKA-7152 LEO-equality exemption; `<=` on the lag).
def is_caught_up(state: ReplicaState, leader_leo: int, now_ms: int, replica_lag_time_max_ms: int) -> bool:
    return state.leo == leader_leo or now_ms - state.last_caught_up_ms <= replica_lag_time_max_ms


# Kafka: Replica.updateFetchStateOrThrow (the caller checks for a stale broker epoch: is_stale_broker_epoch).
def update_fetch_state(
    state: ReplicaState,
    *,
    fetch_offset: int,
    fetch_time_ms: int,
    leader_leo: int,
    log_start_offset: int | None = None,
    broker_epoch: int | None = None,
) -> None:
    """Record one accepted follower fetch (§1.2). `leader_leo` is the leader LEO read just before the read."""
    if fetch_offset >= leader_leo:  # caught up right now
        if fetch_time_ms > state.last_caught_up_ms:
            state.last_caught_up_ms = fetch_time_ms
        if fetch_time_ms > state.read_to_log_end_ms:
            state.read_to_log_end_ms = fetch_time_ms
    elif fetch_offset >= state.last_fetch_leader_leo:  # reached what the leader had at the previous fetch
        state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
    if leader_leo > state.last_fetch_leader_leo:  # max() since 3.3.0
        state.last_fetch_leader_leo = leader_leo
    state.last_fetch_ms = fetch_time_ms
    state.leo_update_ms = fetch_time_ms
    state.leo = fetch_offset
    if log_start_offset is not None:
        state.log_start_offset = log_start_offset
    state.broker_epoch = NO_BROKER_EPOCH if broker_epoch is None else broker_epoch


# Kafka: Replica.updateFetchStateOrThrow's KRaft check (KAFKA-15221, 3.7): an older incarnation is fenced.
def is_stale_broker_epoch(fetch_broker_epoch: int | None, cached_broker_epoch: int | None) -> bool:
    return (
        fetch_broker_epoch is not None
        and fetch_broker_epoch != NO_BROKER_EPOCH
        and cached_broker_epoch is not None
        and cached_broker_epoch > fetch_broker_epoch
    )


# Kafka: Replica.resetReplicaState, called by Partition.makeLeader only when the leader epoch grows (§1.4).
def reset_replica_state(
    state: ReplicaState, *, now_ms: int, leader_leo: int, is_new_leader: bool, is_follower_in_sync: bool
) -> None:
    state.last_caught_up_ms = now_ms if is_follower_in_sync else 0
    state.session_id = 0  # the follower adds the partition to its session again (a fetch of its own)
    if is_new_leader:
        state.leo = UNKNOWN_OFFSET
        state.log_start_offset = UNKNOWN_OFFSET
        state.last_fetch_leader_leo = UNKNOWN_OFFSET
        state.last_fetch_ms = 0
        state.broker_epoch = None
    else:
        state.last_fetch_leader_leo = leader_leo
        state.last_fetch_ms = now_ms if is_follower_in_sync else 0
    # Legacy rule sets: "assuming lcu and last fetch start at the election time" (§10.4).
    state.leo_update_ms = now_ms
    state.read_to_log_end_ms = now_ms


# Kafka: KRaftMetadataCache.isBrokerEpochIsrEligible (KIP-903); an unknown cached epoch is not checked here.
def is_broker_epoch_isr_eligible(stored_broker_epoch: int | None, cached_broker_epoch: int | None) -> bool:
    if cached_broker_epoch is None:
        return True
    return stored_broker_epoch is not None and stored_broker_epoch in (NO_BROKER_EPOCH, cached_broker_epoch)
