"""What the Admin API says: topic ids and names, partition metadata, broker liveness.

`metadata` and `broker` events are emitted when what the cluster reports changes (and once
at start), stamped with the collector's clock when the answers were in: never before the
cluster said it (a request to a stopped broker can take its whole timeout, and an event
stamped when it was asked would reach the reorder buffer after the watermark passed it).
Each metadata event carries the leader broker's `replica.lag.time.max.ms` and the topic's
`min.insync.replicas`, so replmon judges with the cluster's own settings.
"""

from __future__ import annotations

import base64
import logging
import uuid
from typing import Any

from replmon.state.events import event

log = logging.getLogger(__name__)


def kafka_topic_id(topic_id) -> str:
    """Kafka's Uuid.toString (URL-safe base64, no padding), as the request log writes it."""
    u = topic_id if isinstance(topic_id, uuid.UUID) else uuid.UUID(str(topic_id))
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def describe_cluster(admin) -> dict[str, Any]:
    """admin.describe_cluster(), also from brokers before Kafka 3.7. kafka-python (3.0.12) drops
    the answer's endpoint_type, which DescribeCluster v0 (Kafka 2.8 to 3.6) does not have, and
    raises KeyError; those brokers are asked with a Metadata request instead, as kafka-python
    itself does for brokers without DescribeCluster. Metadata lists live brokers only, and
    DescribeCluster v0 has no fenced ones either, so the answer means the same."""
    try:
        return admin.describe_cluster()
    except KeyError as e:
        if e.args != ("endpoint_type",):
            raise
    # kafka-python's own fallback for older brokers (its private helper: no public call asks
    # Metadata for brokers only).
    metadata = admin._manager.run(admin._get_cluster_metadata, [])
    brokers = [dict(b, broker_id=b.get("node_id", b.get("broker_id"))) for b in metadata["brokers"]]
    return {
        "cluster_id": metadata.get("cluster_id"),
        "controller_id": metadata.get("controller_id"),
        "brokers": brokers,
    }


def metadata_events(
    cluster: str,
    topics: list[dict],
    now_ms: int,
    lag_ms_of_broker: dict[int, int],
    min_isr_of_topic: dict[str, int],
) -> dict:
    """(topic, partition) -> metadata event, from a describe_topics answer."""
    out = {}
    for t in topics:
        if t.get("error_code", 0):
            continue
        for p in t.get("partitions") or []:
            if p.get("error_code", 0) not in (0, 9):  # 9 REPLICA_NOT_AVAILABLE still describes it
                continue
            leader = int(p["leader_id"])
            ev = event(
                "metadata",
                now_ms,
                cluster,
                topic=t["name"],
                partition=int(p["partition_index"]),
                leader=leader,
                leader_epoch=max(int(p.get("leader_epoch", 0)), 0),
                replicas=[int(r) for r in p["replica_nodes"]],
                isr=sorted(int(r) for r in p["isr_nodes"]),
                replica_lag_time_max_ms=lag_ms_of_broker.get(leader) or None,
                min_insync_replicas=min_isr_of_topic.get(t["name"]) or None,
            )
            out[(t["name"], ev["partition"])] = ev
    return out


def same_metadata(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    keys = ("leader", "leader_epoch", "replicas", "isr", "replica_lag_time_max_ms", "min_insync_replicas")
    return a is not None and all(a.get(k) == b.get(k) for k in keys)


def broker_states(registered: dict[int, bool], known: set[int]) -> dict[int, str]:
    """running / fenced per broker: a registered unfenced broker runs; a fenced one, or one
    we saw before that the cluster no longer lists, is fenced."""
    out = {b: ("fenced" if fenced else "running") for b, fenced in registered.items()}
    for b in known - set(registered):
        out[b] = "fenced"
    return out


class AdminView:
    """Polls the Admin API: `ask()` sends the requests, `changes(answers, now_ms)` turns the
    answers into events for what changed."""

    def __init__(self, admin, cluster: str, wanted=lambda topic: True) -> None:
        self.admin, self.cluster, self.wanted = admin, cluster, wanted
        self.names: dict[str, str] = {}
        self._metadata: dict = {}
        self._brokers: dict[int, str] = {}
        self._lag_ms: dict[int, int] = {}
        self._min_isr: dict[str, int] = {}

    def name_of(self, topic_id: str) -> str | None:
        return self.names.get(topic_id)

    def _configs(self, brokers: list[int], topics: list[str]) -> None:
        from kafka.admin import ConfigResource, ConfigResourceType

        for b in brokers:
            if b in self._lag_ms:
                continue
            try:
                got = self.admin.describe_configs(
                    [ConfigResource(ConfigResourceType.BROKER, str(b))], config_filter="all"
                )
                value = got["broker"][str(b)]["replica.lag.time.max.ms"]["value"]
                self._lag_ms[b] = int(value)
            except Exception as e:  # noqa: BLE001 - a missing setting only loses the override
                log.warning("broker %s: cannot read replica.lag.time.max.ms (%s)", b, e)
        for t in topics:
            if t in self._min_isr:
                continue
            try:
                got = self.admin.describe_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, t)], config_filter="all"
                )
                self._min_isr[t] = int(got["topic"][t]["min.insync.replicas"]["value"])
            except Exception as e:  # noqa: BLE001 - a missing setting only loses the override
                log.warning("topic %s: cannot read min.insync.replicas (%s)", t, e)

    def ask(self) -> tuple:
        """The topics first, then the brokers: the controller fences a broker and removes it
        from the ISRs in one metadata batch, so a cluster description answered after the topic
        description shows any fence behind an ISR change it shows."""
        topics = self.admin.describe_topics()
        cluster = describe_cluster(self.admin)
        return topics, cluster

    def changes(self, answers: tuple[list[dict[str, Any]], dict[str, Any]], now_ms: int) -> list[dict]:
        every, cluster = answers
        registered = {int(b["broker_id"]): bool(b.get("is_fenced", False)) for b in cluster["brokers"]}
        # Every topic's name, monitored or not: an id the poll did not list is a deleted topic,
        # and the request-log lines of internal or excluded topics are counted as what they are.
        for t in every:
            if t.get("topic_id"):
                self.names[kafka_topic_id(t["topic_id"])] = t["name"]
        topics = [t for t in every if self.wanted(t["name"])]
        self._configs(sorted(registered), [t["name"] for t in topics])
        events = []
        known = set(self._brokers) | {
            r for t in topics for p in t.get("partitions") or [] for r in p["replica_nodes"]
        }
        for b, state in sorted(broker_states(registered, known).items()):
            if self._brokers.get(b) != state:
                self._brokers[b] = state
                events.append(event("broker", now_ms, self.cluster, broker=b, state=state))
        for key, ev in sorted(
            metadata_events(self.cluster, topics, now_ms, self._lag_ms, self._min_isr).items()
        ):
            if not same_metadata(self._metadata.get(key), ev):
                self._metadata[key] = ev
                events.append(ev)
        return events
