"""Alert lifecycle: each alert episode fires once and resolves once, with a stable id.

An episode is (name, subject, started_ms). The id is a digest of those three, so replaying the
same events yields the same ids. The book only records transitions; deciding *whether* a
condition holds is the monitor's job.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypedDict, cast

from typing_extensions import ReadOnly, Unpack

from replmon.state.alert_rules import BROKER_ALERTS, RULES

# The severity policy (docs/alerts.md): `critical` pages, `warning` goes to the team's channel,
# `info` only shows on dashboards and in the alert stream. One column of the rules table.
SEVERITY = {rule.name: rule.severity for rule in RULES}
NOTIFIED_SEVERITIES = ("critical", "warning")
# Consequences that still page on their own, root cause or not: data can no longer be written
# (acks=all) or read.
ALWAYS_NOTIFIED = ("UnderMinIsr", "OfflinePartition")


# An alert's labels: (cluster, topic, partition, replica); a broker alert has its broker as the replica.
Labels = tuple[str, str | None, int | None, int | None]


class _AlertCore(TypedDict):
    alert_id: ReadOnly[str]
    name: ReadOnly[str]
    status: ReadOnly[str]  # firing, updated or resolved
    severity: ReadOnly[str]
    cluster: ReadOnly[str]
    topic: ReadOnly[str | None]
    partition: ReadOnly[int | None]
    replica: ReadOnly[int | None]
    broker: ReadOnly[int | None]
    subject: ReadOnly[str]
    started_ms: ReadOnly[int]
    ts: ReadOnly[int]
    reason: ReadOnly[str]
    cause: ReadOnly[str | None]
    caused_by: ReadOnly[str | None]
    root_cause: ReadOnly[bool]
    notify: ReadOnly[bool]
    silenced_by: ReadOnly[list[str]]


class AlertExtras(TypedDict, total=False):
    """The fields only some alert records carry, given to the record's maker (`alert_record`,
    `AlertBook.fire`) so that the record is complete when it is made."""

    cause_ms: ReadOnly[int]
    counts: ReadOnly[dict[str, int]]
    leader: ReadOnly[int | None]
    replicas: ReadOnly[list[int]]
    brokers: ReadOnly[list[int]]
    fetcher_id: ReadOnly[int]
    partitions: ReadOnly[list[str]]


class AlertRecord(_AlertCore, AlertExtras, total=False):
    """One alert transition, the record of docs/outputs.md. Every field is read-only: a record
    is never changed once emitted; a later stage that adds to it (the cluster's cause, a
    silence) makes a new record with `derived`."""


# The alert records one step of the engine emits, in order.
Alerts = list[AlertRecord]


def derived(rec: AlertRecord, **changes: Any) -> AlertRecord:
    """A copy of `rec` with `changes`: how a later stage adds to a record it did not make."""
    unknown = changes.keys() - AlertRecord.__annotations__.keys()
    if unknown:
        raise KeyError(f"not alert record fields: {sorted(unknown)}")
    return cast(AlertRecord, {**rec, **changes})  # every key is one of AlertRecord's (checked above)


# A follower out of sync that no known root explains: where the fetcher-stall check
# (state/fetcher.py) starts.
OUT_OF_SYNC = "ReplicaOutOfSync"


class OutOfSync(NamedTuple):
    """A ReplicaOutOfSync episode that opened with no `caused_by`: its labels and time."""

    cluster: str
    topic: str
    partition: int
    replica: int
    ts: int


class Emitted(list[AlertRecord]):
    """The alert records one call of the bucket emits, in order, and the decisions among them
    that a later check of the same call acts on: `out_of_sync`, the followers that went out of
    sync with no known root (recorded by `AlertBook.fire` as it makes the record, so that no
    one has to search the records for them). A plain list works wherever this is passed; it
    just records no decisions."""

    __slots__ = ("out_of_sync",)

    def __init__(self) -> None:
        super().__init__()
        self.out_of_sync: list[OutOfSync] = []

    def record_out_of_sync(self, labels: Labels, ts: int) -> None:
        cluster, topic, partition, replica = labels
        assert topic is not None and partition is not None and replica is not None  # a replica's alert
        self.out_of_sync.append(OutOfSync(cluster, topic, partition, replica, ts))

    def take_out_of_sync(self) -> list[OutOfSync]:
        """The out-of-sync decisions recorded since the last take."""
        taken, self.out_of_sync = self.out_of_sync, []
        return taken


def is_notified(name: str, caused_by: str | None) -> bool:
    """Whether a transition goes to the on-call channels (before silences are applied)."""
    return SEVERITY[name] in NOTIFIED_SEVERITIES and (caused_by is None or name in ALWAYS_NOTIFIED)


def alert_id(name: str, subject: str, started_ms: int) -> str:
    """Deterministic id of one alert episode."""
    return hashlib.sha1(f"{name}|{subject}|{started_ms}".encode()).hexdigest()[:20]


@dataclass(slots=True)
class OpenAlert:
    alert_id: str
    started_ms: int
    labels: Labels
    caused_by: str | None = None
    cause: str | None = None


class AlertBook:
    """Open episodes of one scope (a partition, or a cluster) and the transitions they make."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open: dict[tuple[str, str], OpenAlert] = {}

    def to_rows(self) -> list[tuple[Any, ...]]:
        """The open episodes as plain tuples, for the state format (state/codec.py):
        (name, subject, alert_id, started_ms, cluster, topic, partition, replica, caused_by,
        cause); rows written before caused_by existed end after replica."""
        return [
            (name, subject, a.alert_id, a.started_ms, *a.labels, a.caused_by, a.cause)
            for (name, subject), a in self.open.items()
        ]

    @classmethod
    def from_rows(cls, rows: Iterable[Any]) -> AlertBook:
        """The book `to_rows` describes."""
        book = cls()
        for name, subject, aid, started_ms, *rest in rows:
            labels: Labels = (rest[0], rest[1], rest[2], rest[3])
            book.open[(name, subject)] = OpenAlert(aid, started_ms, labels, *rest[4:])
        return book

    def update(
        self,
        out: list[AlertRecord],
        name: str,
        subject: str,
        active: bool,
        now_ms: int,
        labels: Labels,
        reason,
        resolved=None,
        caused_by=None,
        cause: str | None = None,
        **extra: Unpack[AlertExtras],
    ) -> AlertRecord | None:
        """Fire or resolve `name` for `subject` so that its state matches `active`; the record
        of the transition, or None when there was none.

        `reason`, `resolved` and `caused_by` are values or zero-argument callables (built only
        on a transition); `resolved`, when given, is the text of the resolving transition.
        `caused_by` is the id of the root-cause alert, `cause` the why (docs/alerts.md); both
        are decided when the episode fires and repeated when it resolves. `extra`: the further
        fields of the transition's record.
        """
        key = (name, subject)
        current = self.open.get(key)
        if active and current is None:
            return self.fire(
                out,
                name,
                subject,
                now_ms,
                labels,
                reason() if callable(reason) else reason,
                caused_by() if callable(caused_by) else caused_by,
                cause,
                **extra,
            )
        if not active and current is not None:
            if resolved is None:
                resolved = reason
            text = resolved() if callable(resolved) else resolved
            return self.resolve(out, name, subject, now_ms, labels, text, **extra)
        return None

    def fire(
        self,
        out: list[AlertRecord],
        name: str,
        subject: str,
        now_ms: int,
        labels: Labels,
        reason: str,
        caused_by: str | None,
        cause: str | None,
        **extra: Unpack[AlertExtras],
    ) -> AlertRecord:
        """Open an episode of `name` for `subject` at `now_ms` (the caller knows none is open);
        its record, complete with `extra`, is appended to `out` and returned. A follower out
        of sync with no root is recorded as such when `out` records decisions (`Emitted`)."""
        aid = alert_id(name, subject, now_ms)
        self.open[(name, subject)] = OpenAlert(aid, now_ms, labels, caused_by, cause)
        rec = alert_record(
            aid, name, "firing", subject, labels, now_ms, now_ms, reason, caused_by, cause, **extra
        )
        out.append(rec)
        if name == OUT_OF_SYNC and caused_by is None and isinstance(out, Emitted):
            out.record_out_of_sync(labels, now_ms)
        return rec

    def resolve(
        self,
        out: list[AlertRecord],
        name: str,
        subject: str,
        now_ms: int,
        labels: Labels,
        reason: str,
        **extra: Unpack[AlertExtras],
    ) -> AlertRecord:
        """Close the open episode of `name` for `subject` at `now_ms`; its record, complete
        with `extra`, is appended to `out` and returned."""
        a = self.open.pop((name, subject))
        rec = alert_record(
            a.alert_id,
            name,
            "resolved",
            subject,
            labels,
            a.started_ms,
            now_ms,
            reason,
            a.caused_by,
            a.cause,
            **extra,
        )
        out.append(rec)
        return rec

    def alert_id_of(self, name: str, subject: str) -> str | None:
        current = self.open.get((name, subject))
        return current.alert_id if current is not None else None

    def resolve_all(self, out: list[AlertRecord], now_ms: int, reason: str, prefix: str = "") -> None:
        """Resolve every open episode whose subject starts with `prefix`."""
        for (name, subject), alert in list(self.open.items()):
            if subject.startswith(prefix):
                self.resolve(out, name, subject, now_ms, alert.labels, reason)


def alert_record(
    aid: str,
    name: str,
    status: str,
    subject: str,
    labels: Labels,
    started_ms: int,
    ts: int,
    reason: str,
    caused_by: str | None = None,
    cause: str | None = None,
    **extra: Unpack[AlertExtras],
) -> AlertRecord:
    """The one alert record format (docs/outputs.md), for every alert: the engine's, the
    cluster's and the query's own (streaming/heartbeat.py). `extra`: the fields only some
    records carry, after the common ones."""
    cluster, topic, partition, replica = labels
    broker = replica  # a per-replica alert concerns the replica's broker
    if name in BROKER_ALERTS:  # labels carry the broker in the replica slot
        replica = None
    return {
        "alert_id": aid,
        "name": name,
        "status": status,
        "severity": SEVERITY[name],
        "cluster": cluster,
        "topic": topic,
        "partition": partition,
        "replica": replica,
        "broker": broker,
        "subject": subject,
        "started_ms": started_ms,
        "ts": ts,
        "reason": reason,
        "cause": cause,
        "caused_by": caused_by,
        "root_cause": caused_by is None,
        "notify": is_notified(name, caused_by),
        "silenced_by": [],
        **extra,
    }
