"""The Redis key layout: the one place that names a key.

The Redis sink writes these keys and the dashboards read them, so both import this module;
docs/redis.md describes what each key holds. Every name starts with a configurable prefix.

Key parts are joined with ':'. Kafka topic names cannot contain ':' ([a-zA-Z0-9._-] only),
but a cluster name might, so every part goes through `part()`, which escapes '%' and ':'.
The index sets hold escaped parts, so a dashboard variable fed by an index set can be spliced
back into a key as it is. Grafana variable references such as '$cluster' pass unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "replmon"

# The Grafana data source that reads these keys: sinks/grafana.py provisions it under this uid,
# and every dashboard query names it. Declared here, beside the keys, so that both sides import
# it from the sinks and dashboards/ never needs to be imported by a sink.
DATASOURCE_UID = "replmon-redis"
DATASOURCE_PLUGIN = "redis-datasource"  # the Redis plugin for Grafana (its plugin id)


def part(value: object) -> str:
    """One key part: str(value) with '%' and ':' escaped so parts never run together."""
    text = value if isinstance(value, str) else str(value)
    if ":" in text or "%" in text:
        return text.replace("%", "%25").replace(":", "%3A")
    return text


def partition_member(topic: object, partition: object) -> str:
    """Member naming one partition in a per-cluster set: 'topic:partition'."""
    return f"{part(topic)}:{part(partition)}"


def replica_member(topic: object, partition: object, replica: object) -> str:
    """Member naming one follower in a per-cluster set: 'topic:partition:replica'."""
    return f"{part(topic)}:{part(partition)}:{part(replica)}"


@dataclass(frozen=True)
class Keys:
    """Key names under one prefix. Arguments are raw values (or Grafana '$variables')."""

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not self.prefix or ":" in self.prefix or any(c.isspace() for c in self.prefix):
            raise ValueError(f"key prefix must be non-empty, without ':' or spaces: {self.prefix!r}")

    def _key(self, *parts: object) -> str:
        # The common case in one pass: every part joined as it is, checked at once (a part
        # with ':' or '%' adds separators or a '%'); the sink builds ~10 keys per record.
        text = ":".join([self.prefix, *map(str, parts)])
        if "%" not in text and text.count(":") == len(parts):
            return text
        return ":".join([self.prefix, *(part(p) for p in parts)])

    # --- alerts -------------------------------------------------------------------------
    def alerts_stream(self) -> str:
        """Stream: one entry per alert transition, auto ids (write time), fields = the record."""
        return f"{self.prefix}:alerts"

    def alert_seen(self, alert_id: str, status: str) -> str:
        """String with a TTL: this transition has been written (replays write nothing)."""
        return self._key("alert-seen", alert_id, status)

    def alerts_firing(self) -> str:
        """Hash alert_id -> alert JSON of every firing alert; the field goes on resolve."""
        return f"{self.prefix}:alerts:firing"

    def alerts_firing_in(self, cluster: str) -> str:
        """Hash alert_id -> alert JSON, the firing alerts of one cluster."""
        return self._key("alerts", "firing", cluster)

    def alerts_notify_stream(self) -> str:
        """Stream: the on-call channel, one entry per *notified* alert transition (root causes
        and the alerts that always page; not consequences, not silenced ones; docs/alerts.md)."""
        return f"{self.prefix}:alerts:notify"

    def alerts_notify_firing(self) -> str:
        """Hash alert_id -> alert JSON of every notified alert that is firing."""
        return f"{self.prefix}:alerts:notify:firing"

    def alerts_notify_firing_in(self, cluster: str) -> str:
        return self._key("alerts", "notify", "firing", cluster)

    def alerts_notify_channel(self) -> str:
        """Pub/sub channel: the alert JSON of every notified transition."""
        return f"{self.prefix}:alerts:notify:changes"

    def silences(self) -> str:
        """Hash silence_id -> silence JSON (sinks/silences.py)."""
        return f"{self.prefix}:silences"

    def alerts_channel(self) -> str:
        """Pub/sub channel: the alert JSON of every transition written (not of replays)."""
        return f"{self.prefix}:alerts:changes"

    # --- current state ------------------------------------------------------------------
    def partition(self, cluster: str, topic: str, partition: int | str) -> str:
        """Hash: the latest partition_status record (only ever replaced by a newer ts)."""
        return self._key("partition", cluster, topic, partition)

    def replica(self, cluster: str, topic: str, partition: int | str, replica: int | str) -> str:
        """Hash: the latest replica_status record (only ever replaced by a newer ts)."""
        return self._key("replica", cluster, topic, partition, replica)

    # --- indexes (sets) -----------------------------------------------------------------
    def clusters(self) -> str:
        """Set of cluster names (escaped)."""
        return f"{self.prefix}:clusters"

    def topics(self, cluster: str) -> str:
        """Set of topic names of one cluster."""
        return self._key("topics", cluster)

    def partitions(self, cluster: str) -> str:
        """Set of 'topic:partition' of one cluster."""
        return self._key("partitions", cluster)

    def topic_partitions(self, cluster: str, topic: str) -> str:
        """Set of partition numbers of one topic."""
        return self._key("partitions", cluster, topic)

    def replicas(self, cluster: str, topic: str, partition: int | str) -> str:
        """Set of follower broker ids of one partition that have a replica_status."""
        return self._key("replicas", cluster, topic, partition)

    def under_replicated(self, cluster: str) -> str:
        """Set of 'topic:partition' whose latest status is under-replicated."""
        return self._key("under-replicated", cluster)

    def under_min_isr(self, cluster: str) -> str:
        """Set of 'topic:partition' whose latest status is under min ISR."""
        return self._key("under-min-isr", cluster)

    def out_of_sync(self, cluster: str) -> str:
        """Set of 'topic:partition:replica' whose latest status is out of the ISR."""
        return self._key("out-of-sync", cluster)

    # --- per broker (the follower side: the broker a replica_status's `replica` names) ------
    def brokers(self, cluster: str) -> str:
        """Set of broker ids of one cluster that host a follower with a replica_status."""
        return self._key("brokers", cluster)

    def broker_followers(self, cluster: str, broker: int | str) -> str:
        """Set of 'topic:partition' whose follower on this broker has a replica_status."""
        return self._key("broker-followers", cluster, broker)

    def broker_out_of_sync(self, cluster: str, broker: int | str) -> str:
        """Set of 'topic:partition' whose follower on this broker is out of the ISR."""
        return self._key("broker-out-of-sync", cluster, broker)

    # --- the rolling-restart gate ---------------------------------------------------------
    def restart_gate(self, cluster: str, broker: int | str) -> str:
        """Hash: what stopping this broker now would do (state/restart_gate.py): `verdict`,
        `clock_ms`, `summary`, `reasons` (JSON); only ever replaced by a newer clock."""
        return self._key("restart-gate", cluster, broker)

    # --- metric series (streams with entry id '{ts}-0', event time in ms) ----------------
    def replica_series(self, cluster: str, topic: str, partition: int | str, replica: int | str) -> str:
        """Stream: lag_ms, lag_messages, leo of one follower over event time."""
        return self._key("series", "replica", cluster, topic, partition, replica)

    def hosted_replica_series(self, cluster: str, hosted: str, broker: int | str) -> str:
        """replica_series named by a 'topic:partition' member (already escaped), as the
        broker dashboard has it from broker_followers: the same key."""
        return ":".join([self.prefix, "series", "replica", part(cluster), hosted, part(broker)])

    def partition_series(self, cluster: str, topic: str, partition: int | str) -> str:
        """Stream: hw, leader_leo, isr_size, hw_stalled_ms of one partition over event time."""
        return self._key("series", "partition", cluster, topic, partition)

    def cluster_series(self, cluster: str) -> str:
        """Stream: under_replicated, under_min_isr, out_of_sync_replicas, firing_alerts."""
        return self._key("series", "cluster", cluster)

    # --- quarantine ---------------------------------------------------------------------
    def quarantine_stream(self) -> str:
        """Stream: quarantined records, auto ids (write time), bounded."""
        return f"{self.prefix}:quarantine"

    def quarantine_count(self) -> str:
        """String counter: quarantined records written, ever."""
        return f"{self.prefix}:quarantine:count"

    def quarantine_seen(self, record_id: str) -> str:
        """String with a TTL: this quarantined record has been written."""
        return self._key("quarantine-seen", record_id)

    # --- Grafana annotations (written by the annotation consumer, not by the sink) ---------
    def grafana_annotation(self, alert_id: str) -> str:
        """String with a TTL: JSON of the Grafana annotation of one alert episode."""
        return self._key("grafana", "annotation", alert_id)

    def grafana_annotation_lock(self, alert_id: str) -> str:
        """String with a short TTL: one consumer is writing this episode's annotation."""
        return self._key("grafana", "annotation-lock", alert_id)

    # --- the monitor itself --------------------------------------------------------------
    def heartbeat(self, query: str) -> str:
        """Hash: the query's latest wall-clock heartbeat (sinks/heartbeat.py, docs/redis.md)."""
        return self._key("monitor", "heartbeat", query)
