"""Why a follower is where it is: the per-replica and per-partition explanations behind
`replica_status` and `partition_status` (docs/outputs.md).

Everything here reads a `PartitionLeader` and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from .partition import PartitionLeader
from .replica import ReplicaState

CAUGHT_UP = "caught_up"
SLOW = "slow"
STUCK = "stuck"
BOOTSTRAPPING = "bootstrapping"
FENCED = "fenced"
SHUTTING_DOWN = "shutting_down"
REPLICA_STATES = (CAUGHT_UP, SLOW, STUCK, BOOTSTRAPPING, FENCED, SHUTTING_DOWN)


@dataclass(slots=True)
class ReplicaView:
    replica: int
    state: str  # one of REPLICA_STATES
    leo: int  # as the leader recorded it (-1 unknown)
    leader_leo: int
    lag_messages: int  # leader_leo - leo (leader_leo when the LEO is unknown)
    last_caught_up_ms: int  # Kafka's lastCaughtUpTimeMs (0 = never)
    lag_ms: int  # now - last_caught_up_ms
    last_fetch_ms: int  # Kafka's lastFetchTimeMs (0 = never)
    in_isr: bool  # committed ISR
    caught_up: bool  # Kafka's isCaughtUp now
    out_of_sync_at_ms: int | None  # first time isCaughtUp fails if nothing changes; None: never (exempt)
    removable_by_ms: int | None  # out_of_sync_at_ms + L/2: the latest isr-expiration run that removes it
    eligible: bool  # Kafka's isReplicaIsrEligible
    holds_hw: bool  # its LEO is what the HW is waiting for


@dataclass(slots=True)
class PartitionView:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    maximal_isr: tuple[int, ...]
    hw: int
    leader_leo: int
    under_replicated: bool
    under_min_isr: bool
    at_min_isr: bool
    min_insync_replicas: int
    replica_lag_time_max_ms: int
    hw_holders: tuple[int, ...]  # followers whose LEO is the HW while it is below the leader LEO


# Kafka's "stuck" failure mode (Partition.getOutOfSyncReplicas comment): no accepted fetch for a while,
# counting from the election (or the replica's creation) when it has not fetched since.
def is_stuck(state: ReplicaState, now_ms: int, stuck_after_ms: int) -> bool:
    return now_ms - state.leo_update_ms > stuck_after_ms


# The state column's "caught up": at the leader LEO, or reached it within the grace period.
def is_recently_caught_up(state: ReplicaState, leader_leo: int, now_ms: int, caught_up_grace_ms: int) -> bool:
    return state.leo == leader_leo or now_ms - state.last_caught_up_ms <= caught_up_grace_ms


# Partition.maybeIncrementLeaderHW: the follower counts and its LEO is the HW below the leader LEO. Under the
# effective min ISR the HW waits for the ISR to grow, not for any follower's LEO (3.7+ gate).
def holds_hw(p: PartitionLeader, replica: int, now_ms: int) -> bool:
    state = p.followers.get(replica)
    return (
        state is not None
        and state.leo == p.hw < p.leader_leo
        and not p.under_min_isr
        and p.does_hw_wait_for(replica, now_ms)
    )


def hw_holders(p: PartitionLeader, now_ms: int) -> tuple[int, ...]:
    """The one definition of who holds the HW, for statuses and alert texts alike."""
    return tuple(sorted(r for r in p.followers if holds_hw(p, r, now_ms)))


# Why a follower is out of the ISR (or about to be), most specific first. The controller removes
# fenced and shutting-down brokers from every ISR (KIP-841, docs/kafka-rules.md §4); a replica
# being added by a reassignment has not joined yet; otherwise the leader's isr-expiration removed it for lag
# (now - lcu > L), or the controller did while its broker was registered (an election).
LAG = "lag"
BROKER_FENCED = "broker_fenced"
BROKER_SHUTTING_DOWN = "broker_shutting_down"
REASSIGNMENT = "reassignment"
CONTROLLER = "controller"
OUT_OF_ISR_CAUSES = (LAG, BROKER_FENCED, BROKER_SHUTTING_DOWN, REASSIGNMENT, CONTROLLER)


def out_of_isr_cause(p: PartitionLeader, replica: int, now_ms: int, *, ever_in_isr: bool) -> str:
    if replica in p.fenced:
        return BROKER_FENCED
    if replica in p.shutting_down:
        return BROKER_SHUTTING_DOWN
    if replica in p.adding_replicas and not ever_in_isr and replica not in p.isr:
        return REASSIGNMENT
    if replica in p.isr or not p.is_caught_up(replica, now_ms):
        return LAG
    return CONTROLLER


def classify_replica(
    p: PartitionLeader,
    replica: int,
    now_ms: int,
    *,
    ever_in_isr: bool,
    stuck_after_ms: int,
    caught_up_grace_ms: int,
) -> str:
    """One of REPLICA_STATES, in this order: fenced, shutting down, stuck, bootstrapping, caught up, slow."""
    state = p.followers[replica]
    if replica in p.fenced:
        return FENCED
    if replica in p.shutting_down:
        return SHUTTING_DOWN
    if is_stuck(state, now_ms, stuck_after_ms):
        return STUCK
    if not ever_in_isr and replica not in p.isr:
        return BOOTSTRAPPING
    if is_recently_caught_up(state, p.leader_leo, now_ms, caught_up_grace_ms):
        return CAUGHT_UP
    return SLOW


def lag_messages(leader_leo: int, leo: int) -> int:
    """How many messages a follower is behind the leader's LEO (all of them while its LEO is unknown)."""
    return leader_leo - leo if leo >= 0 else leader_leo


def explain_replica(
    p: PartitionLeader,
    replica: int,
    now_ms: int,
    *,
    ever_in_isr: bool,
    stuck_after_ms: int,  # alerts.stuck_after_ms and alerts.caught_up_grace_ms (MonitorConfig)
    caught_up_grace_ms: int,
) -> ReplicaView:
    state = p.followers.get(replica)
    if state is None:
        raise ValueError(
            f"replica {replica} is not a follower of this partition "
            f"(leader {p.leader}, replicas {list(p.replicas)})"
        )
    lag_max_ms = p.config.replica_lag_time_max_ms
    leader_leo = p.leader_leo
    out_of_sync_at_ms = p.lag_passes_at_ms(state, lag_max_ms)
    removable_by_ms = None if out_of_sync_at_ms is None else out_of_sync_at_ms + lag_max_ms // 2
    return ReplicaView(
        replica=replica,
        state=classify_replica(
            p,
            replica,
            now_ms,
            ever_in_isr=ever_in_isr,
            stuck_after_ms=stuck_after_ms,
            caught_up_grace_ms=caught_up_grace_ms,
        ),
        leo=state.leo,
        leader_leo=leader_leo,
        lag_messages=lag_messages(leader_leo, state.leo),
        last_caught_up_ms=state.last_caught_up_ms,
        lag_ms=now_ms - state.last_caught_up_ms,
        last_fetch_ms=state.last_fetch_ms,
        in_isr=replica in p.isr,
        caught_up=p.is_caught_up(replica, now_ms),
        out_of_sync_at_ms=out_of_sync_at_ms,
        removable_by_ms=removable_by_ms,
        eligible=p.is_isr_eligible(replica),
        holds_hw=holds_hw(p, replica, now_ms),
    )


def explain_partition(p: PartitionLeader, now_ms: int) -> PartitionView:
    return PartitionView(
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        replicas=p.replicas,
        isr=p.isr,
        maximal_isr=p.maximal_isr,
        hw=p.hw,
        leader_leo=p.leader_leo,
        under_replicated=p.under_replicated,
        under_min_isr=p.under_min_isr,
        at_min_isr=p.at_min_isr,
        min_insync_replicas=p.config.min_insync_replicas,
        replica_lag_time_max_ms=p.config.replica_lag_time_max_ms,
        hw_holders=hw_holders(p, now_ms),
    )
