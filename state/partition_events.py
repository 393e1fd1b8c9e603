"""How one event changes one partition's state: a new partition from its first event, a fetch
and a metadata event applied, and the test of an event behind the partition's time. The events
are tuples in the order of state/events.py's EVENT_FIELDS."""

from __future__ import annotations

import json
from typing import Any

from replmon.state import sessions
from replmon.state.broker_replay import apply_brokers
from replmon.state.events import (
    ADDING,
    BROKER_EPOCH,
    CLUSTER,
    DIVERGING,
    ERROR,
    EVENT_FIELDS,
    FETCH_OFFSET,
    HW,
    ISR,
    LAG_MAX,
    LEADER,
    LEADER_EPOCH,
    LEADER_LEO,
    LOG_START,
    MIN_ISR,
    RAW,
    REPLICA,
    REPLICAS,
    SESSION_ID,
    TS,
)
from replmon.state.monitor import MonitorConfig, PartitionWatch
from replmon.state.partition import PartitionLeader

# Fetch rejections that mean the input disagrees with what replmon knows: quarantined.
QUARANTINED_REJECTIONS = {"unassigned_replica", "stale_broker_epoch"}


def new_leader(ev: Any, ts: int, cfg: MonitorConfig, auto: bool) -> PartitionLeader:
    """A partition's leader state from its first event: its metadata, or (`auto`) a fetch or
    an append before any metadata (the assignment is learnt from the fetches)."""
    if auto:
        leader = PartitionLeader(
            config=cfg.partition_config(),
            now_ms=ts,
            leader=-1,
            leader_epoch=-1,
            replicas=(),
            isr=(),
            leader_leo=max(ev[LEADER_LEO] or 0, 0),
            hw=0,
        )
    else:
        lag, min_isr = overrides(ev)
        leo = ev[LEADER_LEO] if ev[LEADER_LEO] is not None else 0
        hw = ev[HW] if ev[HW] is not None else 0
        leader = PartitionLeader(
            config=cfg.partition_config(lag, min_isr),
            now_ms=ts,
            leader=ev[LEADER],
            leader_epoch=ev[LEADER_EPOCH],
            replicas=tuple(ev[REPLICAS]),
            isr=tuple(ev[ISR]),
            adding_replicas=tuple(ev[ADDING] or ()),
            leader_leo=leo,
            hw=min(hw, leo),
        )
    return leader


def apply_fetch(watch: PartitionWatch, ev: Any, ts: int, quarantine: list[dict[str, Any]]) -> None:
    """A fetch event applied to its partition (a rejection that says the input is wrong: quarantined)."""
    p = watch.leader
    replica = ev[REPLICA]
    if watch.auto_assign and replica not in p.replicas:
        p.controller_update(ts, isr=p.isr, leader_epoch=p.leader_epoch, replicas=(*p.replicas, replica))
    leo = ev[LEADER_LEO]
    if leo is not None and leo > p.leader_leo:
        p.append(ts, leo)
    outcome = p.fetch(
        ts,
        replica,
        ev[FETCH_OFFSET],
        broker_epoch=ev[BROKER_EPOCH],
        log_start_offset=ev[LOG_START],
        error=ev[ERROR],
        diverging_epoch=ev[DIVERGING],
    )
    sessions.join(p.followers.get(replica), ev[SESSION_ID])
    if not outcome.accepted and outcome.reject_reason in QUARANTINED_REJECTIONS:
        quarantine.append(
            quarantine_record(
                ev,
                f"fetch rejected: {outcome.reject_reason} (replica {replica}, assignment {list(p.replicas)})",
            )
        )


def apply_metadata(
    watch: PartitionWatch, ev: Any, ts: int, view: Any, cfg: MonitorConfig, applied: int
) -> None:
    """A metadata event applied to its known partition; `applied`: how many entries of the
    cluster's broker log it has applied (a new leader starts from the broker states then)."""
    p = watch.leader
    lag, min_isr = overrides(ev)
    if (lag, min_isr) != (watch.lag_override, watch.min_isr_override):
        watch.lag_override, watch.min_isr_override = lag, min_isr
        watch.next_run_ms(ts)  # the isr-expiration run due under the old L stays
        p.config = cfg.partition_config(lag, min_isr)
    epoch, leader_id = ev[LEADER_EPOCH], ev[LEADER]
    replicas, isr = tuple(ev[REPLICAS]), tuple(ev[ISR])
    adding = tuple(ev[ADDING] or ())
    if epoch < p.leader_epoch:
        return  # an older view of the partition: the leader ignores it too
    if leader_id != p.leader:
        # A different broker leads now: it knows nothing of the followers (docs/kafka-rules.md §1.4).
        leo = ev[LEADER_LEO] if ev[LEADER_LEO] is not None else p.leader_leo
        hw = ev[HW] if ev[HW] is not None else min(p.hw, leo)
        new = PartitionLeader(
            config=p.config,
            now_ms=ts,
            leader=leader_id,
            leader_epoch=epoch,
            replicas=replicas,
            isr=isr,
            adding_replicas=adding,
            leader_leo=leo,
            hw=min(hw, leo),
        )
        apply_brokers(new, view, applied)
        watch.leader = new
        watch.auto_assign = False
        return
    if epoch > p.leader_epoch:
        p.controller_update(
            ts,
            isr=isr,
            leader_epoch=epoch,
            is_new_leader=False,
            replicas=replicas,
            adding_replicas=adding,
            leader_leo=ev[LEADER_LEO],
            hw=ev[HW],
        )
        watch.auto_assign = False
        return
    # Same epoch: the committed ISR as the cluster reports it. A member that the rules say
    # is out of sync is kept out: the report predates the shrink the leader is about to make.
    keep = tuple(
        sorted(r for r in isr if r in p.isr or r == p.leader or r not in p.followers or not p.lags_out(r, ts))
    )
    if keep != p.isr or replicas != p.replicas or adding != p.adding_replicas:
        p.controller_update(ts, isr=keep, leader_epoch=epoch, replicas=replicas, adding_replicas=adding)
    watch.auto_assign = False


def _older_than_last_fetch(watch: PartitionWatch, ev: Any) -> bool:
    """Before the replica's last fetch, or that same fetch again (same time, offset and LEO)."""
    st = watch.leader.followers.get(ev[REPLICA])
    if st is None or ev[TS] > st.last_fetch_ms:
        return False
    return ev[TS] < st.last_fetch_ms or (
        ev[FETCH_OFFSET] == st.leo and ev[LEADER_LEO] == st.last_fetch_leader_leo
    )


def changes_nothing_late(watch: PartitionWatch, ev: Any, kind: str) -> bool:
    """Whether an event far behind its partition's time says nothing its partition still
    holds, so that it is neither applied nor late (docs/events.md, "Order, skew and lateness"):
    a fetch answered under an older leader epoch than the partition's (a replaced leader's
    view of a follower: the new leader started its followers afresh, docs/kafka-rules.md
    §1.4), or an append that does not grow the LEO. These are what a stopped broker logs when
    it runs again: the fetches it held across the stop, with read times from before it."""
    if kind == "append":
        return ev[LEADER_LEO] <= watch.leader.leader_leo
    epoch = ev[LEADER_EPOCH]
    return kind == "fetch" and epoch is not None and epoch < watch.leader.leader_epoch


def takes_behind(
    watch: PartitionWatch, ev: Any, kind: str, cfg: MonitorConfig, quarantine: list[dict[str, Any]]
) -> bool:
    """Whether an event behind the partition's processed time is still applied (within the
    reorder tolerance, and new); a late or stale one is quarantined."""
    ts = ev[TS]
    if ts < watch.time_ms - cfg.reorder_tolerance_ms:
        if changes_nothing_late(watch, ev, kind):
            return False
        reason = f"late: event time {ts} is before the partition's processed time {watch.time_ms}"
        quarantine.append(quarantine_record(ev, reason))
        return False
    if kind == "append" and ev[LEADER_LEO] <= watch.leader.leader_leo:
        return False  # a resent or reordered append that does not grow the LEO: nothing
    if kind == "fetch" and _older_than_last_fetch(watch, ev):
        if sessions.restates(watch, ev[REPLICA], ev[SESSION_ID], ev[FETCH_OFFSET], ts):
            return False  # its session's read, already taken: nothing new
        # A follower's fetches reach its leader one at a time, so this is a resend
        # (an at-least-once producer) or out of order: not a new observation.
        last = watch.leader.followers[ev[REPLICA]].last_fetch_ms
        quarantine.append(
            quarantine_record(
                ev,
                f"stale fetch: replica {ev[REPLICA]}'s fetch at {ts} is not after its "
                f"last fetch at {last} (a duplicate or out of order)",
            )
        )
        return False
    return True


def overrides(ev: Any) -> tuple[int | None, int | None]:
    return ev[LAG_MAX], ev[MIN_ISR]


def quarantine_record(ev: Any, reason: str) -> dict[str, Any]:
    """A quarantine record. Valid events do not carry their raw text into the stateful step
    (it would double what crosses into Python), so it is rebuilt from the parsed fields."""
    raw = ev[RAW]
    if raw is None:
        raw = json.dumps(
            {k: v for k, v in zip(EVENT_FIELDS, ev, strict=True) if v is not None and k != "raw"},
            separators=(",", ":"),
        )
    return {"raw": raw, "reason": reason, "stage": "state", "cluster": ev[CLUSTER], "ts": ev[TS]}
