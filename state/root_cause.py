"""Root causes: one `BrokerUnavailable` alert per broker outage, decided without any
cross-bucket communication, and the deterministic post-step that makes it one record.

How (docs/alerts.md, "Root causes across buckets"):

* `broker` events reach every bucket in the same micro-batch. Each bucket therefore decides the
  same outage at the same event time and derives the same alert id from it
  (`alert_id("BrokerUnavailable", "<cluster>/broker/<id>", <event time it became unavailable>)`),
  so the partition and replica alerts of every bucket can name it in `caused_by` on their own.
* Every bucket emits its *share* of the root alert (same id, `counts.leaders_lost` = the
  partitions of that bucket the broker led). `merge_root_alerts` (run on each micro-batch's
  alerts before any output: the bridge, and the pure test harnesses) folds the shares into one
  record and counts the partition alerts in the batch that name it (under-replicated, under min
  ISR, offline). The result depends only on the batch, so a replay gives the same record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from replmon.state import texts
from replmon.state.alert_rules import BROKER_ALERTS, BROKER_UNAVAILABLE, FETCHER_STALLED
from replmon.state.alerts import AlertBook, AlertRecord, alert_id, derived

if TYPE_CHECKING:
    from replmon.state.fetcher import FetcherKey, FetcherRoot

ROOT_ALERTS = BROKER_ALERTS  # every broker-scope alert is a root cause, merged across buckets
# which partition alert, naming a root in caused_by, counts as what
COUNTED = {
    "UnderReplicated": "under_replicated",
    "UnderMinIsr": "under_min_isr",
    "OfflinePartition": "offline",
}
COUNT_KEYS = ("under_replicated", "under_min_isr", "offline", "leaders_lost")


class BrokerRoot(NamedTuple):
    """An ongoing broker outage: the id of its alert, the broker state, since when."""

    alert_id: str
    state: str  # "fenced" or "shutting_down"
    since_ms: int


def broker_subject(cluster: str, broker: int) -> str:
    return f"{cluster}/broker/{broker}"


def broker_root(cluster: str, broker: int, state: str, since_ms: int) -> BrokerRoot:
    return BrokerRoot(
        alert_id(BROKER_UNAVAILABLE, broker_subject(cluster, broker), since_ms), state, since_ms
    )


def roots_from_book(book: AlertBook) -> dict[int, BrokerRoot]:
    """The ongoing broker outages that a bucket's open root alerts describe (broker -> root)."""
    return {
        broker: BrokerRoot(
            a.alert_id, "fenced" if a.cause == "broker_fenced" else "shutting_down", a.started_ms
        )
        for (name, _), a in book.open.items()
        if name == BROKER_UNAVAILABLE
        and a.cause != "broker_silent"
        and (broker := a.labels[3]) is not None  # a broker alert's labels carry its broker
    }


def fetcher_roots_from_book(book: AlertBook) -> dict[FetcherKey, FetcherRoot]:
    """The ongoing fetcher stalls that a bucket's open root alerts describe (key -> root)."""
    from replmon.state.fetcher import FetcherRoot, parse_fetcher_subject

    return {
        parse_fetcher_subject(subject): FetcherRoot(a.alert_id, a.started_ms)
        for (name, subject), a in book.open.items()
        if name == FETCHER_STALLED
    }


def root_id(roots: Mapping[Any, BrokerRoot | FetcherRoot], broker: int) -> str | None:
    """The id of the alert for `broker`'s outage, if it is unavailable."""
    root = roots.get(broker)
    return root.alert_id if root is not None else None


def cause_of(state: str) -> str:
    return "broker_fenced" if state == "fenced" else "broker_shutting_down"


def root_text(record: AlertRecord, counts: dict[str, int]) -> str:
    if record["name"] == FETCHER_STALLED:
        facts = dict(
            broker=record["broker"], leader=record.get("leader"), fetcher_id=record.get("fetcher_id")
        )
        if record["status"] == "resolved":
            return texts.close_text(FETCHER_STALLED, "fetching", **facts)
        parts = record.get("partitions") or []
        return texts.open_text(
            FETCHER_STALLED,
            "fetcher_stalled",
            **facts,
            n=len(parts),
            partitions=", ".join(parts),
            since=texts.fmt_clock(record["started_ms"]),
            counts=texts.fmt_counts(counts).replace(", 0 leaders lost", ""),
        )
    if record["status"] == "resolved":
        return texts.close_text(
            BROKER_UNAVAILABLE,
            "heard_again" if record["cause"] == "broker_silent" else "running",
            broker=record["broker"],
            cluster=record["cluster"],
        )
    cause = record["cause"]
    assert cause is not None, "a BrokerUnavailable record names its cause"
    return texts.open_text(
        BROKER_UNAVAILABLE,
        cause,
        broker=record["broker"],
        cluster=record["cluster"],
        since=texts.fmt_clock(record["started_ms"]),
        counts=texts.fmt_counts(counts),
    )


@dataclass(slots=True)
class _Merged:
    """The shares of one root alert transition seen so far: the first share, and what the
    merge changes of it."""

    first: AlertRecord
    started_ms: int
    ts: int
    counts: dict[str, int]
    partitions: list[str] | None

    def add(self, share: AlertRecord) -> None:
        if share["status"] == "firing":  # shares decided at different times: the earliest
            self.started_ms = min(self.started_ms, share["started_ms"])
        self.ts = min(self.ts, share["ts"])
        self.counts["leaders_lost"] = self.counts.get("leaders_lost", 0) + (share.get("counts") or {}).get(
            "leaders_lost", 0
        )
        if "partitions" in share:
            self.partitions = sorted(set(self.partitions or []) | set(share["partitions"]))

    def record(self, caused: dict[str, set[str]]) -> AlertRecord:
        """The one record of the transition: the first share with the earliest times, the
        summed leaders and the partition alerts of the batch that name it counted."""
        counts = self.counts
        for kind in COUNT_KEYS[:3]:
            counts[kind] = len(caused.get(kind, ()))
        if self.first["name"] == BROKER_UNAVAILABLE:
            counts.setdefault("leaders_lost", 0)
        changes: dict[str, Any] = {"started_ms": self.started_ms, "ts": self.ts, "counts": counts}
        if self.partitions is not None:
            changes["partitions"] = self.partitions
        rec = derived(self.first, **changes)
        return derived(rec, reason=root_text(rec, counts))


def merge_root_alerts(alerts: Sequence[AlertRecord]) -> list[AlertRecord]:
    """One record per root alert transition (the buckets' shares folded, counts filled in),
    every other record unchanged and in place. Pure; the input records are not modified."""
    caused: dict[str, dict[str, set[str]]] = {}
    for a in alerts:
        kind = COUNTED.get(a["name"])
        caused_by = a.get("caused_by")
        if kind and a["status"] == "firing" and caused_by:
            caused.setdefault(caused_by, {}).setdefault(kind, set()).add(a["subject"])
    merged: dict[tuple[str, str], _Merged] = {}
    out: list[AlertRecord | tuple[str, str]] = []  # a root's place holds its key until it is merged
    for a in alerts:
        if a["name"] not in ROOT_ALERTS:
            out.append(a)
            continue
        key = (a["alert_id"], a["status"])
        if key in merged:
            merged[key].add(a)
            continue
        parts = list(a["partitions"]) if "partitions" in a else None
        merged[key] = _Merged(a, a["started_ms"], a["ts"], dict(a.get("counts") or {}), parts)
        out.append(key)
    records = {key: m.record(caused.get(key[0], {})) for key, m in merged.items()}
    return [records[r] if isinstance(r, tuple) else r for r in out]
