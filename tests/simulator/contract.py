"""A small checker of docs/events.md, written from the document and independent of the simulator."""

from __future__ import annotations

from typing import Any

COMMON = {"type", "ts", "cluster"}
# type -> (required fields, optional fields)
FIELDS = {
    "fetch": (
        {"topic", "partition", "replica", "fetch_offset", "leader_leo"},
        {"leader_epoch", "broker_epoch", "log_start_offset", "leader_hw", "error", "diverging_epoch"},
    ),
    "append": ({"topic", "partition", "leader_leo"}, set()),
    "metadata": (
        {"topic", "partition", "leader", "leader_epoch", "replicas", "isr"},
        {"adding_replicas", "leader_leo", "hw", "min_insync_replicas", "replica_lag_time_max_ms"},
    ),
    "broker": ({"broker", "state"}, {"broker_epoch"}),
    "heartbeat": (set(), set()),
}
NON_NEGATIVE = {"partition", "replica", "fetch_offset", "leader_leo", "broker", "leader_epoch"}
AT_LEAST_ONE = {"min_insync_replicas", "replica_lag_time_max_ms"}
INT_LISTS = {"replicas", "isr", "adding_replicas"}
STRINGS = {"topic", "error", "state", "cluster", "type"}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def problems(event: Any) -> list[str]:
    """Everything wrong with one event under the contract (empty: valid)."""
    if not isinstance(event, dict):
        return ["not an object"]
    kind = event.get("type")
    if kind not in FIELDS:
        return [f"unknown type {kind!r}"]
    required, optional = FIELDS[kind]
    out = []
    missing = (COMMON | required) - event.keys()
    if missing:
        out.append(f"missing {sorted(missing)}")
    extra = event.keys() - COMMON - required - optional
    if extra:
        out.append(f"fields outside the contract {sorted(extra)}")
    for name, value in event.items():
        if name in STRINGS:
            if not isinstance(value, str) or not value:
                out.append(f"{name} must be a non-empty string")
        elif name in INT_LISTS:
            if not isinstance(value, list) or not all(_is_int(x) and x >= 0 for x in value):
                out.append(f"{name} must be a list of ids")
        elif not _is_int(value):
            out.append(f"{name} must be an integer")
        elif name in NON_NEGATIVE and value < 0:
            out.append(f"{name} must be >= 0")
        elif name in AT_LEAST_ONE and value < 1:
            out.append(f"{name} must be >= 1")
    if out:
        return out
    if event["ts"] < 0:
        out.append("ts must be >= 0")
    if kind == "metadata":
        replicas = set(event["replicas"])
        if event["leader"] < -1 or (event["leader"] >= 0 and event["leader"] not in replicas):
            out.append("leader must be -1 or one of the replicas")
        if not set(event["isr"]) <= replicas:
            out.append("isr must be a subset of the replicas")
        if not set(event.get("adding_replicas", [])) <= replicas:
            out.append("adding_replicas must be a subset of the replicas")
    if kind == "broker" and event["state"] not in ("running", "fenced", "shutting_down"):
        out.append(f"unknown broker state {event['state']!r}")
    return out
