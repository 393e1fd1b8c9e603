"""The contract checks (docs/events.md, declared in state/events.py) in Python, vectorised over a
pandas frame of parsed events: the reference for the JVM's checks (parse.contract_reason, which
the query runs), which tests compare with it row by row, and the checks of the tests'
Spark-free drivers (tests/faults/replay.py). Each check is a numpy mask; the first failing check
of a row is its quarantine reason.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from replmon.state.events import AT_LEAST_ONE, BROKER_STATES, NON_NEGATIVE, REQUIRED
from replmon.state.sessions import NO_LEADER, NOT_A_SESSION, OWN_LEADER
from replmon.streaming.contract import MALFORMED


def _num(pdf: pd.DataFrame, name: str) -> np.ndarray:
    col = pdf[name]
    if col.dtype.kind in "fiu":  # as Arrow delivers the contract's ints: no conversion to pay
        return col.to_numpy(dtype=float)
    return pd.to_numeric(col, errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def invalid_reasons(pdf: pd.DataFrame, now_ms: int, max_future_ms: int) -> np.ndarray:
    """An object array: None for a valid event, else why it is not."""
    kind = pdf["type"].to_numpy(dtype=object)
    missing = {
        name: pdf[name].isna().to_numpy()
        for name in {"type", "ts", "cluster", *(f for fs in REQUIRED.values() for f in fs)}
    }
    checks = [
        *_record_checks(pdf, kind, missing),
        *_required_field_checks(pdf, kind, missing),
        *_value_checks(pdf, kind),
        *_future_checks(pdf, now_ms, max_future_ms),
    ]
    return _first_failing(checks, len(pdf))


# A check: a mask of the rows that fail it, and the reason (one, or one per row).
Check = tuple[np.ndarray, object]


def _record_checks(pdf: pd.DataFrame, kind: np.ndarray, missing: dict[str, np.ndarray]) -> list[Check]:
    """Is the record an event at all: readable bytes, well-formed JSON, a known type."""
    byte_problem = (
        pdf["byte_problem"].to_numpy(dtype=object)
        if "byte_problem" in pdf
        else np.full(len(pdf), None, dtype=object)
    )
    bad_bytes = pd.notna(byte_problem)
    checks: list[Check] = [
        (bad_bytes, byte_problem),
        (pdf["malformed"].to_numpy(dtype=bool) & ~bad_bytes, MALFORMED),
        (missing["type"], "missing field: type"),
    ]
    known = np.isin(kind, list(REQUIRED))
    unknown = ~known & ~missing["type"]
    if unknown.any():
        checks.append((unknown, np.array([f"unknown type: {k}" for k in kind], dtype=object)))
    return checks


def _required_field_checks(
    pdf: pd.DataFrame, kind: np.ndarray, missing: dict[str, np.ndarray]
) -> list[Check]:
    """The fields every event has (ts, a cluster name), then those its type requires."""
    cluster = pdf["cluster"].to_numpy(dtype=object)
    checks: list[Check] = [
        (missing["ts"], "missing field: ts"),
        (missing["cluster"] | (cluster == ""), "missing field: cluster"),
    ]
    for event_type, names in REQUIRED.items():
        is_type = kind == event_type
        if not is_type.any():
            continue
        for name in names:
            checks.append((is_type & missing[name], f"missing field for {event_type}: {name}"))
    return checks


def _value_checks(pdf: pd.DataFrame, kind: np.ndarray) -> list[Check]:
    """Values in range: each field's minimum (state/events.py), a broker's state, a session's ids."""
    checks: list[Check] = []
    for name in NON_NEGATIVE:
        checks.append((_num(pdf, name) < 0, f"negative {name}"))
    for name in AT_LEAST_ONE:
        checks.append((_num(pdf, name) < 1, f"{name} must be at least 1"))
    is_broker = kind == "broker"
    if is_broker.any():
        state = pdf["state"].to_numpy(dtype=object)
        bad = is_broker & ~np.isin(state, list(BROKER_STATES)) & ~pdf["state"].isna().to_numpy()
        checks.append((bad, np.array([f"unknown broker state: {s}" for s in state], dtype=object)))
    is_session = kind == "session"
    if is_session.any():
        leader = _num(pdf, "leader")
        checks += [
            (is_session & (_num(pdf, "session_id") == 0), NOT_A_SESSION),
            (is_session & (leader < 0), NO_LEADER),
            (is_session & (_num(pdf, "replica") == leader), OWN_LEADER),
        ]
    return checks


def _future_checks(pdf: pd.DataFrame, now_ms: int, max_future_ms: int) -> list[Check]:
    """An event time too far ahead of the wall clock."""
    future = _num(pdf, "ts") > now_ms + max_future_ms
    if not future.any():
        return []
    ts = pdf["ts"].to_numpy()
    reasons = np.array(
        [f"event time {t:.0f} is more than {max_future_ms} ms ahead of the wall clock" for t in ts],
        dtype=object,
    )
    return [(future, reasons)]


def _first_failing(checks: list[Check], n: int) -> np.ndarray:
    """Each row's reason from the first check it fails, None when it passes them all."""
    reasons = np.full(n, None, dtype=object)
    for mask, reason in reversed(checks):
        if mask.any():
            reasons[mask] = reason[mask] if isinstance(reason, np.ndarray) else reason
    return reasons
