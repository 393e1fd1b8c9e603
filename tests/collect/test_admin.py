"""The Admin API's names for topic ids: every topic's, monitored or not."""

from __future__ import annotations

import uuid

from replmon.streaming.collect.admin import AdminView, kafka_topic_id

ORDERS, OFFSETS = uuid.UUID(int=1), uuid.UUID(int=2)


class FakeAdmin:
    """kafka-python's KafkaAdminClient answers, in its own shapes."""

    def describe_topics(self):
        part = {
            "partition_index": 0,
            "leader_id": 1,
            "leader_epoch": 0,
            "replica_nodes": [1],
            "isr_nodes": [1],
        }
        return [
            {"name": "orders", "topic_id": ORDERS, "error_code": 0, "partitions": [part]},
            {"name": "__consumer_offsets", "topic_id": OFFSETS, "error_code": 0, "partitions": [part]},
        ]

    def describe_cluster(self):
        return {"brokers": [{"broker_id": 1, "is_fenced": False}]}

    def describe_configs(self, resources, config_filter):
        raise RuntimeError("not asked here")


def test_internal_topics_are_named_but_not_monitored():
    # Unnamed, an internal topic's FETCH lines were counted as unknown topic ids, which hid the
    # lines of topics the collector really could not name (issue 20, defect 1).
    view = AdminView(FakeAdmin(), "c", wanted=lambda t: not t.startswith("__"))
    events = view.changes(view.ask(), 1000)
    assert view.name_of(kafka_topic_id(OFFSETS)) == "__consumer_offsets"
    assert view.name_of(kafka_topic_id(ORDERS)) == "orders"
    assert {e.get("topic") for e in events if e["type"] == "metadata"} == {"orders"}
