"""What a replay reports, from its alert transitions and ISR exits (pure: no Spark, no I/O).

- `window_view`: the transitions inside [T1, T2], and the episodes already firing at T1 (they
  started before it: reported as firing at T1, never as new).
- `summarize`: per variant, what fired, when it was first seen, ISR shrinks, under-replicated
  minutes and HW stall time inside the window.
- `compare`: each what-if variant against the actual settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replmon.streaming.replay_window import Window


@dataclass
class WindowView:
    transitions: list  # alert transitions with start <= ts <= end, in order
    firing_at_start: list  # firing records of episodes open at start (started before it)


def window_view(transitions: list[dict], window: Window) -> WindowView:
    ordered = sorted(transitions, key=lambda r: (r["ts"], r["status"] != "resolved", r["subject"], r["name"]))
    open_at_start: dict[str, dict] = {}
    inside = []
    for r in ordered:
        if r["ts"] < window.start_ms:
            if r["status"] == "firing":
                open_at_start[r["alert_id"]] = r
            else:
                open_at_start.pop(r["alert_id"], None)
        elif r["ts"] <= window.end_ms:
            inside.append(r)
    return WindowView(inside, sorted(open_at_start.values(), key=lambda r: (r["started_ms"], r["subject"])))


def episodes(view: WindowView, window: Window) -> list[dict]:
    """Alert episodes overlapping the window, clipped to it: name, subject, alert_id, from_ms,
    to_ms (the window end while still firing), started_ms and whether it resolved inside."""
    out: dict[str, dict] = {}
    for r in view.firing_at_start:
        out[r["alert_id"]] = _episode(r, window.start_ms, window.end_ms)
    for r in view.transitions:
        if r["status"] == "firing":
            out[r["alert_id"]] = _episode(r, r["ts"], window.end_ms)
        elif r["alert_id"] in out:
            out[r["alert_id"]].update(to_ms=r["ts"], resolved=True)
        else:  # resolved inside, fired before the warm-up could see it
            out[r["alert_id"]] = {**_episode(r, window.start_ms, r["ts"]), "resolved": True}
    return sorted(out.values(), key=lambda e: (e["from_ms"], e["subject"], e["name"]))


def _episode(r: dict[str, Any], from_ms: int, to_ms: int) -> dict:
    return {
        "name": r["name"],
        "subject": r["subject"],
        "alert_id": r["alert_id"],
        "severity": r["severity"],
        "started_ms": r["started_ms"],
        "from_ms": from_ms,
        "to_ms": to_ms,
        "resolved": False,
    }


@dataclass
class Summary:
    name: str
    fired: dict = field(default_factory=dict)  # (alert name, subject) -> first time seen firing
    alerts: int = 0  # episodes overlapping the window
    isr_shrinks: int = 0  # leader ISR shrinks (one may remove several replicas)
    replicas_removed: int = 0
    under_replicated_min: float = 0.0  # partition-minutes with UnderReplicated firing
    hw_stalled_s: float = 0.0  # partition-seconds with HighWatermarkStalled firing


def summarize(name: str, transitions: list[dict], isr_exits: list[dict], window: Window) -> Summary:
    view = window_view(transitions, window)
    eps = episodes(view, window)
    s = Summary(name, alerts=len(eps))
    for e in eps:
        key = (e["name"], e["subject"])
        s.fired[key] = min(s.fired.get(key, e["started_ms"]), e["started_ms"])
        length = e["to_ms"] - e["from_ms"]
        if e["name"] == "UnderReplicated":
            s.under_replicated_min += length / 60_000
        elif e["name"] == "HighWatermarkStalled":
            s.hw_stalled_s += length / 1000
    exits = [x for x in isr_exits if window.contains(x["ts"])]
    s.replicas_removed = len(exits)
    s.isr_shrinks = len({(x["cluster"], x["topic"], x["partition"], x["ts"]) for x in exits})
    return s


@dataclass
class Comparison:
    variant: str
    only_in_actual: list  # (alert name, subject) that fired only with the actual settings
    only_in_variant: list  # ... only with the variant's
    detection_delta_ms: dict  # (alert name, subject) -> variant first firing − actual's
    actual: Summary
    other: Summary


def compare(actual: Summary, other: Summary) -> Comparison:
    a, b = set(actual.fired), set(other.fired)
    both = sorted(a & b)
    return Comparison(
        other.name,
        sorted(a - b),
        sorted(b - a),
        {k: other.fired[k] - actual.fired[k] for k in both if other.fired[k] != actual.fired[k]},
        actual,
        other,
    )
