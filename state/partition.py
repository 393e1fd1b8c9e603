"""One partition as its leader sees it: ISR membership and high-watermark progress.

Mirrors `kafka.cluster.Partition` (docs/kafka-rules.md §1.3-§5, §7) for one partition led by one broker.
Pure and synchronous: time is always an argument, AlterPartition answers arrive as calls.
Called once per event on the streaming hot path, so it keeps tuples/sets and small objects only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, NamedTuple

from .legacy import CURRENT, RULE_SETS, is_out_of_sync
from .replica import (
    ReplicaState,
    is_broker_epoch_isr_eligible,
    is_caught_up,
    is_stale_broker_epoch,
    new_replica_state,
    reset_replica_state,
    update_fetch_state,
)

IMMEDIATE = "immediate"
MANUAL = "manual"
PENDING_EXPAND = "expand"
PENDING_SHRINK = "shrink"

# Partition.handleAlterPartitionError: these revert to the last committed state.
REVERTING_ALTER_PARTITION_ERRORS = frozenset({"INELIGIBLE_REPLICA", "OPERATION_NOT_ATTEMPTED"})
# ... these leave the change pending and are not retried, until new metadata arrives.
NON_RETRIABLE_ALTER_PARTITION_ERRORS = frozenset(
    {
        "UNKNOWN_TOPIC_OR_PARTITION",
        "UNKNOWN_TOPIC_ID",
        "FENCED_LEADER_EPOCH",
        "INVALID_UPDATE_VERSION",
        "INVALID_REQUEST",
        "NEW_LEADER_ELECTED",
    }
)
# Anything else stays pending and is resubmitted.


def _sorted_ids(ids: Iterable[int]) -> tuple[int, ...]:
    return tuple(sorted(set(ids)))


# ---- the ISR state: one immutable value (Kafka's PartitionState) ------------------------------------
# Kafka keeps a partition's ISR as one `partitionState`, replaced whole on every change: the
# committed ISR, or an AlterPartition in flight (expand or shrink) with the ISR it started from.
# Each derives `maximal_isr` (the ISR the HW waits for) and `is_inflight`.


@dataclass(frozen=True, slots=True)
class CommittedIsr:
    """The ISR the controller last committed; no change in flight (Kafka: CommittedPartitionState)."""

    isr: tuple[int, ...]
    maximal_isr: tuple[int, ...] = field(init=False, compare=False)
    is_inflight: ClassVar[bool] = False
    kind: ClassVar[str | None] = None  # how the state format names it ("pending": none)
    replica_ids: ClassVar[tuple[int, ...]] = ()
    retry: ClassVar[bool] = False

    def __post_init__(self) -> None:
        # Kafka: CommittedPartitionState.maximalIsr = isr (the very tuple: the state format relies on it)
        object.__setattr__(self, "maximal_isr", self.isr)


@dataclass(frozen=True, slots=True)
class PendingExpandIsr:
    """An AlterPartition adding replicas is in flight (Kafka: PendingExpandIsr); `isr` is the
    last committed ISR, `retry` whether the leader resubmits it."""

    isr: tuple[int, ...]
    replica_ids: tuple[int, ...]
    retry: bool = True
    maximal_isr: tuple[int, ...] = field(init=False, compare=False)
    is_inflight: ClassVar[bool] = True
    kind: ClassVar[str | None] = PENDING_EXPAND

    def __post_init__(self) -> None:
        # Kafka: PendingExpandIsr.maximalIsr = isr + newInSyncReplicaId: the HW waits for it at once
        object.__setattr__(self, "maximal_isr", _sorted_ids(self.isr + self.replica_ids))


@dataclass(frozen=True, slots=True)
class PendingShrinkIsr:
    """An AlterPartition removing replicas is in flight (Kafka: PendingShrinkIsr); `isr` is the
    last committed ISR, `retry` whether the leader resubmits it."""

    isr: tuple[int, ...]
    replica_ids: tuple[int, ...]
    retry: bool = True
    maximal_isr: tuple[int, ...] = field(init=False, compare=False)
    is_inflight: ClassVar[bool] = True
    kind: ClassVar[str | None] = PENDING_SHRINK

    def __post_init__(self) -> None:
        # Kafka: PendingShrinkIsr.maximalIsr = lastCommittedState.isr: the HW still waits for the leaving
        object.__setattr__(self, "maximal_isr", self.isr)


IsrState = CommittedIsr | PendingExpandIsr | PendingShrinkIsr


def isr_after_commit(state: PendingExpandIsr | PendingShrinkIsr) -> CommittedIsr:
    # Kafka: Partition.handleAlterPartitionUpdate commits the ISR the change proposed.
    if isinstance(state, PendingExpandIsr):
        return CommittedIsr(state.maximal_isr)
    removed = state.replica_ids
    return CommittedIsr(tuple(r for r in state.isr if r not in removed))


def does_error_revert(error: str | None) -> bool:
    # Kafka: Partition.handleAlterPartitionError: these errors go back to the last committed state.
    return error in REVERTING_ALTER_PARTITION_ERRORS


def is_error_retried(error: str | None) -> bool:
    # Kafka: Partition.handleAlterPartitionError: other errors stay pending; these wait for new metadata.
    return error not in NON_RETRIABLE_ALTER_PARTITION_ERRORS


def isr_state_from_stored(
    isr: tuple[int, ...], pending: str | None, replica_ids: tuple[int, ...], retry: bool
) -> IsrState:
    """The ISR state the state format stores as its fields (`pending` is "expand", "shrink" or
    None; `maximal_isr` is derived, so it is not read)."""
    if pending is None:
        return CommittedIsr(isr)
    if pending == PENDING_EXPAND:
        return PendingExpandIsr(isr, replica_ids, retry)
    if pending == PENDING_SHRINK:
        return PendingShrinkIsr(isr, replica_ids, retry)
    raise ValueError(f"pending must be {PENDING_EXPAND!r}, {PENDING_SHRINK!r} or None, got {pending!r}")


@dataclass(frozen=True, slots=True)
class PartitionConfig:
    """A partition's config; the defaults are Kafka's broker defaults, stated only here (replmon's
    `rules` settings take theirs from KAFKA_DEFAULTS)."""

    replica_lag_time_max_ms: int = 30000  # Kafka's default since 2.5 (KIP-537); 10000 before
    min_insync_replicas: int = 1  # Kafka's default
    alter_partition: str = IMMEDIATE  # or "manual" (docs/kafka-rules.md §10.1)
    rule_set: str = CURRENT  # out-of-sync rule isr_expiration uses (legacy.RULE_SETS)
    replica_lag_max_messages: int = 4000  # Kafka 0.8's default; only for rule_set v0_8

    def __post_init__(self) -> None:
        if self.replica_lag_time_max_ms < 1:
            raise ValueError(f"replica_lag_time_max_ms must be >= 1, got {self.replica_lag_time_max_ms}")
        if self.min_insync_replicas < 1:
            raise ValueError(f"min_insync_replicas must be >= 1, got {self.min_insync_replicas}")
        if self.alter_partition not in (IMMEDIATE, MANUAL):
            raise ValueError(f"alter_partition must be 'immediate' or 'manual', got {self.alter_partition!r}")
        if self.rule_set not in RULE_SETS:
            raise ValueError(f"rule_set must be one of {', '.join(RULE_SETS)}, got {self.rule_set!r}")
        if self.replica_lag_max_messages < 0:
            raise ValueError(f"replica_lag_max_messages must be >= 0, got {self.replica_lag_max_messages}")


KAFKA_DEFAULTS = PartitionConfig()


class FetchOutcome(NamedTuple):
    accepted: bool
    reject_reason: str | None  # "unassigned_replica", "offset_above_leader_leo", "offset_below_log_start",
    # "stale_broker_epoch", "error:<ERR>", "diverging_epoch"
    response_hw: int  # the HW before the fetch (Partition.readRecords' initialHighWatermark)
    leo_changed: bool
    hw_changed: bool


_new_outcome = tuple.__new__  # FetchOutcome without the keyword-handling __new__: fetch() is the hot path


class PartitionLeader:
    """One partition as its leader sees it. Read the attributes; change state only through the methods
    (except `config`, which the streaming job replaces when metadata changes L or min ISR)."""

    __slots__ = (
        "adding_replicas",
        "broker_epochs",
        "config",
        "election_ms",
        "failed_isr_updates",
        "fenced",
        "followers",
        "hw",
        "isr_expands",
        "isr_shrinks",
        "isr_state",
        "leader",
        "leader_epoch",
        "leader_epoch_start_offset",
        "leader_leo",
        "leader_log_start_offset",
        "replicas",
        "shutting_down",
    )

    def __init__(
        self,
        *,
        config: PartitionConfig,
        now_ms: int,
        leader: int,
        leader_epoch: int,
        replicas: Iterable[int],
        isr: Iterable[int],
        leader_leo: int,
        hw: int,
        leader_epoch_start_offset: int | None = None,
        adding_replicas: Iterable[int] = (),
        followers: Mapping[int, Mapping[str, Any] | ReplicaState] | None = None,
        fenced: Iterable[int] = (),
        shutting_down: Iterable[int] = (),
        broker_epochs: Mapping[int, int] | None = None,
        leader_log_start_offset: int = 0,
    ) -> None:
        """The state just after `Partition.makeLeader` with a new leader epoch at now_ms (§10.2)."""
        self.config = config
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)  # the assignment, leader included (leader -1: not known yet)
        self.adding_replicas = tuple(adding_replicas)
        self.isr_state: IsrState = CommittedIsr(_sorted_ids(isr))
        self.leader_leo = leader_leo
        self.hw = hw
        self.leader_epoch_start_offset = (
            leader_leo if leader_epoch_start_offset is None else leader_epoch_start_offset
        )
        self.leader_log_start_offset = leader_log_start_offset
        self.election_ms = now_ms
        self.fenced: set[int] = set(fenced)
        self.shutting_down: set[int] = set(shutting_down)
        self.broker_epochs: dict[int, int] = dict(broker_epochs or {})
        self.isr_expands = self.isr_shrinks = self.failed_isr_updates = 0
        self.followers: dict[int, ReplicaState] = {}
        for r in self.replicas:
            if r != leader:
                state = new_replica_state(now_ms)
                reset_replica_state(
                    state,
                    now_ms=now_ms,
                    leader_leo=leader_leo,
                    is_new_leader=True,
                    is_follower_in_sync=r in self.isr_state.isr,
                )
                self.followers[r] = state
        for r, override in (followers or {}).items():
            if r not in self.followers:
                raise ValueError(
                    f"followers: {r} is not a follower of this partition (replicas {list(self.replicas)}, "
                    f"leader {leader})"
                )
            self.followers[r] = _override(self.followers[r], r, override)
        self._maybe_increment_hw(now_ms)  # makeLeader always ends with maybeIncrementLeaderHW

    # ---- the ISR state, read as fields (the state format stores them so) ---------------------------------

    @property
    def isr(self) -> tuple[int, ...]:
        # Kafka: Partition.inSyncReplicaIds = partitionState.isr: the committed ISR, also during a change.
        return self.isr_state.isr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.isr_state.maximal_isr

    @property
    def pending(self) -> str | None:
        """The change in flight: "expand", "shrink" or None."""
        return self.isr_state.kind

    @property
    def pending_ids(self) -> tuple[int, ...]:
        """The replicas the change in flight adds or removes; () when none."""
        return self.isr_state.replica_ids

    @property
    def pending_retry(self) -> bool:
        """Whether the change in flight is resubmitted (False when none)."""
        return self.isr_state.retry

    # ---- partition predicates (docs/kafka-rules.md §3.4, §7) -----------------------------------------------

    @property
    def effective_min_isr(self) -> int:
        # Kafka: Partition.effectiveMinIsr = min(min.insync.replicas, assigned replicas incl. adding) (3.7).
        return min(self.config.min_insync_replicas, len(self.replicas))

    @property
    def under_min_isr(self) -> bool:
        # Kafka: Partition.isUnderMinIsr (committed ISR).
        return len(self.isr_state.isr) < self.effective_min_isr

    @property
    def at_min_isr(self) -> bool:
        # Kafka: Partition.isAtMinIsr (committed ISR).
        return len(self.isr_state.isr) == self.effective_min_isr

    @property
    def under_replicated(self) -> bool:
        # Kafka: Partition.isUnderReplicated; the factor excludes adding replicas (OngoingReassignmentState).
        return len(self.isr_state.isr) < len(self.replicas) - len(self.adding_replicas)

    # ---- per-follower rules ---------------------------------------------------------------------------

    def is_caught_up(self, replica: int, now_ms: int) -> bool:
        # Kafka: ReplicaState.isCaughtUp against the leader LEO now (the leader is trivially caught up).
        if replica == self.leader:
            return True
        state = self.followers.get(replica)
        return state is not None and is_caught_up(
            state, self.leader_leo, now_ms, self.config.replica_lag_time_max_ms
        )

    def lag_passes_at_ms(self, state: ReplicaState, limit_ms: int) -> int | None:
        """The first time a follower's lag (now - lastCaughtUpTimeMs) passes `limit_ms` if nothing
        changes: lcu + limit + 1, where isCaughtUp flips to false for limit L. None when it never
        does: the follower is at the leader LEO and the rule set exempts it (KAFKA-7152's
        LEO-equality exemption; the older rule sets have none). The one definition of the
        caught-up flip time: alert deadlines, IsrExitImminent and replica_status use it."""
        if state.leo == self.leader_leo and self.config.rule_set == CURRENT:
            return None
        return state.last_caught_up_ms + limit_ms + 1

    def is_isr_eligible(self, replica: int) -> bool:
        # Kafka: Partition.isReplicaIsrEligible (KIP-841 fenced / controlled shutdown, KIP-903 broker epoch).
        state = self.followers.get(replica)
        return (
            state is not None
            and replica not in self.fenced
            and replica not in self.shutting_down
            and is_broker_epoch_isr_eligible(state.broker_epoch, self.broker_epochs.get(replica))
        )

    def is_follower_in_sync(self, replica: int) -> bool:
        # Kafka: Partition.isFollowerInSync: LEO >= HW and >= epoch start offset (KAFKA-7128); no time rule.
        state = self.followers.get(replica)
        return state is not None and state.leo >= self.hw and state.leo >= self.leader_epoch_start_offset

    def may_join_isr(self, replica: int) -> bool:
        # Kafka: Partition.maybeExpandIsr's test (canAddReplicaToIsr && isFollowerInSync).
        state = self.isr_state
        return (
            not state.is_inflight
            and replica not in state.isr
            and self.is_isr_eligible(replica)
            and self.is_follower_in_sync(replica)
        )

    def does_hw_wait_for(self, replica: int, now_ms: int) -> bool:
        # Kafka: Partition.maybeIncrementLeaderHW: maximal ISR, or caught up and eligible (KAFKA-4485/15021).
        return replica in self.isr_state.maximal_isr or (
            self.is_caught_up(replica, now_ms) and self.is_isr_eligible(replica)
        )

    def lags_out(self, replica: int, now_ms: int, rule_set: str | None = None) -> bool:
        """Whether the rule set's out-of-sync test (the partition's, unless given) holds for the
        follower now, in the ISR or not; True for an unknown follower."""
        state = self.followers.get(replica)
        return state is None or is_out_of_sync(
            self.config.rule_set if rule_set is None else rule_set,
            state,
            self.leader_leo,
            now_ms,
            self.config.replica_lag_time_max_ms,
            self.config.replica_lag_max_messages,
        )

    def out_of_sync_replicas(
        self, now_ms: int, *, ignore_inflight: bool = False, rule_set: str | None = None
    ) -> tuple[int, ...]:
        # Kafka: Partition.getOutOfSyncReplicas: committed ISR minus the leader; none while a change pends.
        state = self.isr_state
        if state.is_inflight and not ignore_inflight:
            return ()
        return tuple(r for r in state.isr if r != self.leader and self.lags_out(r, now_ms, rule_set))

    # ---- events ---------------------------------------------------------------------------------------

    def fetch(
        self,
        now_ms: int,
        replica: int,
        fetch_offset: int,
        *,
        broker_epoch: int | None = None,
        log_start_offset: int | None = None,
        error: str | None = None,
        diverging_epoch: int | bool | None = None,
    ) -> FetchOutcome:
        """A follower fetch the leader first processed at now_ms (Partition.fetchRecords, §1.2-§1.3)."""
        hw_before = self.hw
        state = self.followers.get(replica)
        if (
            error is not None
            or state is None
            or fetch_offset > self.leader_leo
            or (diverging_epoch is not None and diverging_epoch is not False)
            or fetch_offset < self.leader_log_start_offset
            or (
                broker_epoch is not None
                and is_stale_broker_epoch(broker_epoch, self.broker_epochs.get(replica))
            )
        ):
            return _new_outcome(
                FetchOutcome,
                (
                    False,
                    self._reject_reason(replica, fetch_offset, broker_epoch, error, diverging_epoch),
                    hw_before,
                    False,
                    False,
                ),
            )
        leo_before = state.leo
        update_fetch_state(
            state,
            fetch_offset=fetch_offset,
            fetch_time_ms=now_ms,
            leader_leo=self.leader_leo,
            log_start_offset=log_start_offset,
            broker_epoch=broker_epoch,
        )
        isr_state = self.isr_state
        if not isr_state.is_inflight and replica not in isr_state.isr and self.may_join_isr(replica):
            # against the HW before this fetch's update
            self._propose(now_ms, PendingExpandIsr(isr_state.isr, (replica,)))
        if fetch_offset != leo_before:
            self._maybe_increment_hw(now_ms)
            return _new_outcome(FetchOutcome, (True, None, hw_before, True, self.hw != hw_before))
        return _new_outcome(FetchOutcome, (True, None, hw_before, False, self.hw != hw_before))

    def _reject_reason(
        self,
        replica: int,
        fetch_offset: int,
        broker_epoch: int | None,
        error: str | None,
        diverging_epoch: int | bool | None,
    ) -> str:
        # Why Partition.fetchRecords / ReplicaManager.readFromLog would not update the follower state (§1.2).
        if error is not None:
            return "error:" + error
        if replica not in self.followers:  # Partition.followerReplicaOrThrow
            return "unassigned_replica"
        if diverging_epoch is not None and diverging_epoch is not False:
            return "diverging_epoch"
        if fetch_offset > self.leader_leo:  # LocalLog.read: OffsetOutOfRangeException
            return "offset_above_leader_leo"
        if fetch_offset < self.leader_log_start_offset:
            return "offset_below_log_start"
        return "stale_broker_epoch"  # Replica.updateFetchStateOrThrow (KAFKA-15221)

    def append(self, now_ms: int, leader_leo: int) -> bool:
        """The leader LEO grew to leader_leo (Partition.appendRecordsToLeader); returns whether the HW moved.
        An append that does not grow the LEO is ignored (docs/events.md)."""
        if leader_leo <= self.leader_leo:
            return False
        self.leader_leo = leader_leo
        return self._maybe_increment_hw(now_ms)

    def isr_expiration(self, now_ms: int) -> tuple[int, ...]:
        """One run of the `isr-expiration` task (Partition.maybeShrinkIsr); returns the shrink proposed."""
        isr_state = self.isr_state
        if isr_state.is_inflight:
            return ()
        out = self.out_of_sync_replicas(now_ms)
        if out:
            self._propose(now_ms, PendingShrinkIsr(isr_state.isr, out))
        return out

    def alter_partition_response(self, now_ms: int, result: str, error: str | None = None) -> None:
        """The controller's answer to the pending AlterPartition.

        Kafka: Partition.handleAlterPartitionUpdate / handleAlterPartitionError."""
        if result not in ("success", "error"):
            raise ValueError(f"result must be 'success' or 'error', got {result!r}")
        state = self.isr_state
        if isinstance(state, CommittedIsr):  # stale answer: the state changed meanwhile
            return
        if result == "success":
            self._commit_pending(now_ms, state)
            return
        self.failed_isr_updates += 1
        if does_error_revert(error):
            self.isr_state = CommittedIsr(state.isr)
        else:
            self.isr_state = replace(state, retry=is_error_retried(error))

    def controller_update(
        self,
        now_ms: int,
        *,
        isr: Iterable[int],
        leader_epoch: int,
        is_new_leader: bool = False,
        replicas: Iterable[int] | None = None,
        adding_replicas: Iterable[int] | None = None,
        leader_leo: int | None = None,
        hw: int | None = None,
    ) -> None:
        """LeaderAndIsr / a metadata delta while this broker stays or becomes leader.

        Kafka: Partition.makeLeader."""
        if leader_epoch < self.leader_epoch:  # an older epoch: stale, ignored
            return
        if replicas is not None:
            self._set_assignment(now_ms, replicas, () if adding_replicas is None else adding_replicas)
        elif adding_replicas is not None:
            self.adding_replicas = tuple(adding_replicas)
        if leader_leo is not None:
            self.leader_leo = leader_leo
        if hw is not None:
            self.hw = hw
        new_isr = _sorted_ids(isr)
        if leader_epoch > self.leader_epoch:  # §1.4: resets only when the leader epoch increases
            self.leader_epoch = leader_epoch
            self.leader_epoch_start_offset = self.leader_leo
            self.election_ms = now_ms
            for r, state in self.followers.items():
                reset_replica_state(
                    state,
                    now_ms=now_ms,
                    leader_leo=self.leader_leo,
                    is_new_leader=is_new_leader,
                    is_follower_in_sync=r in new_isr,
                )
        self.isr_state = CommittedIsr(new_isr)  # a new CommittedPartitionState: a change in flight is dropped
        self._maybe_increment_hw(now_ms)  # makeLeader always ends with maybeIncrementLeaderHW

    def set_broker_state(
        self,
        replica: int,
        *,
        fenced: bool | None = None,
        shutting_down: bool | None = None,
        broker_epoch: int | None = None,
    ) -> None:
        """The leader's metadata-cache view of a broker (KRaftMetadataCache). Nothing is recomputed."""
        if fenced is not None:
            (self.fenced.add if fenced else self.fenced.discard)(replica)
        if shutting_down is not None:
            (self.shutting_down.add if shutting_down else self.shutting_down.discard)(replica)
        if broker_epoch is not None:
            self.broker_epochs[replica] = broker_epoch

    # ---- internals ------------------------------------------------------------------------------------

    def _maybe_increment_hw(self, now_ms: int) -> bool:
        # Kafka: Partition.maybeIncrementLeaderHW + UnifiedLog.maybeIncrementHighWatermark (never decreases).
        isr_size = len(self.isr_state.isr)
        config = self.config
        if isr_size < config.min_insync_replicas and isr_size < len(
            self.replicas
        ):  # 3.7+ effective min-ISR gate
            return False
        candidate = self.leader_leo
        for r, state in self.followers.items():
            leo = state.leo
            if leo < candidate and self.does_hw_wait_for(r, now_ms):
                candidate = leo
        if candidate > self.hw:
            self.hw = candidate
            return True
        return False

    def _propose(self, now_ms: int, change: PendingExpandIsr | PendingShrinkIsr) -> None:
        # Kafka: Partition.prepareIsrExpand / prepareIsrShrink + submitAlterPartition.
        self.isr_state = change
        if self.config.alter_partition == IMMEDIATE:
            self._commit_pending(now_ms, change)

    def _commit_pending(self, now_ms: int, change: PendingExpandIsr | PendingShrinkIsr) -> None:
        # Kafka: Partition.handleAlterPartitionUpdate: the controller's ISR is committed, then the HW may move
        self.isr_state = isr_after_commit(change)
        if isinstance(change, PendingExpandIsr):
            self.isr_expands += 1
        else:
            self.isr_shrinks += 1
        self._maybe_increment_hw(now_ms)

    def _set_assignment(self, now_ms: int, replicas: Iterable[int], adding_replicas: Iterable[int]) -> None:
        # Kafka: Partition.updateAssignmentAndIsr: new replicas start as ReplicaState.Empty, removed ones go.
        self.replicas = tuple(replicas)
        self.adding_replicas = tuple(adding_replicas)
        followers = {}
        for r in self.replicas:
            if r != self.leader:
                state = self.followers.get(r)
                followers[r] = new_replica_state(now_ms) if state is None else state
        self.followers = followers


_REPLICA_STATE_FIELDS = frozenset(ReplicaState.__slots__)


def _override(base: ReplicaState, replica: int, override: Mapping[str, Any] | ReplicaState) -> ReplicaState:
    """A follower state given to the constructor: a ReplicaState as is, or fields over the reset state."""
    if isinstance(override, ReplicaState):
        return override
    unknown = set(override) - _REPLICA_STATE_FIELDS
    if unknown:
        raise ValueError(
            f"follower {replica}: unknown ReplicaState field(s) {sorted(unknown)}; "
            f"known: {sorted(_REPLICA_STATE_FIELDS)}"
        )
    for name, value in override.items():
        setattr(base, name, value)
    return base
