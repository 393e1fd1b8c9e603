"""The conformance scenario format (docs/kafka-rules.md §10) and its validation.

A scenario is an already-parsed JSON object: config, the state just after makeLeader, events,
and expectations after given events. `validate_scenario` rejects anything the runner would
otherwise have to guess about (a missing field, a typo in an expectation key, an unknown event).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .legacy import LEGACY_RULE_SETS

EVENT_TYPES = (
    "append",
    "fetch",
    "tick",
    "alter_partition_response",
    "controller_update",
    "broker_state",
    "follower_fetch_response",
)
# Field name -> its value check (each returns an error text, or None when the value fits).
Fields = Mapping[str, Callable[[Any], str | None]]


# ---- value checkers: each returns an error text, or None when the value fits ---------------------------


def _int(v: Any) -> str | None:
    return None if type(v) is int else f"must be an integer, got {v!r}"


def _nonneg_int(v: Any) -> str | None:
    return _int(v) or (None if v >= 0 else f"must be >= 0, got {v}")


def _pos_int(v: Any) -> str | None:
    return _int(v) or (None if v >= 1 else f"must be >= 1, got {v}")


def _bool(v: Any) -> str | None:
    return None if type(v) is bool else f"must be true or false, got {v!r}"


def _str(v: Any) -> str | None:
    return None if isinstance(v, str) else f"must be a string, got {v!r}"


def _ids(v: Any) -> str | None:
    if not isinstance(v, list) or any(type(x) is not int for x in v):
        return f"must be a list of integer ids, got {v!r}"
    return None


def _one_of(*allowed: Any) -> Callable[[Any], str | None]:
    return lambda v: None if v in allowed else f"must be one of {', '.join(map(repr, allowed))}, got {v!r}"


def _epoch_or_flag(v: Any) -> str | None:
    return None if type(v) in (int, bool) else f"must be an epoch or true/false, got {v!r}"


def _by_id(value_check: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    """An object keyed by replica id ("2"), each value checked by value_check."""

    def check(v: Any) -> str | None:
        if not isinstance(v, dict):
            return f"must be an object keyed by replica id, got {v!r}"
        for k, item in v.items():
            if not _is_id_key(k):
                return f"key {k!r} is not a replica id"
            err = value_check(item)
            if err:
                return f"[{k}] {err}"
        return None

    return check


def _fields(spec: Fields) -> Callable[[Any], str | None]:
    """An object whose keys are all in spec, each value checked."""

    def check(v: Any) -> str | None:
        if not isinstance(v, dict):
            return f"must be an object, got {v!r}"
        for k, item in v.items():
            if k not in spec:
                continue  # checked by the runner, which reports it as a failing check
            err = spec[k](item)
            if err:
                return f"{k} {err}"
        return None

    return check


def _is_id_key(k: Any) -> bool:
    return isinstance(k, (str, int)) and not isinstance(k, bool) and str(k).lstrip("-").isdigit()


_REPLICA_STATE_FIELDS = {
    "leo": _int,
    "log_start_offset": _int,
    "last_caught_up_ms": _nonneg_int,
    "last_fetch_leader_leo": _int,
    "last_fetch_ms": _nonneg_int,
    "broker_epoch": lambda v: None if v is None else _int(v),
}
_FOLLOWER_VIEW_FIELDS = {"leo": _int, "hw": _int, "log_start_offset": _int, "consumer_lag": _int}

# (required fields, optional fields) per block; `note` is allowed everywhere.
_CONFIG = (
    {
        "replica_lag_time_max_ms": _pos_int,
        "min_insync_replicas": _pos_int,
        "alter_partition": _one_of("immediate", "manual"),
    },
    {"legacy_replica_lag_max_messages": _nonneg_int},
)
_INITIAL = (
    {
        "t_ms": _int,
        "leader": _int,
        "leader_epoch": _int,
        "replicas": _ids,
        "isr": _ids,
        "leader_leo": _nonneg_int,
        "hw": _int,
    },
    {
        "leader_epoch_start_offset": _int,
        "adding_replicas": _ids,
        "followers": _by_id(_fields(_REPLICA_STATE_FIELDS)),
        "fenced": _ids,
        "shutting_down": _ids,
        "broker_epochs": _by_id(_int),
        "follower_view": _by_id(_fields(_FOLLOWER_VIEW_FIELDS)),
    },
)
_EVENTS: dict[str, tuple[Fields, Fields]] = {
    "append": ({"leader_leo": _nonneg_int}, {}),
    "fetch": (
        {"replica": _int, "fetch_offset": _int},
        {"broker_epoch": _int, "error": _str, "diverging_epoch": _epoch_or_flag, "log_start_offset": _int},
    ),
    "tick": ({}, {}),
    "alter_partition_response": ({"result": _one_of("success", "error")}, {"error": _str}),
    "controller_update": (
        {"isr": _ids, "leader_epoch": _int},
        {
            "is_new_leader": _bool,
            "replicas": _ids,
            "adding_replicas": _ids,
            "leader_leo": _nonneg_int,
            "hw": _int,
        },
    ),
    "broker_state": ({"replica": _int}, {"fenced": _bool, "shutting_down": _bool, "broker_epoch": _int}),
    "follower_fetch_response": (
        {"replica": _int, "fetch_offset": _int, "records_end_offset": _int, "leader_hw": _int},
        {"log_start_offset": _int},
    ),
}
EXPECTATION_KEYS: dict[str, Callable[[Any], str | None]] = {
    "isr": _ids,
    "maximal_isr": _ids,
    "pending": _one_of("expand", "shrink", None),
    "hw": _int,
    "out_of_sync": _ids,
    "shrink_proposed": _ids,
    "caught_up": _by_id(_bool),
    "replica_state": _by_id(_fields(_REPLICA_STATE_FIELDS)),
    "fetch_accepted": _bool,
    "response_hw": _int,
    "under_min_isr": _bool,
    "at_min_isr": _bool,
    "under_replicated": _bool,
    "leader_epoch_start_offset": _int,
    "follower_view": _by_id(_fields(_FOLLOWER_VIEW_FIELDS)),
    "legacy": _fields(dict.fromkeys(LEGACY_RULE_SETS, _ids)),
}
# Keys that only make sense after one kind of event.
EXPECTATION_EVENT_TYPES = {
    "shrink_proposed": "tick",
    "legacy": "tick",
    "fetch_accepted": "fetch",
    "response_hw": "fetch",
}


def _check_block(where: str, block: Any, required: Fields, optional: Fields) -> None:
    if not isinstance(block, dict):
        raise ValueError(f"{where} must be an object, got {type(block).__name__}")
    for k in required:
        if k not in block:
            raise ValueError(f"{where}: missing field {k!r}")
    for k, v in block.items():
        check = required.get(k) or optional.get(k) or (_str if k == "note" else None)
        if check is None:
            # Informational fields (source, description, comments) are not ours to refuse; an
            # unknown *expectation* key is reported by the runner as a failing check instead.
            continue
        err = check(v)
        if err:
            raise ValueError(f"{where}: {k} {err}")


def validate_scenario(d: Any) -> None:
    """Raise ValueError naming the first problem if d is not a well-formed scenario (§10)."""
    if not isinstance(d, dict):
        raise ValueError(f"a scenario must be a JSON object, got {type(d).__name__}")
    name = d.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("scenario: missing or empty 'name'")
    top = {
        "name": _str,
        "config": _fields({**_CONFIG[0], **_CONFIG[1]}),
        "initial": lambda v: None,
        "events": lambda v: None if isinstance(v, list) else "must be a list",
        "expect": lambda v: None if isinstance(v, list) else "must be a list",
    }
    _check_block(f"scenario {name!r}", d, top, {"source": _str, "description": _str})
    _check_block(f"{name}: config", d["config"], *_CONFIG)
    _check_initial(name, d["initial"])
    events = d["events"]
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise ValueError(f"{name}: event {i} must be an object")
        kind = ev.get("type")
        if kind not in _EVENTS:
            raise ValueError(f"{name}: event {i}: unknown type {kind!r} (known: {', '.join(EVENT_TYPES)})")
        required, optional = _EVENTS[kind]
        _check_block(f"{name}: event {i} ({kind})", ev, {"t_ms": _int, "type": _str, **required}, optional)
        if kind == "broker_state" and not {"fenced", "shutting_down", "broker_epoch"} & ev.keys():
            raise ValueError(f"{name}: event {i} (broker_state): needs fenced, shutting_down or broker_epoch")
    for j, exp in enumerate(d["expect"]):
        _check_expectation(name, j, exp, events)


def _check_initial(name: str, initial: Any) -> None:
    _check_block(f"{name}: initial", initial, *_INITIAL)
    replicas, isr, leader = initial["replicas"], initial["isr"], initial["leader"]
    if leader not in replicas:
        raise ValueError(f"{name}: initial: leader {leader} is not among the replicas {replicas}")
    if not set(isr) <= set(replicas):
        raise ValueError(f"{name}: initial: isr {isr} is not a subset of the replicas {replicas}")
    if not 0 <= initial["hw"] <= initial["leader_leo"]:
        raise ValueError(
            f"{name}: initial: hw {initial['hw']} must be in [0, leader_leo {initial['leader_leo']}]"
        )
    for k in initial.get("followers", {}):
        if int(k) == leader or int(k) not in replicas:
            raise ValueError(
                f"{name}: initial: followers[{k}] is not a follower (replicas {replicas}, leader {leader})"
            )


def _check_expectation(name: str, j: int, exp: Any, events: list[Any]) -> None:
    where = f"{name}: expect[{j}]"
    if not isinstance(exp, dict):
        raise ValueError(f"{where} must be an object")
    at = exp.get("after_event")
    if type(at) is not int or not 0 <= at < len(events):
        raise ValueError(f"{where}: after_event must be an event index in [0, {len(events) - 1}], got {at!r}")
    _check_block(where, exp, {"after_event": _int}, EXPECTATION_KEYS)
    kind = events[at]["type"]
    for key, only in EXPECTATION_EVENT_TYPES.items():
        if key in exp and kind != only:
            raise ValueError(f"{where}: {key!r} is only checked after a {only} event, event {at} is {kind!r}")
