"""Every alert text, in one place: one open and one close template per alert and cause.

Templates are `str.format` strings over named facts; the evaluator supplies the facts (all
derived once, in `state/explain.py`) and never writes a sentence itself. A key is
`(alert name, cause)`; `cause` is the why of docs/alerts.md (e.g. `lag`, `broker_fenced`).
"""

from __future__ import annotations

# (name, cause) -> open text
OPEN = {
    (
        "IsrExitImminent",
        "lag",
    ): "replica {replica} of {partition} may leave the ISR soon: {lag}, {lag_messages} messages "
    "behind: {state}, {fetch}",
    (
        "IsrExitImminent",
        "leader_silent",
    ): "replica {replica} of {partition} may leave the ISR soon, or its leader {leader} is down: "
    "nothing from leader {leader} since {silent_since}; {lag}",
    (
        "ReplicaOutOfSync",
        "lag",
    ): "replica {replica} of {partition} is out of sync: {lag}, {lag_messages} messages behind: "
    "{state}, {fetch}",
    (
        "ReplicaOutOfSync",
        "broker_fenced",
    ): "replica {replica} of {partition} is out of the ISR because broker {replica} was fenced "
    "(unavailable since {since}); {lag_messages} messages behind",
    (
        "ReplicaOutOfSync",
        "broker_shutting_down",
    ): "replica {replica} of {partition} is out of the ISR because broker {replica} is in controlled "
    "shutdown (since {since}); {lag_messages} messages behind",
    (
        "ReplicaOutOfSync",
        "controller",
    ): "replica {replica} of {partition} was removed from the ISR by the controller (leader {leader}, "
    "epoch {leader_epoch}) while its broker is registered; {lag_messages} messages behind: "
    "{state}, {fetch}",
    (
        "ReplicaOutOfSync",
        "reassignment",
    ): "replica {replica} of {partition} is being added by a reassignment and is not yet in the ISR: "
    "{lag_messages} messages behind: {state}",
    (
        "UnderReplicated",
        "replicas",
    ): "{partition} has {isr_size} of {replica_count} replicas in sync (ISR {isr}); out: {out}",
    (
        "UnderMinIsr",
        "min_isr",
    ): "{partition} ISR {isr} is below min.insync.replicas {min_isr}: acks=all produce is rejected "
    "(NOT_ENOUGH_REPLICAS) and the HW is frozen at {hw}",
    (
        "AtMinIsr",
        "min_isr",
    ): "{partition} ISR {isr} is at min.insync.replicas {min_isr}: one more loss stops acks=all produce",
    (
        "OfflinePartition",
        "no_leader",
    ): "{partition} has no leader (replicas {replicas}, ISR {isr}): produce and consume fail",
    (
        "HighWatermarkStalled",
        "holders",
    ): "high watermark of {partition} stuck at {hw} for {stalled} while the leader LEO is "
    "{leader_leo}: waiting on replica(s) {holders}; acks=all producers are waiting",
    (
        "HighWatermarkStalled",
        "isr",
    ): "high watermark of {partition} stuck at {hw} for {stalled} while the leader LEO is "
    "{leader_leo}: waiting on the ISR {isr}; acks=all producers are waiting",
    ("IsrFlapping", "exits"): "replica {replica} of {partition} left the ISR {exits} times in {window}",
    ("TelemetryMissing", "partition"): "no events for {partition} since {since} ({silent})",
    ("TelemetryMissing", "cluster"): "no events from cluster {cluster} since {since} (more than {gap})",
    ("BrokerUnavailable", "broker_fenced"): "broker {broker} of {cluster} was fenced at {since}: {counts}",
    (
        "BrokerUnavailable",
        "broker_silent",
    ): "broker {broker} of {cluster} went silent at {since} while still registered: it fetches for "
    "none of its replicas and its partitions report nothing (stopped or hung; the controller "
    "has not fenced it): {counts}",
    (
        "BrokerUnavailable",
        "broker_shutting_down",
    ): "broker {broker} of {cluster} is in controlled shutdown since {since}: {counts}",
    (
        "MonitorLagging",
        "stalled",
    ): "query {query} has completed no batch for {silent} (limit {limit}); query {state}",
    (
        "MonitorLagging",
        "behind",
    ): "query {query} is {lag} behind the wall clock in event time (limit {limit})",
    (
        "ReplicaFetcherStalled",
        "fetcher_stalled",
    ): "broker {broker}'s fetcher {fetcher_id} for leader {leader} is stalled: by {since}, {n} "
    "partitions ({partitions}) had had no fetch from broker {broker} for longer than the stuck "
    "limit, while it fetches from other leaders; {counts}",
}

# (name, cause) -> close text; cause here is why the episode ended.
CLOSE = {
    ("IsrExitImminent", "caught_up"): "replica {replica} of {partition} caught up again",
    (
        "IsrExitImminent",
        "out_of_sync",
    ): "replica {replica} of {partition} is now out of sync (ReplicaOutOfSync)",
    (
        "IsrExitImminent",
        "new_leader",
    ): "replica {replica} of {partition} follows a new leader (broker {leader}) and starts over",
    ("IsrExitImminent", "left_isr"): "replica {replica} of {partition} left the ISR (ReplicaOutOfSync)",
    ("ReplicaOutOfSync", "rejoined"): "replica {replica} of {partition} is in sync and in the ISR again",
    ("UnderReplicated", "replicas"): "{partition} has all its replicas in sync again (ISR {isr})",
    ("UnderMinIsr", "min_isr"): "{partition} ISR {isr} is back at min.insync.replicas or above",
    ("AtMinIsr", "below"): "{partition} ISR {isr} fell below min.insync.replicas (UnderMinIsr)",
    ("AtMinIsr", "above"): "{partition} ISR {isr} is above min.insync.replicas again",
    ("OfflinePartition", "no_leader"): "{partition} has a leader again (broker {leader})",
    ("HighWatermarkStalled", "moving"): "high watermark of {partition} is moving again ({hw})",
    (
        "HighWatermarkStalled",
        "min_isr",
    ): "high watermark of {partition} is frozen by the min ISR rule now (UnderMinIsr), not by a replica",
    ("IsrFlapping", "exits"): "replica {replica} of {partition} has stopped leaving the ISR",
    ("TelemetryMissing", "partition"): "events for {partition} again",
    ("TelemetryMissing", "cluster"): "events from cluster {cluster} again",
    ("MonitorLagging", "keeping_up"): "query {query} is keeping up again",
    ("BrokerUnavailable", "running"): "broker {broker} of {cluster} is registered and running again",
    (
        "BrokerUnavailable",
        "heard_again",
    ): "broker {broker} of {cluster} is heard from again (or the controller now reports its state)",
    ("ReplicaFetcherStalled", "fetching"): (
        "broker {broker}'s fetcher {fetcher_id} for leader {leader} is fetching again "
        "(or its partitions moved)"
    ),
    # per-replica alerts when the replica stops being a follower of the partition
    ("*", "became_leader"): "replica {replica} became the leader of {partition}",
    ("*", "left_assignment"): "replica {replica} left the assignment of {partition}",
}


def open_text(name: str, cause: str, **facts) -> str:
    return OPEN[(name, cause)].format(**facts)


def close_text(name: str, cause: str, **facts) -> str:
    template = CLOSE.get((name, cause)) or CLOSE[("*", cause)]
    return template.format(**facts)


def fmt_clock(ms: int) -> str:
    """HH:MM:SS (UTC) of an event time; pure arithmetic, no clock read."""
    s = (ms // 1000) % 86400
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


def fmt_seconds(ms: int) -> str:
    return f"{ms / 1000:.1f} s"


def fmt_against_limit(elapsed_ms: int, limit_ms: int) -> str:
    """`12.3 s, over the 10 s limit` / `5.0 s of the 10 s limit`: never reads as within the
    limit when it is over (10.001 s is not printed as 10.0 s)."""
    limit = f"{limit_ms / 1000:g} s"
    if elapsed_ms > limit_ms:
        shown = f"{elapsed_ms / 1000:.1f}"
        if float(shown) * 1000 <= limit_ms:
            shown = f"{elapsed_ms / 1000:.3f}"
        return f"{shown} s, over the {limit} limit"
    return f"{elapsed_ms / 1000:.1f} s of the {limit} limit"


def fmt_counts(counts: dict[str, int]) -> str:
    """`3 partitions under-replicated, 0 under min ISR, ...` in a fixed order."""
    parts = [
        f"{counts.get('under_replicated', 0)} partitions under-replicated",
        f"{counts.get('under_min_isr', 0)} under min ISR",
        f"{counts.get('offline', 0)} offline",
        f"{counts.get('leaders_lost', 0)} leaders lost",
    ]
    return ", ".join(parts)
