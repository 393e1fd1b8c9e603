"""Alert lifecycle: each alert episode fires once and resolves once, with a stable id.

An episode is (name, subject, started_ms). The id is a digest of those three, so replaying the
same events yields the same ids. The book only records transitions; deciding *whether* a
condition holds is the monitor's job.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

SEVERITY = {
    "IsrExitImminent": "warning",
    "ReplicaOutOfSync": "warning",
    "UnderReplicated": "warning",
    "UnderMinIsr": "critical",
    "AtMinIsr": "warning",
    "HighWatermarkStalled": "critical",
    "IsrFlapping": "warning",
    "TelemetryMissing": "warning",
}


def alert_id(name: str, subject: str, started_ms: int) -> str:
    """Deterministic id of one alert episode."""
    return hashlib.sha1(f"{name}|{subject}|{started_ms}".encode()).hexdigest()[:20]


@dataclass(slots=True)
class OpenAlert:
    alert_id: str
    started_ms: int
    labels: tuple  # (cluster, topic, partition, replica)


class AlertBook:
    """Open episodes of one scope (a partition, or a cluster) and the transitions they make."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open: dict[tuple[str, str], OpenAlert] = {}

    def to_rows(self) -> list[tuple]:
        """The open episodes as plain tuples, for the state format (state/codec.py):
        (name, subject, alert_id, started_ms, cluster, topic, partition, replica)."""
        return [(name, subject, a.alert_id, a.started_ms, *a.labels)
                for (name, subject), a in self.open.items()]

    @classmethod
    def from_rows(cls, rows) -> "AlertBook":
        """The book `to_rows` describes."""
        book = cls()
        for name, subject, aid, started_ms, *labels in rows:
            book.open[(name, subject)] = OpenAlert(aid, started_ms, tuple(labels))
        return book

    def is_firing(self, name: str, subject: str) -> bool:
        return (name, subject) in self.open

    def update(self, out: list, name: str, subject: str, active: bool, now_ms: int,
               labels: tuple, reason, resolved: str | None = None) -> None:
        """Fire or resolve `name` for `subject` so that its state matches `active`.

        `reason` is a string or a zero-argument callable (built only on a transition);
        `resolved`, when given, is the text of the resolving transition.
        """
        key = (name, subject)
        current = self.open.get(key)
        if active and current is None:
            aid = alert_id(name, subject, now_ms)
            self.open[key] = OpenAlert(aid, now_ms, labels)
            out.append(_record(aid, name, "firing", subject, labels, now_ms, now_ms,
                               reason() if callable(reason) else reason))
        elif not active and current is not None:
            del self.open[key]
            text = resolved if resolved is not None else (reason() if callable(reason) else reason)
            out.append(_record(current.alert_id, name, "resolved", subject, labels,
                               current.started_ms, now_ms, text))

    def resolve_all(self, out: list, now_ms: int, reason: str, prefix: str = "") -> None:
        """Resolve every open episode whose subject starts with `prefix`."""
        for (name, subject), alert in list(self.open.items()):
            if subject.startswith(prefix):
                del self.open[(name, subject)]
                out.append(_record(alert.alert_id, name, "resolved", subject, alert.labels,
                                   alert.started_ms, now_ms, reason))


def _record(aid, name, status, subject, labels, started_ms, ts, reason) -> dict:
    cluster, topic, partition, replica = labels
    return {
        "alert_id": aid,
        "name": name,
        "status": status,
        "severity": SEVERITY[name],
        "cluster": cluster,
        "topic": topic,
        "partition": partition,
        "replica": replica,
        "subject": subject,
        "started_ms": started_ms,
        "ts": ts,
        "reason": reason,
    }
