"""Out-of-sync rules of older Kafka versions, for what-if replays.

docs/kafka-rules.md §3.2, §9, §10.4 `legacy`.

Each rule answers "would that version's isr-expiration call this ISR follower out of sync now?".
Like the conformance model, they assume lcu and the last fetch start at the election time
(`reset_replica_state` sets `leo_update_ms` and `read_to_log_end_ms` to it).
"""

from __future__ import annotations

from .replica import ReplicaState, is_caught_up

CURRENT = "current"
V0_8 = "v0_8"
V0_9_TO_0_10_1 = "v0_9_to_0_10_1"
V0_10_2_TO_2_0 = "v0_10_2_to_2_0"
RULE_SETS = (CURRENT, V0_8, V0_9_TO_0_10_1, V0_10_2_TO_2_0)
LEGACY_RULE_SETS = (V0_8, V0_9_TO_0_10_1, V0_10_2_TO_2_0)


# Kafka 0.8.2: Partition.getOutOfSyncReplicas ("stuck": no LEO update for > L; "slow": LEO lags > max msgs).
def is_out_of_sync_v0_8(
    state: ReplicaState,
    leader_leo: int,
    now_ms: int,
    replica_lag_time_max_ms: int,
    replica_lag_max_messages: int,
) -> bool:
    if now_ms - state.leo_update_ms > replica_lag_time_max_ms:
        return True
    return state.leo >= 0 and leader_leo - state.leo > replica_lag_max_messages


# Kafka 0.9.0-0.10.1 (KAFKA-1546): lastCaughtUpTimeMs only from reads up to the read-time LEO; no exemption.
def is_out_of_sync_v0_9_to_0_10_1(state: ReplicaState, now_ms: int, replica_lag_time_max_ms: int) -> bool:
    return now_ms - state.read_to_log_end_ms > replica_lag_time_max_ms


# Kafka 0.10.2-2.0 (KAFKA-4485): today's lcu with previous-fetch credit, no LEO-equal exemption (KAFKA-7152).
def is_out_of_sync_v0_10_2_to_2_0(state: ReplicaState, now_ms: int, replica_lag_time_max_ms: int) -> bool:
    return now_ms - state.last_caught_up_ms > replica_lag_time_max_ms


def is_out_of_sync(
    rule_set: str,
    state: ReplicaState,
    leader_leo: int,
    now_ms: int,
    replica_lag_time_max_ms: int,
    replica_lag_max_messages: int,
) -> bool:
    """The out-of-sync test of `rule_set` for one ISR follower."""
    if rule_set == CURRENT:
        return not is_caught_up(state, leader_leo, now_ms, replica_lag_time_max_ms)
    if rule_set == V0_10_2_TO_2_0:
        return is_out_of_sync_v0_10_2_to_2_0(state, now_ms, replica_lag_time_max_ms)
    if rule_set == V0_9_TO_0_10_1:
        return is_out_of_sync_v0_9_to_0_10_1(state, now_ms, replica_lag_time_max_ms)
    if rule_set == V0_8:
        return is_out_of_sync_v0_8(
            state, leader_leo, now_ms, replica_lag_time_max_ms, replica_lag_max_messages
        )
    raise ValueError(f"unknown rule_set {rule_set!r}; expected one of {', '.join(RULE_SETS)}")
