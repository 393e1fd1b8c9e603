"""What paged, each root with its consequences folded under it (pure: no Spark, no I/O).

The cluster step (state/cluster.py) writes on every alert record the id of the root alert
that explains it (`caused_by`; null on a root). `group` follows those ids, directly or through
a chain (a lagging broker's second ReplicaOutOfSync names its first, whose UnderReplicated
names it in turn), and gives one `Incident` per root: the root's records, the latest cause and
counts, when it resolved, and its consequences. A root that was not notified and explains
nothing (an info IsrExitImminent, an alert over within group_wait) is only counted, in
`Timeline.quiet`.

Used by `replmon run`'s and `replmon replay`'s console timeline (`--all` gives the flat list
instead) and by the replay report's alert chart (one bar per root episode).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from replmon.state.texts import fmt_counts

STATUS_ORDER = {"firing": 0, "updated": 1, "resolved": 2}


@dataclass
class Incident:
    """One root alert and every alert it explains."""

    alert_id: str  # the root's id
    records: list[dict] = field(default_factory=list)  # the root's own, in event-time order
    consequences: dict[str, list[dict]] = field(default_factory=dict)  # alert_id -> its records

    @property
    def root(self) -> dict | None:
        """The root's first record; None when the records hold only its consequences (a replay
        window that starts after the root resolved)."""
        return self.records[0] if self.records else None

    @property
    def at_ms(self) -> int:
        """When it shows on the timeline: the root's first record, else its first consequence's."""
        if self.records:
            return self.records[0]["ts"]
        return min(recs[0]["ts"] for recs in self.consequences.values())

    @property
    def notified(self) -> bool:
        """The root's firing went to on-call."""
        return any(r.get("notify") for r in self.records if r["status"] == "firing")

    @property
    def resolved_ms(self) -> int | None:
        last = self.records[-1] if self.records else None
        return last["ts"] if last is not None and last["status"] == "resolved" else None

    @property
    def causes(self) -> list[str]:
        """The root's causes in the order they held (a broker silent, then fenced), no repeats."""
        out: list[str] = []
        for r in self.records:
            if r.get("cause") and (not out or out[-1] != r["cause"]):
                out.append(r["cause"])
        return out

    @property
    def counts(self) -> dict | None:
        """The newest counts the root carried (updates and the resolve carry them), or None."""
        with_counts = [r["counts"] for r in self.records if r.get("counts")]
        return with_counts[-1] if with_counts else None

    def consequence_names(self) -> Counter:
        """How many consequence alerts of each name (an alert counts once, however many records)."""
        return Counter(recs[0]["name"] for recs in self.consequences.values())

    def notified_consequences(self) -> Counter:
        """Consequences that went to on-call themselves (UnderMinIsr and OfflinePartition always page)."""
        return Counter(
            recs[0]["name"]
            for recs in self.consequences.values()
            if any(r.get("notify") for r in recs if r["status"] == "firing")
        )


@dataclass
class Timeline:
    incidents: list[Incident]  # notified roots and roots that explain something, by at_ms
    quiet_roots: list[Incident]  # roots neither notified nor explaining anything, by at_ms

    @property
    def quiet(self) -> Counter:
        """name -> how many quiet roots."""
        return Counter(i.records[0]["name"] for i in self.quiet_roots)


def group(records: list[dict]) -> Timeline:
    """Fold alert records (any order) into incidents, one per root."""
    by_id: dict[str, list[dict]] = {}
    for r in sorted(records, key=_order):
        by_id.setdefault(r["alert_id"], []).append(r)
    parent = {aid: _caused_by(recs) for aid, recs in by_id.items()}
    incidents: dict[str, Incident] = {}
    for aid, recs in by_id.items():
        root = root_of(aid, parent)
        inc = incidents.setdefault(root, Incident(root))
        if aid == root:
            inc.records = recs
        else:
            inc.consequences[aid] = recs
    shown: list[Incident] = []
    quiet: list[Incident] = []
    for inc in sorted(incidents.values(), key=_incident_order):
        (shown if inc.notified or inc.consequences or inc.root is None else quiet).append(inc)
    return Timeline(shown, quiet)


def _incident_order(inc: Incident) -> tuple:
    return (inc.at_ms, inc.root["subject"] if inc.root else "", inc.alert_id)


def root_of(alert_id: str, parent: dict[str, str | None]) -> str:
    """Follow caused_by up to an alert that names none, or to an id not among the records
    (its root lies outside them). A loop (never in the cluster step's output) leaves each of
    its alerts its own root."""
    seen = [alert_id]
    while (up := parent.get(seen[-1])) is not None:
        if up in seen:
            return alert_id
        seen.append(up)
    return seen[-1]


def _caused_by(recs: list[dict]) -> str | None:
    """What explains an alert, as decided when it fired (its firing record, else its first)."""
    firing = [r for r in recs if r["status"] == "firing"]
    return (firing or recs)[0].get("caused_by")


def _order(r: dict) -> tuple:
    return (r["ts"], STATUS_ORDER.get(r["status"], 1), r["subject"], r["name"])


# -- console lines ----------------------------------------------------------------------------
def clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M:%S.%f")[:-3]


def transition_line(r: dict) -> str:
    """One alert transition: '00:00:29.975  FIRING   warning  ReplicaOutOfSync  sim/orders-0/2  reason'."""
    return (
        f"{clock(r['ts'])}  {r['status'].upper():8} {r['severity']:8} {r['name']:20} "
        f"{r['subject']:28} {r['reason']}"
    )


def incident_lines(inc: Incident) -> list[str]:
    """The root on one line (notified or only recorded, its latest cause and counts, when it
    resolved), its consequences counted on the next."""
    root = inc.root
    if root is None:
        missing = "(root not in these records)"
        head = f"{clock(inc.at_ms)}  {'':8} {'':8} {missing:20} {'':28} id {inc.alert_id}"
    else:
        what = " -> ".join(inc.causes) or "-"
        counts = inc.counts
        if counts is not None:
            what += f": {fmt_counts(counts)}"
        else:
            latest = [r for r in inc.records if r["status"] != "resolved"] or inc.records
            what = f"{what}: {latest[-1]['reason']}" if inc.causes else latest[-1]["reason"]
        end = inc.resolved_ms
        when = f"resolved {clock(end)}" if end is not None else "still firing"
        mark = "NOTIFIED" if inc.notified else "RECORDED"
        head = (
            f"{clock(inc.at_ms)}  {mark:8} {root['severity']:8} {root['name']:20} "
            f"{root['subject']:28} {what}; {when}"
        )
    lines = [head]
    names = inc.consequence_names()
    if names:
        n = sum(names.values())
        line = f"{'':14}+{n} consequence{'s' if n != 1 else ''}: {_counted(names)}"
        paged = inc.notified_consequences()
        if paged:
            line += f"; notified themselves: {_counted(paged)}"
        lines.append(line)
    return lines


def quiet_line(quiet: Counter) -> str | None:
    if not quiet:
        return None
    n = sum(quiet.values())
    return f"{'':14}not notified, explaining nothing: {n} alert{'s' if n != 1 else ''} ({_counted(quiet)})"


def timeline_lines(records: list[dict]) -> list[str]:
    """The grouped console timeline of these alert records."""
    tl = group(records)
    lines = [line for inc in tl.incidents for line in incident_lines(inc)]
    q = quiet_line(tl.quiet)
    if q is not None:
        lines.append(q)
    return lines


def _counted(names: Counter) -> str:
    return ", ".join(f"{k} {name}" for name, k in sorted(names.items(), key=lambda kv: (-kv[1], kv[0])))


# -- the report's chart -----------------------------------------------------------------------
def root_episodes(records: list[dict], episodes: list[dict]) -> list[dict]:
    """One episode per root, for the replay report's alert chart: the root's own episode
    (streaming/replay_compare.py's `episodes`, clipped to the window) with `consequences` (how
    many alerts it explains, by name) and `span` (from the first of them to start to the last to
    end, the root included). A root not among the records stands as `(root not in the window)`
    over its consequences' span."""
    by_id = {e["alert_id"]: e for e in episodes}
    tl = group(records)
    out = []
    for inc in sorted(tl.incidents + tl.quiet_roots, key=_incident_order):
        members = [by_id[a] for a in (inc.alert_id, *inc.consequences) if a in by_id]
        if not members:
            continue
        span = (min(e["from_ms"] for e in members), max(e["to_ms"] for e in members))
        own = by_id.get(inc.alert_id)
        if own is None:
            own = {
                "name": "(root not in the window)",
                "subject": inc.alert_id,
                "alert_id": inc.alert_id,
                "severity": "info",
                "started_ms": min(e["started_ms"] for e in members),
                "from_ms": span[0],
                "to_ms": span[1],
                "resolved": all(e["resolved"] for e in members),
            }
        out.append({**own, "consequences": dict(inc.consequence_names()), "span": span})
    return out


def print_timeline(alerts_dir: Path, out: TextIO | None = None, every_transition: bool = False) -> None:
    """The alerts in event-time order, as `replmon run` prints them: what was notified, one line
    each, with each root's consequences folded under it; every transition with `--all`."""
    out = out or sys.stdout
    rows = []
    for f in sorted(alerts_dir.glob("*.jsonl")):
        rows += [json.loads(line) for line in f.read_text().splitlines() if line]
    if every_transition:
        rows.sort(key=lambda r: (r["ts"], r["status"] != "resolved", r["subject"], r["name"]))
        print(f"\nAlert timeline ({len(rows)} transitions)", file=out)
        for r in rows:
            print(transition_line(r), file=out)
        return
    print(f"\nAlert timeline ({len(rows)} transitions; --all lists each)", file=out)
    for line in timeline_lines(rows):
        print(line, file=out)
