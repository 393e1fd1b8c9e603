"""The follower's own view of a partition it replicates (docs/kafka-rules.md §5.2, §6.4, §7 ConsumerLag).

Mirrors `ReplicaFetcherThread.processPartitionData` and `AbstractFetcherThread`'s lag gauge.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class FollowerView:
    leo: int = 0
    hw: int = 0
    log_start_offset: int = 0
    consumer_lag: int = -1  # FetcherLagMetrics.ConsumerLag: -1 until the first response


# Kafka: UnifiedLog.updateHighWatermark: clamped to [log start, own LEO]; maybeUpdate... is not monotonic.
def follower_high_watermark(leader_hw: int, follower_leo: int, log_start_offset: int) -> int:
    return max(log_start_offset, min(leader_hw, follower_leo))


# Kafka: AbstractFetcherThread.processFetchRequest: lag = max(0, response's leader HW - next fetch offset).
def consumer_lag(leader_hw: int, next_fetch_offset: int) -> int:
    return max(0, leader_hw - next_fetch_offset)


def process_fetch_response(
    view: FollowerView,
    *,
    fetch_offset: int,
    records_end_offset: int,
    leader_hw: int,
    log_start_offset: int | None = None,
) -> None:
    """One successful (non-diverging) fetch response: append the records, then take the leader HW."""
    if log_start_offset is not None:
        view.log_start_offset = log_start_offset
    # nextOffset: last appended offset + 1, or the fetch offset if nothing was appended.
    next_offset = records_end_offset if records_end_offset > fetch_offset else fetch_offset
    view.leo = next_offset
    view.hw = follower_high_watermark(leader_hw, view.leo, view.log_start_offset)
    view.consumer_lag = consumer_lag(leader_hw, next_offset)
