"""What replmon said, as the judge's cases read it (Redis), and how they print their figures."""

from __future__ import annotations

import json

from tests.judge.pipeline import CLUSTER, Pipeline, describe


def firing(alerts: list[dict], name: str, topic: str | None, partition=None, replica=None) -> list[dict]:
    """The firing transitions of `name` (topic None: not a partition alert, e.g. BrokerUnavailable)."""
    return [
        a
        for a in alerts
        if a["name"] == name
        and a["status"] == "firing"
        and a.get("cluster") == CLUSTER
        and (a.get("topic") or None) == topic
        and partition in (None, a.get("partition"))
        and replica in (None, a.get("replica"))
    ]


def firing_now(pipeline: Pipeline, names: tuple[str, ...], topic: str) -> list[dict]:
    """Alerts open now (Redis' firing hash), of these names, about the topic or a broker."""
    raw = pipeline.redis.hgetall(f"{pipeline.prefix}:alerts:firing:{CLUSTER}")
    return [
        a for a in map(json.loads, raw.values()) if a["name"] in names and a.get("topic") in (topic, None)
    ]


def leaders_as_described(pipeline: Pipeline, admin, topic: str, described: dict | None = None) -> dict | None:
    """describe_topics' partitions (or `described`, an answer already in hand while nothing
    can change them) when replmon reports each one's leader, leader epoch and ISR the same;
    None otherwise (or while the Admin API does not answer)."""
    try:
        now = described or describe(admin, topic)
    except Exception:  # noqa: BLE001 - a stopped broker: ask again
        return None
    for p, v in now.items():
        h = pipeline.partition(topic, p)
        seen = (int(h.get("leader", -9)), int(h.get("leader_epoch", -9)), pipeline.isr(topic, p))
        if seen != (v["leader"], v["leader_epoch"], v["isr"]):
            return None
    return now


def report(label: str, rows: list[str]) -> None:
    print(f"\n[judge] {label}")
    for r in rows:
        print(f"[judge]   {r}")
