"""Run one conformance scenario (docs/kafka-rules.md §10) against the engine and list what disagrees.

Pure: takes an already-parsed scenario dict, returns failures; reading files is the caller's job
(streaming/conformance_cmd.py).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from .follower import FollowerView, process_fetch_response
from .legacy import CURRENT, LEGACY_RULE_SETS
from .partition import KAFKA_DEFAULTS, FetchOutcome, PartitionConfig, PartitionLeader
from .scenario import validate_scenario

__all__ = ["Failure", "format_failure", "run_scenario", "validate_scenario"]

_SET_KEYS = ("isr", "maximal_isr", "out_of_sync", "shrink_proposed")


class Failure(NamedTuple):
    scenario: str
    event_index: int  # -1: the initial state
    key: str  # e.g. "hw", "replica_state.2.last_caught_up_ms", "legacy.v0_8"
    expected: Any
    got: Any


def format_failure(f: Failure) -> str:
    return (
        f"{f.scenario} #{f.event_index} {f.key}: expected {json.dumps(f.expected)}, got {json.dumps(f.got)}"
    )


class _Observed:
    """What one event produced beyond the partition state (ticks: the pre-tick view; fetches: the outcome)."""

    __slots__ = ("fetch", "legacy_before", "out_of_sync_before", "shrink_proposed")

    def __init__(self) -> None:
        self.out_of_sync_before: tuple[int, ...] | None = None
        self.legacy_before: dict[str, tuple[int, ...]] = {}
        self.shrink_proposed: tuple[int, ...] = ()
        self.fetch: FetchOutcome | None = None


def run_scenario(scenario: dict[str, Any]) -> list[Failure]:
    """Every expectation of the scenario that the engine does not meet (empty: it conforms)."""
    validate_scenario(scenario)
    name = scenario["name"]
    initial = scenario["initial"]
    try:
        p = _make_leader(scenario["config"], initial)
    except Exception as e:  # noqa: BLE001 - an engine error is reported like any other disagreement
        return [Failure(name, -1, "error", None, f"{type(e).__name__}: {e}")]
    failures = []
    if p.hw != initial["hw"]:  # docs/kafka-rules.md §10.2: initial.hw is already makeLeader's HW
        failures.append(Failure(name, -1, "initial.hw", initial["hw"], p.hw))
    views = {int(r): FollowerView(**v) for r, v in initial.get("follower_view", {}).items()}
    expectations: dict[int, list[dict[str, Any]]] = {}
    for exp in scenario["expect"]:
        expectations.setdefault(exp["after_event"], []).append(exp)
    for i, ev in enumerate(scenario["events"]):
        try:
            observed = _apply(p, views, ev)
        except Exception as e:  # noqa: BLE001 - an engine error is a failed check, not a crashed run
            failures.append(Failure(name, i, "error", None, f"{type(e).__name__}: {e}"))
            return failures
        for exp in expectations.get(i, ()):
            failures.extend(_check(name, i, exp, p, views, ev["t_ms"], observed))
    return failures


def _make_leader(config: dict[str, Any], initial: dict[str, Any]) -> PartitionLeader:
    return PartitionLeader(
        config=PartitionConfig(
            replica_lag_time_max_ms=config["replica_lag_time_max_ms"],
            min_insync_replicas=config["min_insync_replicas"],
            alter_partition=config["alter_partition"],
            replica_lag_max_messages=config.get(
                "legacy_replica_lag_max_messages", KAFKA_DEFAULTS.replica_lag_max_messages
            ),
        ),
        now_ms=initial["t_ms"],
        leader=initial["leader"],
        leader_epoch=initial["leader_epoch"],
        replicas=initial["replicas"],
        isr=initial["isr"],
        leader_leo=initial["leader_leo"],
        hw=initial["hw"],
        leader_epoch_start_offset=initial.get("leader_epoch_start_offset"),
        adding_replicas=initial.get("adding_replicas", ()),
        followers={int(r): dict(f) for r, f in initial.get("followers", {}).items()},
        fenced=initial.get("fenced", ()),
        shutting_down=initial.get("shutting_down", ()),
        broker_epochs={int(r): e for r, e in initial.get("broker_epochs", {}).items()},
    )


def _apply(p: PartitionLeader, views: dict[int, FollowerView], ev: dict[str, Any]) -> _Observed:
    """Process one event (docs/kafka-rules.md §10.3)."""
    t, kind = ev["t_ms"], ev["type"]
    observed = _Observed()
    if kind == "append":
        p.append(t, ev["leader_leo"])
    elif kind == "fetch":
        observed.fetch = p.fetch(
            t,
            ev["replica"],
            ev["fetch_offset"],
            broker_epoch=ev.get("broker_epoch"),
            log_start_offset=ev.get("log_start_offset"),
            error=ev.get("error"),
            diverging_epoch=ev.get("diverging_epoch"),
        )
    elif kind == "tick":
        # §10.4: a tick's out_of_sync / legacy describe the ISR before it, ignoring the in-flight gate.
        observed.out_of_sync_before = p.out_of_sync_replicas(t, ignore_inflight=True, rule_set=CURRENT)
        observed.legacy_before = {
            rs: p.out_of_sync_replicas(t, ignore_inflight=True, rule_set=rs) for rs in LEGACY_RULE_SETS
        }
        observed.shrink_proposed = p.isr_expiration(t)
    elif kind == "alter_partition_response":
        p.alter_partition_response(t, ev["result"], ev.get("error"))
    elif kind == "controller_update":
        p.controller_update(
            t,
            isr=ev["isr"],
            leader_epoch=ev["leader_epoch"],
            is_new_leader=ev.get("is_new_leader", False),
            replicas=ev.get("replicas"),
            adding_replicas=ev.get("adding_replicas"),
            leader_leo=ev.get("leader_leo"),
            hw=ev.get("hw"),
        )
    elif kind == "broker_state":
        p.set_broker_state(
            ev["replica"],
            fenced=ev.get("fenced"),
            shutting_down=ev.get("shutting_down"),
            broker_epoch=ev.get("broker_epoch"),
        )
    elif kind == "follower_fetch_response":
        view = views.setdefault(ev["replica"], FollowerView())
        process_fetch_response(
            view,
            fetch_offset=ev["fetch_offset"],
            records_end_offset=ev["records_end_offset"],
            leader_hw=ev["leader_hw"],
            log_start_offset=ev.get("log_start_offset"),
        )
    else:  # validate_scenario already refused it
        raise ValueError(f"unknown event type {kind!r}")
    return observed


_PARTITION_KEYS = (
    "hw",
    "pending",
    "leader_epoch_start_offset",
    "under_min_isr",
    "at_min_isr",
    "under_replicated",
    "isr",
    "maximal_isr",
)


def _check(
    name: str,
    i: int,
    exp: dict[str, Any],
    p: PartitionLeader,
    views: dict[int, FollowerView],
    t: int,
    observed: _Observed,
) -> list[Failure]:
    """Compare the expectation keys of one block (docs/kafka-rules.md §10.4) with the state after event i."""
    failures: list[Failure] = []

    def compare(key: str, expected: Any, got: Any) -> None:
        if expected != got:
            failures.append(Failure(name, i, key, expected, got))

    for key, expected in exp.items():
        if key in ("after_event", "note"):
            continue
        if key in _SET_KEYS:
            got = _set_value(key, p, t, observed)
            compare(key, sorted(expected), sorted(got))
        elif key == "legacy":
            for rule_set, ids in expected.items():
                before = observed.legacy_before.get(rule_set)
                compare(
                    f"legacy.{rule_set}",
                    sorted(ids),
                    sorted(before) if before is not None else "unknown rule set",
                )
        elif key == "caught_up":
            for r, flag in expected.items():
                compare(f"caught_up.{r}", flag, p.is_caught_up(int(r), t))
        elif key == "replica_state":
            for r, fields in expected.items():
                state = p.followers.get(int(r))
                for field, value in fields.items():
                    compare(
                        f"replica_state.{r}.{field}",
                        value,
                        None if state is None else getattr(state, field, "unsupported field"),
                    )
        elif key == "follower_view":
            for r, fields in expected.items():
                view = views.get(int(r))
                for field, value in fields.items():
                    compare(
                        f"follower_view.{r}.{field}",
                        value,
                        None if view is None else getattr(view, field, "unsupported field"),
                    )
        elif key == "fetch_accepted":
            compare(key, expected, None if observed.fetch is None else observed.fetch.accepted)
        elif key == "response_hw":
            compare(key, expected, None if observed.fetch is None else observed.fetch.response_hw)
        elif key in _PARTITION_KEYS:
            compare(key, expected, getattr(p, key))
        else:
            failures.append(Failure(name, i, key, expected, "unsupported expectation key"))
    return failures


def _set_value(key: str, p: PartitionLeader, t: int, observed: _Observed) -> tuple[int, ...]:
    if key == "isr":
        return p.isr
    if key == "maximal_isr":
        return p.maximal_isr
    if key == "shrink_proposed":
        return observed.shrink_proposed
    # out_of_sync: before a tick, or on the ISR after any other event; always ignoring the in-flight gate.
    if observed.out_of_sync_before is not None:
        return observed.out_of_sync_before
    return p.out_of_sync_replicas(t, ignore_inflight=True, rule_set=CURRENT)
