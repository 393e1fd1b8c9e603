"""`MonitorConfig`, the engine's frozen config (most of its users import it from
state/monitor.py, the modules that state/monitor.py imports from here)."""

from __future__ import annotations

from dataclasses import dataclass

from replmon.state.partition import PartitionConfig


@dataclass(frozen=True, slots=True)
class MonitorConfig:
    """The engine's frozen config: what a partition's metadata does not say, and the alert
    thresholds.

    No field has a default here: each value is stated once, as a setting in streaming/settings.py
    (the `rules`, `alerts` and `stream` sections), and `Settings.monitor_config()` fills every
    field from the setting of the same name. A new field is this one line plus its setting, with its
    default, in one of those sections; tests/test_config_once.py fails until both exist. Code
    that wants the defaults (tests, benches) calls replmon.streaming.settings.monitor_config().
    """

    replica_lag_time_max_ms: int
    min_insync_replicas: int
    rule_set: str
    replica_lag_max_messages: int
    imminent_fraction: float  # IsrExitImminent after this fraction of the limit
    hw_stall_ms: int  # HighWatermarkStalled after this long behind the LEO
    flap_count: int  # IsrFlapping: this many ISR exits ...
    flap_window_ms: int  # ... within this window
    telemetry_gap_ms: int  # TelemetryMissing after this much silence
    lateness_ms: int  # how far behind its cluster's clock a partition may lag
    reorder_tolerance_ms: int  # out-of-order events within this are taken at partition time
    stuck_after_ms: int
    caught_up_grace_ms: int
    # the compaction resolution of a source that does not state it on its heartbeats (quiet_after_ms)
    compaction_resolution_ms: int
    # "fixed": compaction_resolution_ms for every partition; "lag": the collector's default, by L
    compaction_scheme: str
    status_interval_ms: int  # at most one routine status per partition per this much event time
    status_refresh_ms: int  # a healthy partition's unchanged status is sent again after this long
    series_interval_ms: int  # a healthy partition's moving offsets: one series point per this much
    evict_after_ms: int  # a partition with no event for this long leaves the state
    num_replica_fetchers: int  # Kafka's num.replica.fetchers (ReplicaFetcherStalled groups)
    group_wait_ms: int  # every alert waits this long (event time) for a root to claim it (state/cluster.py)
    lag_share: float  # restart gate: a listed follower lagging past this share of L is out

    def partition_config(self, lag_ms: int | None = None, min_isr: int | None = None) -> PartitionConfig:
        return PartitionConfig(
            replica_lag_time_max_ms=lag_ms or self.replica_lag_time_max_ms,
            min_insync_replicas=min_isr or self.min_insync_replicas,
            alter_partition="immediate",
            rule_set=self.rule_set,
            replica_lag_max_messages=self.replica_lag_max_messages,
        )
