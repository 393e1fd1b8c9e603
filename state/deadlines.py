"""When a partition's alert conditions may next change, so that the watch evaluates it then and
only then: the runs of Kafka's isr-expiration task that can remove a follower (the leader runs it
every replica.lag.time.max.ms / 2, ReplicaManager's isr-expiration task; phase: the epoch), and
each follower's own deadlines."""

from __future__ import annotations

import zlib

from replmon.state.alert_rules import ReplicaFacts
from replmon.state.legacy import CURRENT
from replmon.state.partition import PartitionLeader
from replmon.state.replica import ReplicaState

NEVER = 1 << 62


def run_after(replica_lag_time_max_ms: int, t: int) -> int:
    """Next isr-expiration run strictly after t (Kafka runs it every L/2; phase: epoch)."""
    half = max(1, replica_lag_time_max_ms // 2)
    return (t // half + 1) * half


def isr_expiration_due(p: PartitionLeader, first: int, every_run: bool) -> int:
    """The next isr-expiration run that may remove a follower from the ISR, given the next run
    of the schedule (`first`): the first run at or after the earliest time an ISR follower
    behind the leader's LEO fails isCaughtUp (lcu + L + 1); NEVER while every ISR follower is
    at the LEO, which Kafka's rule never calls out of sync (KAFKA-7152), so a partition whose
    followers are all caught up costs no run. An event that puts one behind brings its
    IsrExitImminent deadline forward (PartitionWatch.observe), which comes before lcu + L and
    schedules the run from there. Every run (`first`): with `every_run`, and under the older
    rule sets (no such exemption)."""
    if every_run or p.config.rule_set != CURRENT:
        return first
    lag_limit = p.config.replica_lag_time_max_ms
    earliest = NEVER
    followers = p.followers
    for r in p.isr:
        if r == p.leader:
            continue
        st = followers.get(r)
        if st is None:
            return first  # an ISR member the leader has no state of: out at the next run
        at = p.lag_passes_at_ms(st, lag_limit)
        if at is not None and at < earliest:
            earliest = at
    if earliest == NEVER:
        return NEVER
    return first if earliest <= first else run_after(lag_limit, earliest - 1)


def follower_deadline(
    p: PartitionLeader,
    st: ReplicaState,
    f: ReplicaFacts,
    exits: list[int] | None,
    flap_window_ms: int,
    deadline: int,
    now: int,
) -> int:
    """The earliest time before `deadline` at which a rule of this follower may change: its
    oldest ISR exit (`exits`, oldest first) leaving the flap window, and while in the ISR its
    lag passing the imminent fraction and the limit, and the limit after its last fetch."""
    if exits:
        deadline = min(deadline, exits[0] + flap_window_ms)
    if f.in_isr:
        lag_limit = p.config.replica_lag_time_max_ms
        imminent_at = p.lag_passes_at_ms(st, f.imminent_after_ms)
        out_of_sync_at = p.lag_passes_at_ms(st, lag_limit)
        if imminent_at is not None and out_of_sync_at is not None:  # None: exempt, nothing to come
            for d in (imminent_at, out_of_sync_at, st.last_fetch_ms + lag_limit + 1):
                if now < d < deadline:
                    deadline = d
    return deadline


# The repeats of a refresh period go out in waves (docs/outputs.md): a partition's point is
# rounded up to the next wave, a thirtieth of the period and at most REFRESH_WAVE_MS apart.
# Waves, not a point per partition: a partition its fetch sessions carry is woken for its repeat
# and nothing else, and a batch that must load its stored state (a lazy decode) pays per stored
# chunk it reads, so the few woken a batch at points of their own cost most of a whole decode on
# every such batch (bench/bucket_step.py --sessions). At most 10 s apart: a wave is a burst of
# status records (a thirtieth of the partitions would be 10,000 records at 100,000 partitions),
# and a longer period then means more, smaller waves, not larger ones further apart.
REFRESH_WAVES = 30
REFRESH_WAVE_MS = 10_000


def refresh_phase(cluster: str, topic: str, partition: int, refresh_ms: int) -> int:
    """Where in each refresh period (stream.status_refresh_ms) a healthy partition's status
    repeats: fixed per partition (the same in every process) and spread evenly over the period,
    so that partitions first seen together (a monitor's start) do not all repeat in the same
    micro-batch, period after period."""
    return zlib.crc32(f"{cluster}/{topic}/{partition}".encode()) % refresh_ms


def refresh_due(cluster: str, topic: str, partition: int, sent_ms: int, refresh_ms: int) -> int:
    """When the status sent at `sent_ms` is repeated: the start of the next refresh period at
    the partition's phase, rounded up to the next wave (REFRESH_WAVES, REFRESH_WAVE_MS)."""
    phase = refresh_phase(cluster, topic, partition, refresh_ms)
    due = ((sent_ms + phase) // refresh_ms + 1) * refresh_ms - phase
    grid = max(1, min(refresh_ms // REFRESH_WAVES, REFRESH_WAVE_MS))
    return -(-due // grid) * grid
