"""The simulator's input events (docs/events.md), built by the contract's one builder
(state/events.event), and their JSON form."""

from __future__ import annotations

import json
from typing import Any

from replmon.state.events import event

Event = dict[str, Any]


def fetch(
    ts: int,
    cluster: str,
    topic: str,
    partition: int,
    *,
    replica: int,
    fetch_offset: int,
    leader_leo: int,
    leader_epoch: int,
    broker_epoch: int,
    leader_hw: int,
    log_start_offset: int = 0,
    diverging_epoch: int | None = None,
) -> Event:
    """One follower fetch as the leader first processed it.

    ts is its arrival, leader_leo the leader's LEO just before the read."""
    return event(
        "fetch",
        ts,
        cluster,
        topic=topic,
        partition=partition,
        replica=replica,
        fetch_offset=fetch_offset,
        leader_leo=leader_leo,
        leader_epoch=leader_epoch,
        broker_epoch=broker_epoch,
        log_start_offset=log_start_offset,
        leader_hw=leader_hw,
        diverging_epoch=diverging_epoch,
    )


def append(ts: int, cluster: str, topic: str, partition: int, *, leader_leo: int) -> Event:
    return event("append", ts, cluster, topic=topic, partition=partition, leader_leo=leader_leo)


def metadata(
    ts: int,
    cluster: str,
    topic: str,
    partition: int,
    *,
    leader: int,
    leader_epoch: int,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    adding_replicas: tuple[int, ...],
    leader_leo: int,
    hw: int,
    min_insync_replicas: int,
    replica_lag_time_max_ms: int,
) -> Event:
    return event(
        "metadata",
        ts,
        cluster,
        topic=topic,
        partition=partition,
        leader=leader,
        leader_epoch=leader_epoch,
        replicas=list(replicas),
        isr=list(isr),
        adding_replicas=list(adding_replicas) or None,
        leader_leo=leader_leo,
        hw=hw,
        min_insync_replicas=min_insync_replicas,
        replica_lag_time_max_ms=replica_lag_time_max_ms,
    )


def broker(ts: int, cluster: str, *, broker_id: int, state: str, broker_epoch: int) -> Event:
    return event("broker", ts, cluster, broker=broker_id, state=state, broker_epoch=broker_epoch)


def heartbeat(ts: int, cluster: str) -> Event:
    return event("heartbeat", ts, cluster)


def encode(ev: Event) -> str:
    """One JSON line (no newline), compact and in a fixed field order."""
    return json.dumps(ev, separators=(",", ":"))
