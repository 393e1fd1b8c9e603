"""The event contract (docs/events.md), declared once: each field's type and bounds, and each
event type's required and optional fields.

Everything else is derived from this declaration: the Spark schema and the JVM's checks
(streaming/contract.py, streaming/parse.py), the Python checks (streaming/validate.py), the
engine's event tuples and their field positions (EVENT_FIELDS, TYPE, TS, ...), the collector's
and the simulator's event builders (`event`) and the Kafka record key (`record_key`).
tests/test_events_doc.py checks docs/events.md's tables against it.

Plain data and pure functions: the engine (state/bucket.py) and the stateful step on the Spark
workers import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["int", "str", "ints"]  # an integer, a string, an array of integers


@dataclass(frozen=True, slots=True)
class Field:
    kind: Kind
    minimum: int | None = None  # the least valid value: 0 for an offset or an id, 1 for a count
    choices: tuple[str, ...] = ()  # the only valid values of a string, when it has a fixed set
    read: bool = True  # False: parsed and checked, but the engine does not read it


# Every field of every event, in the contract's order (the order of the engine's tuples, of
# the checks, and of a quarantined event's re-encoded text).
FIELDS: dict[str, Field] = {
    "type": Field("str"),
    "ts": Field("int"),  # ms since the epoch, as the partition leader saw it
    "cluster": Field("str"),
    "topic": Field("str"),
    "partition": Field("int", minimum=0),
    "replica": Field("int", minimum=0),
    "fetch_offset": Field("int", minimum=0),
    "leader_leo": Field("int", minimum=0),
    "leader_epoch": Field("int", minimum=0),
    "broker_epoch": Field("int"),
    "log_start_offset": Field("int", minimum=0),
    "leader_hw": Field("int", read=False),  # what the leader told the follower; replmon computes the HW
    "error": Field("str"),
    "diverging_epoch": Field("int"),
    # KIP-227 fetch session id, as the leader assigned it; on a fetch, 0 means none: the
    # follower's progress on that partition is not carried by a session from then on
    "session_id": Field("int", minimum=0),
    "leader": Field("int"),  # -1: offline
    "replicas": Field("ints"),
    "isr": Field("ints"),
    "adding_replicas": Field("ints"),
    "hw": Field("int", minimum=0),
    "min_insync_replicas": Field("int", minimum=1),
    "replica_lag_time_max_ms": Field("int", minimum=1),
    "broker": Field("int", minimum=0),
    "state": Field("str", choices=("running", "fenced", "shutting_down")),
    # A source's compaction resolution, stated on its heartbeats: the longest its compaction
    # leaves between two sent events of a caught-up follower, beyond its own fetch interval
    # (0: every event is sent); the engine allows for it where it decides a silence
    "compaction_resolution_ms": Field("int", minimum=0),
    # How it compacts: "fixed", at that resolution for every partition (absent: fixed); "lag", at
    # the default for each partition's replica.lag.time.max.ms (state/monitor.py resolution_ms)
    "compaction_scheme": Field("str", choices=("fixed", "lag")),
}


@dataclass(frozen=True, slots=True)
class EventType:
    required: tuple[str, ...]  # besides COMMON; in the order the checks name a missing one
    optional: tuple[str, ...]
    partitioned: bool  # about one partition (keyed and bucketed by it), else about the whole cluster


COMMON = ("type", "ts", "cluster")  # every event has them
# The event types, in the order the engine applies events of the same time: a broker's state
# first, then the partition changes the controller made because of it at the same instant
# (fencing removes the broker from every ISR), so that an ISR exit is explained by the fence
# (state/root_cause.py); then a new leader before its fetches, then the fetch sessions' reads
# (after the fetches that name a partition of theirs), appends and heartbeats.
TYPES: dict[str, EventType] = {
    "broker": EventType(("broker", "state"), ("broker_epoch",), partitioned=False),
    "metadata": EventType(
        ("topic", "partition", "leader", "leader_epoch", "replicas", "isr"),
        ("adding_replicas", "leader_leo", "hw", "min_insync_replicas", "replica_lag_time_max_ms"),
        partitioned=True,
    ),
    "fetch": EventType(
        ("topic", "partition", "replica", "fetch_offset", "leader_leo"),
        (
            "leader_epoch",
            "broker_epoch",
            "log_start_offset",
            "leader_hw",
            "error",
            "diverging_epoch",
            "session_id",
        ),
        partitioned=True,
    ),
    # One fetch session's latest read: every partition the session carries (state/sessions.py)
    # was read then. About many partitions: delivered to every bucket, like a heartbeat.
    "session": EventType(("replica", "leader", "session_id"), (), partitioned=False),
    "append": EventType(("topic", "partition", "leader_leo"), (), partitioned=True),
    "heartbeat": EventType((), ("compaction_resolution_ms", "compaction_scheme"), partitioned=False),
}

# --- derived ------------------------------------------------------------------------------
REQUIRED = {name: t.required for name, t in TYPES.items()}
PARTITIONED = tuple(name for name, t in TYPES.items() if t.partitioned)
BROADCAST = tuple(name for name, t in TYPES.items() if not t.partitioned)  # delivered to every bucket
TIE_RANK = {name: rank for rank, name in enumerate(TYPES)}
NON_NEGATIVE = tuple(name for name, f in FIELDS.items() if f.minimum == 0)
AT_LEAST_ONE = tuple(name for name, f in FIELDS.items() if f.minimum == 1)
ARRAY_FIELDS = tuple(name for name, f in FIELDS.items() if f.kind == "ints")
BROKER_STATES = FIELDS["state"].choices
_ALLOWED = {name: frozenset(t.required + t.optional) for name, t in TYPES.items()}

# The engine's events are plain tuples in this order (streaming/stateful.py builds them from
# columns): the fields it reads, then `raw`, the record's text when it broke the contract.
EVENT_FIELDS = (*(name for name, f in FIELDS.items() if f.read), "raw")


def _at(name: str) -> int:
    return EVENT_FIELDS.index(name)


TYPE = _at("type")
TS = _at("ts")
CLUSTER = _at("cluster")
TOPIC = _at("topic")
PARTITION = _at("partition")
REPLICA = _at("replica")
FETCH_OFFSET = _at("fetch_offset")
LEADER_LEO = _at("leader_leo")
LEADER_EPOCH = _at("leader_epoch")
BROKER_EPOCH = _at("broker_epoch")
LOG_START = _at("log_start_offset")
ERROR = _at("error")
DIVERGING = _at("diverging_epoch")
LEADER = _at("leader")
REPLICAS = _at("replicas")
ISR = _at("isr")
ADDING = _at("adding_replicas")
HW = _at("hw")
MIN_ISR = _at("min_insync_replicas")
LAG_MAX = _at("replica_lag_time_max_ms")
BROKER = _at("broker")
STATE = _at("state")
SESSION_ID = _at("session_id")
COMPACTION_RESOLUTION = _at("compaction_resolution_ms")
COMPACTION_SCHEME = _at("compaction_scheme")
RAW = _at("raw")


def event(type: str, ts: int, cluster: str, **fields: Any) -> dict[str, Any]:
    """One event of the contract as a dict, for the collector and the simulator to publish:
    `type`, `ts`, `cluster`, then `fields` in the order given, those that are None left out
    (absent). ValueError when a field is not one of the type's or a required one is missing."""
    allowed = _ALLOWED.get(type)
    if allowed is None:
        raise ValueError(f"unknown event type: {type}")
    if not fields.keys() <= allowed:
        raise ValueError(f"not a field of a {type} event: {', '.join(sorted(fields.keys() - allowed))}")
    missing = [name for name in TYPES[type].required if fields.get(name) is None]
    if missing:
        raise ValueError(f"missing field for {type}: {', '.join(missing)}")
    out: dict[str, Any] = {"type": type, "ts": ts, "cluster": cluster}
    out.update((name, value) for name, value in fields.items() if value is not None)
    return out


def record_key(ev: Mapping[str, Any]) -> str:
    """The Kafka record key of an event: `cluster/topic/partition`, or `cluster` alone for an
    event about the whole cluster, so that the events of one partition stay in order."""
    if "topic" in ev and "partition" in ev:
        return f"{ev['cluster']}/{ev['topic']}/{ev['partition']}"
    return ev["cluster"]


def as_tuple(ev: Mapping[str, Any]) -> tuple[Any, ...]:
    """An event dict as the engine's tuple (EVENT_FIELDS order; arrays as tuples, absent as None)."""
    return tuple(tuple(v) if isinstance(v := ev.get(name), list) else v for name in EVENT_FIELDS)
