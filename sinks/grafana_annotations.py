"""Alert transitions as Grafana region annotations: what to write, decided purely (no I/O).

One alert episode (one `alert_id`) is one annotation. Its firing creates it at `started_ms`;
its resolve sets `timeEnd` to the resolve's `ts`, which turns the point into a region. The
tags carry everything a dashboard filters on ("key:value", Grafana's own convention), plus
`replmon` on every annotation so one query finds them all:

    replmon  alert:UnderReplicated  cluster:c1  topic:orders  partition:0  replica:3
    severity:warning  alert_id:1f2e...  cause:lag  caused_by:9a8b...  root-cause  silenced

Records come from the Redis alert stream, whose fields are strings ('' for null), so every
function here accepts strings and numbers alike. See docs/grafana.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from replmon.sinks.keys import part

TAG = "replmon"
# The record fields that become "field:value" tags, in this order (the alert's name as "alert").
TAG_FIELDS = (
    "cluster",
    "topic",
    "partition",
    "replica",
    "broker",
    "leader",
    "severity",
    "alert_id",
    "cause",
    "caused_by",
)
# Escaped as key parts (sinks/keys.py), so that a dashboard variable fed by an index set matches.
KEY_PART_FIELDS = {"cluster", "topic", "partition", "replica", "broker", "leader"}
STATUSES = ("firing", "resolved")
MAX_TAG_CHARS = 100  # Grafana's annotation_tag.term is a varchar(100)... keep well-formed tags short


class AlertRecordError(ValueError):
    """The stream entry is not an alert transition the annotations can be made from."""


@dataclass(frozen=True)
class Transition:
    """One alert transition as the annotation consumer needs it."""

    alert_id: str
    status: str  # firing | resolved
    started_ms: int
    ts: int
    tags: tuple[str, ...]
    text: str


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _millis(record: Mapping[str, str], field: str) -> int:
    try:
        return int(record[field])
    except (KeyError, ValueError):
        raise AlertRecordError(f"alert record has no integer {field}: {record.get(field)!r}") from None


def _is_true(value: str) -> bool:
    return value.lower() in ("true", "1")


def tag(field: str, value: str) -> str:
    """One 'field:value' tag, cut to Grafana's tag length (the alert id tag is never that long)."""
    return f"{field}:{value}"[:MAX_TAG_CHARS]


def alert_id_tag(alert_id: str) -> str:
    """The tag that finds an episode's annotation again (after a lost id mapping)."""
    return tag("alert_id", alert_id)


def tags_of(record: Mapping[str, str]) -> tuple[str, ...]:
    tags = [TAG, tag("alert", record["name"])]
    tags += [
        tag(f, part(record[f]) if f in KEY_PART_FIELDS else record[f])
        for f in TAG_FIELDS
        if record.get(f, "") != ""
    ]
    if _is_true(record.get("root_cause", "")) and record.get("caused_by", "") == "":
        tags.append("root-cause")
    if record.get("silenced_by", "") not in ("", "[]", "null"):
        tags.append("silenced")  # recorded and drawn, not notified (docs/outputs.md)
    return tuple(tags)


def firing_text(record: Mapping[str, str]) -> str:
    """'UnderReplicated orders-0: ISR [1] of [1, 2, 3]' (name, subject, the firing reason)."""
    head = " ".join(x for x in (record["name"], record.get("subject", "")) if x)
    reason = record.get("reason", "")
    return f"{head}: {reason}" if reason else head


def resolved_text(firing: str, record: Mapping[str, str]) -> str:
    """The firing text, then what ended it."""
    reason = record.get("reason", "")
    return f"{firing}\nresolved: {reason}" if reason else f"{firing}\nresolved"


def transition(fields: Mapping[Any, Any]) -> Transition:
    """A stream entry's fields as a Transition; AlertRecordError names what is wrong."""
    record = {_text(k): _text(v) for k, v in fields.items()}
    for need in ("alert_id", "name", "status"):
        if not record.get(need):
            raise AlertRecordError(f"alert record lacks {need}")
    if record["status"] not in STATUSES:
        raise AlertRecordError(
            f"alert {record['alert_id']} has status {record['status']!r}, not one of {STATUSES}"
        )
    ts = _millis(record, "ts")
    started = _millis(record, "started_ms") if record.get("started_ms") else ts
    if started > ts:
        raise AlertRecordError(f"alert {record['alert_id']} starts ({started}) after its ts ({ts})")
    return Transition(
        record["alert_id"],
        record["status"],
        started,
        ts,
        tags_of(record),
        firing_text(record) if record["status"] == "firing" else resolved_text(firing_text(record), record),
    )


@dataclass(frozen=True)
class Annotation:
    """What Grafana holds (or should hold) for one episode."""

    id: int
    time: int
    time_end: int
    text: str

    @property
    def closed(self) -> bool:
        return self.time_end > self.time or "\nresolved" in self.text


def patch_for(current: Annotation, t: Transition) -> dict | None:
    """The PATCH body that brings `current` up to date with `t`, or None if nothing changes.

    A firing never changes an annotation (it may arrive after its resolve: replays, or two
    consumers); a resolve sets timeEnd and the resolved text once."""
    if t.status == "firing" or (current.closed and current.time_end == max(t.ts, current.time)):
        return None
    return {"timeEnd": max(t.ts, current.time), "text": t.text}


def create_body(t: Transition, dashboard_uid: str | None = None) -> dict:
    """The POST /api/annotations body: an organization annotation unless a dashboard is given."""
    body = {
        "time": t.started_ms,
        "timeEnd": t.ts if t.status == "resolved" else t.started_ms,
        "tags": list(t.tags),
        "text": t.text,
    }
    if dashboard_uid:
        body["dashboardUID"] = dashboard_uid
    return body
