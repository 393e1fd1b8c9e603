"""The rolling-restart gate: what stopping one broker now would do, from replmon's view.

Kafka's own answer looks at ISR membership only. Here the ISR Kafka lists is narrowed to the
*effective* ISR: a follower still listed that replmon sees lagging past `lag_share` of
replica.lag.time.max.ms, or not fetching at all, counts as out (it is the next to go, and it
cannot take over as a caught-up replica). From that, per broker:

* a partition goes **offline** if the broker is the only member of the effective ISR;
* it falls **under min ISR** if the effective ISR without the broker is below
  min.insync.replicas (acks=all producers get NotEnoughReplicas);
* it is **at min ISR** if exactly min.insync.replicas remain (one more failure stops writes);
  expected of every partition in a rolling restart of RF 3 / min ISR 2, so it does not block.

Blockers that are not partitions: another broker unavailable, an open ReplicaOutOfSync (of
another broker's replica), UnderMinIsr or OfflinePartition anywhere in the cluster, a
reassignment in progress. Any of them makes the answer "not_safe". With no partition seen the
answer is "unknown". Whether the answer is fresh (the clock against the wall clock) is for its
reader to judge: this module reads no clock.

The view is folded from the statuses the buckets already emit (docs/outputs.md): one compact
entry per partition, replaced by each newer partition_status and its followers' replica_status.
"""

from __future__ import annotations

import heapq
import itertools
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SAFE, NOT_SAFE, UNKNOWN = "safe", "not_safe", "unknown"
EXAMPLES = 10  # partitions named per reason class (the counts are whole)

# The reason classes, in the order they are told; `True`: the class blocks a stop
CLASSES = {
    "offline": True,  # partitions whose only effective ISR member is this broker
    "under_min_isr": True,  # partitions this stop takes under min.insync.replicas
    "brokers_unavailable": True,  # other brokers out now
    "replicas_out_of_sync": True,  # open ReplicaOutOfSync of other brokers' replicas
    "partitions_under_min_isr": True,  # open UnderMinIsr anywhere in the cluster
    "partitions_offline": True,  # open OfflinePartition anywhere in the cluster
    "reassignment": True,  # partitions being reassigned
    "at_min_isr": False,  # partitions this stop leaves at exactly min.insync.replicas
    "followers_out": False,  # followers Kafka lists that the effective ISR leaves out
    "self_out_of_sync": False,  # partitions where this broker itself is out of the effective ISR
    "self_unavailable": False,  # this broker is unavailable already
}
WATCHED_ALERTS = ("ReplicaOutOfSync", "UnderMinIsr", "OfflinePartition")


@dataclass(frozen=True, slots=True)
class GateConfig:
    lag_share: float  # a listed follower not caught up for more than this share of L is out


@dataclass(slots=True)
class PartitionView:
    """What the gate keeps of one partition: its latest status, compact."""

    ts: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]  # the ISR Kafka lists (the last metadata's; replmon's derived one before any)
    min_isr: int
    lag_limit_ms: int  # replica.lag.time.max.ms (L)
    behind: dict[int, int] = field(default_factory=dict)  # follower -> last_caught_up_ms, if not caught up
    stalled: set[int] = field(default_factory=set)  # followers not fetching
    reassigning: bool = False
    leader: int = -1


@dataclass(slots=True)
class GateIndex:
    """What the verdicts and the document would otherwise rebuild from every partition in every
    batch, kept per partition and brought up to date for the partitions `observe` changed
    (derived from `GateFacts.partitions`, never saved).

    A partition none of whose followers is behind or stalled, and not being reassigned, has an
    outcome per broker that no clock changes (`_clean_outcome`): it is counted in `clean` once.
    The others are `looked` at one by one at each verdict."""

    rows: dict[str, str] = field(default_factory=dict)  # name -> its document row, as JSON text
    clean: dict[tuple[int, str], set[str]] = field(default_factory=dict)  # (broker, class) -> names
    looked: set[str] = field(default_factory=set)
    members: Counter[int] = field(default_factory=Counter)  # broker -> partitions it is a replica of
    said: dict[str, tuple[tuple[int, ...], tuple[tuple[int, str], ...]]] = field(default_factory=dict)
    # name -> (its replicas, its clean (broker, class)s): what it added, to take back
    dirty: set[str] = field(default_factory=set)  # names changed since the index was brought up to date
    examples: dict[tuple[int, str], list[str]] = field(default_factory=dict)  # the first names of a clean set


@dataclass(slots=True)
class GateFacts:
    """The gate's view of one cluster. Its partitions change through `observe` and `from_doc`
    only (the index follows what they change; a partition added by hand is indexed when next
    asked for, a view changed in place by hand is not)."""

    partitions: dict[str, PartitionView] = field(default_factory=dict)  # 'topic-partition' ->
    # alert_id -> [name, replica, subject, caused_by]
    open_alerts: dict[str, list[Any]] = field(default_factory=dict)
    index: GateIndex = field(default_factory=GateIndex, compare=False, repr=False, metadata={"derived": True})


# -- the rules ---------------------------------------------------------------------------------
def is_lagging(last_caught_up_ms: int, now_ms: int, lag_limit_ms: int, share: float) -> bool:
    """Not caught up for more than `share` of L: Kafka drops it at L (isr-expiration), soon."""
    return now_ms - last_caught_up_ms > share * lag_limit_ms


def is_behind(replica_status: dict[str, Any]) -> bool:
    """Not at the leader's LEO: its time since last caught up counts (Kafka's isCaughtUp stays
    true for L after that, so `caught_up` alone would hide a follower 0.9 L behind). Unless the
    engine calls it caught up (state `caught_up`: at the LEO, or caught up within
    alerts.caught_up_grace_ms): a busy follower is a few messages behind at most moments, and
    its partition sends no new status while every follower stays so (a healthy partition's
    statuses wait for the refresh), but sends one in the batch one stops being so."""
    if replica_status["state"] == "caught_up" and replica_status["caught_up"]:
        return False
    return replica_status["lag_messages"] > 0 or not replica_status["caught_up"]


def why_out(
    view: PartitionView, follower: int, now_ms: int, share: float, leader_down: bool = False
) -> str | None:
    """Why a follower Kafka lists in the ISR does not count in the effective ISR (None: it does).
    `leader_down`: the partition's leader is unavailable: its followers fetch from nothing, and
    the controller elects the next leader from the listed ISR, so the listed ISR stands."""
    if leader_down or follower == view.leader:
        return None  # (the leader: a follower's status from before it took over says nothing now)
    if follower in view.stalled:
        return "stalled"  # not fetching: it will not catch up, whatever the leader appends
    lcu = view.behind.get(follower)
    if lcu is not None and is_lagging(lcu, now_ms, view.lag_limit_ms, share):
        return "lagging"
    return None


def effective_isr(view: PartitionView, now_ms: int, share: float, leader_down: bool = False) -> list[int]:
    """The listed ISR less the followers that are on their way out."""
    return [b for b in view.isr if why_out(view, b, now_ms, share, leader_down) is None]


def stop_outcome(
    view: PartitionView, broker: int, now_ms: int, share: float, leader_down: bool = False
) -> str | None:
    """What stopping `broker` does to this partition: 'offline', 'under_min_isr', 'at_min_isr',
    'self_out_of_sync' (the broker is not in the effective ISR: stopping it removes nothing), or
    None (nothing worth saying)."""
    if broker not in view.replicas:
        return None
    eff = effective_isr(view, now_ms, share, leader_down)
    if broker not in eff:
        return "self_out_of_sync"
    left = len(eff) - 1
    if left == 0:
        return "offline"  # the leader election finds no effective in-sync replica
    if left < view.min_isr:
        return "under_min_isr"  # acks=all produce: NotEnoughReplicas
    if left == view.min_isr:
        return "at_min_isr"
    return None


def blocks(reasons: dict[str, dict[str, Any]]) -> bool:
    return any(CLASSES[c] and r["count"] for c, r in reasons.items())


# -- the verdict -------------------------------------------------------------------------------
def _clean_outcome(view: PartitionView, broker: int) -> str | None:
    """`stop_outcome` of a partition none of whose followers is behind or stalled: every
    replica its ISR lists counts, whatever the clock (`broker` is one of its replicas)."""
    if broker not in view.isr:
        return "self_out_of_sync"
    left = len(view.isr) - 1
    if left == 0:
        return "offline"
    if left < view.min_isr:
        return "under_min_isr"
    if left == view.min_isr:
        return "at_min_isr"
    return None


def _partition_findings(
    found: dict[str, list[tuple[str, str]]],
    name: str,
    view: PartitionView,
    broker: int,
    now_ms: int,
    unavailable: dict[int, tuple[str, str]],
    share: float,
) -> None:
    """Add to `found` what stopping `broker` does to one partition (`verdict`), each finding
    as (the partition's name, what is said of it)."""
    if view.reassigning:
        found["reassignment"].append((name, name))
    if broker not in view.replicas:
        return
    if not view.behind and not view.stalled:  # the common case: nobody on the way out
        clean = _clean_outcome(view, broker)
        if clean is not None:
            found[clean].append((name, name))
        return
    down = view.leader in unavailable
    outcome = stop_outcome(view, broker, now_ms, share, down)
    outs = {b: why_out(view, b, now_ms, share, down) for b in view.isr if b != broker}
    if outcome is not None:
        blocked = outcome in ("offline", "under_min_isr")
        found[outcome].append((name, _with_outs(name, view, outs, now_ms) if blocked else name))
    for b, why in outs.items():
        if why is not None:
            found["followers_out"].append((name, f"{name}/{b} ({why})"))


Found = dict[str, tuple[int, list[str]]]  # class -> (how many, the first few said)


def verdict(
    facts: GateFacts,
    broker: int,
    now_ms: int,
    unavailable: dict[int, tuple[str, str]],
    cfg: GateConfig,
) -> dict[str, Any]:
    """The verdict for stopping `broker` at `now_ms` (the cluster's event time):
    {verdict, clock_ms, reasons: {class: {count, blocks, examples}}}. `unavailable`: broker ->
    (cause, its BrokerUnavailable's alert id), the cluster step's open outages. What the
    broker's own outage explains (alerts it caused) does not block stopping it. This looks at
    every partition; `indexed_verdict` gives the same from the index."""
    found: dict[str, list[tuple[str, str]]] = {c: [] for c in CLASSES}
    for name in sorted(facts.partitions):
        _partition_findings(found, name, facts.partitions[name], broker, now_ms, unavailable, cfg.lag_share)
    return _answer(
        facts, broker, now_ms, unavailable, {c: (len(v), [t for _, t in v]) for c, v in found.items()}
    )


def indexed_verdict(
    facts: GateFacts, broker: int, now_ms: int, unavailable: dict[int, tuple[str, str]], cfg: GateConfig
) -> dict[str, Any]:
    """`verdict`, the same answer, from the index: the partitions someone is behind or stalled
    in are looked at; the others are counted, and their first names kept, as they change."""
    index = _indexed(facts)
    found: dict[str, list[tuple[str, str]]] = {c: [] for c in CLASSES}
    for name in sorted(index.looked):
        _partition_findings(found, name, facts.partitions[name], broker, now_ms, unavailable, cfg.lag_share)
    counted: Found = {}
    for c, said in found.items():
        pool = index.clean.get((broker, c))
        if not pool:
            counted[c] = (len(said), [t for _, t in said[:EXAMPLES]])
            continue
        first = heapq.merge(said, ((n, n) for n in _first_clean(index, (broker, c))))
        counted[c] = (len(said) + len(pool), [t for _, t in itertools.islice(first, EXAMPLES)])
    return _answer(facts, broker, now_ms, unavailable, counted)


def _answer(
    facts: GateFacts, broker: int, now_ms: int, unavailable: dict[int, tuple[str, str]], counted: Found
) -> dict[str, Any]:
    """The verdict from what the partitions say (`counted`), the outages and the open alerts."""
    found: dict[str, list[str]] = {c: [] for c in CLASSES}
    for b in sorted(unavailable):
        found["self_unavailable" if b == broker else "brokers_unavailable"].append(
            f"{b} ({unavailable[b][0]})"
        )
    own = unavailable[broker][1] if broker in unavailable else None
    for name, replica, subject, caused_by in sorted(facts.open_alerts.values(), key=lambda a: (a[0], a[2])):
        if own is not None and caused_by == own:
            continue
        if name == "ReplicaOutOfSync" and replica != broker:
            found["replicas_out_of_sync"].append(subject)
        elif name == "UnderMinIsr":
            found["partitions_under_min_isr"].append(subject)
        elif name == "OfflinePartition":
            found["partitions_offline"].append(subject)
    reasons = {}
    for c in CLASSES:
        count, examples = counted[c] if counted[c][0] else (len(found[c]), found[c])
        if count:
            reasons[c] = {"count": count, "blocks": CLASSES[c], "examples": examples[:EXAMPLES]}
    if not facts.partitions:
        answer = UNKNOWN  # nothing seen of the cluster yet
    elif blocks(reasons):
        answer = NOT_SAFE
    else:
        answer = SAFE
    v = {"broker": broker, "verdict": answer, "clock_ms": now_ms, "reasons": reasons}
    v["summary"] = answer_line(v)
    return v


def _with_outs(name: str, view: PartitionView, outs: dict[int, str | None], now_ms: int) -> str:
    """'orders-3' or 'orders-3 (2 lagging 16.2 s)': the partition and who else is out."""
    said = []
    for b, why in outs.items():
        if why == "lagging":
            said.append(f"{b} lagging {(now_ms - view.behind[b]) / 1000:.1f} s")
        elif why is not None:
            said.append(f"{b} {why}")
    return f"{name} ({', '.join(said)})" if said else name


def brokers_of(facts: GateFacts) -> set[int]:
    """Every broker some partition has as a replica."""
    return {b for b, n in _indexed(facts).members.items() if n}


# -- the index ---------------------------------------------------------------------------------
def _indexed(facts: GateFacts) -> GateIndex:
    """The index, brought up to date with the partitions changed since it last was."""
    index = facts.index
    if len(index.said) != len(facts.partitions):  # partitions set by hand
        index.dirty.update(facts.partitions.keys() - index.said.keys())
        index.dirty.update(index.said.keys() - facts.partitions.keys())
    for name in index.dirty:
        view = facts.partitions.get(name)
        new = None if view is None else _said_of(view)
        old = index.said.pop(name, None)
        if new != old:
            _count(index, name, old, -1)
            _count(index, name, new, 1)
        if view is None or new is None:
            index.rows.pop(name, None)
            index.looked.discard(name)
            continue
        index.said[name] = new
        index.rows[name] = json.dumps(_row(name, view), separators=(",", ":"))
        if _looked_at(view):
            index.looked.add(name)
        else:
            index.looked.discard(name)
    index.dirty.clear()
    return index


def _looked_at(view: PartitionView) -> bool:
    """Someone in it is behind or stalled, or it is being reassigned: its outcome depends on the
    clock and the outages, so each verdict looks at it."""
    return bool(view.behind or view.stalled or view.reassigning)


def _said_of(view: PartitionView) -> tuple[tuple[int, ...], tuple[tuple[int, str], ...]]:
    """A partition's replicas, and the classes it is counted in per broker when it is clean."""
    if _looked_at(view):
        return view.replicas, ()
    counted = ((b, _clean_outcome(view, b)) for b in view.replicas)
    return view.replicas, tuple((b, c) for b, c in counted if c is not None)


def _count(index: GateIndex, name: str, said: Any, sign: int) -> None:
    """Count a partition in (sign 1) or out of (-1) what it said (`_said_of`); drop the kept
    first names of a class where it comes or goes among them."""
    if said is None:
        return
    replicas, cleans = said
    index.members.update(dict.fromkeys(replicas, sign))
    for key in cleans:
        pool = index.clean.setdefault(key, set())
        first = index.examples.get(key)
        if sign > 0:
            pool.add(name)
            stale = first is not None and (len(first) < EXAMPLES or name < first[-1])
        else:
            pool.discard(name)
            stale = first is not None and name in first
        if stale:
            del index.examples[key]


def _first_clean(index: GateIndex, key: tuple[int, str]) -> list[str]:
    """The first names, in order, of a clean set (kept until the set changes at its front)."""
    first = index.examples.get(key)
    if first is None:
        first = index.examples[key] = heapq.nsmallest(EXAMPLES, index.clean[key])
    return first


# -- folding the statuses ----------------------------------------------------------------------
def observe(
    facts: GateFacts,
    partition_status: list[dict[str, Any]],
    replica_status: list[dict[str, Any]],
    alerts: Sequence[Mapping[str, Any]],
) -> None:
    """Fold one batch's statuses (of one cluster) and the alert records the cluster step released."""
    followers: dict[str, list[dict[str, Any]]] = {}
    for r in replica_status:
        followers.setdefault(f"{r['topic']}-{r['partition']}", []).append(r)
    for p in sorted(partition_status, key=lambda r: r["ts"]):
        name = f"{p['topic']}-{p['partition']}"
        old = facts.partitions.get(name)
        if old is not None and old.ts > p["ts"]:
            continue  # a replayed older status never rolls the view back
        listed = p.get("reported_isr")
        view = PartitionView(
            ts=p["ts"],
            replicas=tuple(p["replicas"]),
            isr=tuple(p["isr"] if listed is None else listed),
            min_isr=p["min_insync_replicas"],
            lag_limit_ms=p["replica_lag_time_max_ms"],
            leader=p.get("leader", -1),
        )
        if old is not None:  # followers whose status did not come with this one stay as they were
            # (the leader's own status as a follower, from before it took over, is gone)
            view.behind = {b: t for b, t in old.behind.items() if b in view.replicas and b != view.leader}
            view.stalled = {b for b in old.stalled if b in view.replicas and b != view.leader}
            view.reassigning = old.reassigning
        facts.partitions[name] = view
        facts.index.dirty.add(name)
    for name, records in followers.items():
        known = facts.partitions.get(name)
        if known is None:
            continue
        facts.index.dirty.add(name)
        reassigning = False
        for r in sorted(records, key=lambda r: r["ts"]):
            b = r["replica"]
            known.behind.pop(b, None)
            known.stalled.discard(b)
            if is_behind(r):
                known.behind[b] = r["last_caught_up_ms"]
            if r["state"] == "stuck":
                known.stalled.add(b)
            reassigning = reassigning or r.get("out_of_isr_cause") == "reassignment"
        known.reassigning = reassigning
    for a in alerts:
        if a["name"] not in WATCHED_ALERTS and a.get("cause") != "reassignment":
            continue
        if a["status"] == "resolved":
            facts.open_alerts.pop(a["alert_id"], None)
        else:
            name = a["name"] if a["name"] in WATCHED_ALERTS else "reassignment"
            facts.open_alerts[a["alert_id"]] = [name, a.get("replica"), a["subject"], a.get("caused_by")]


# -- persistence (with the cluster step's state) -------------------------------------------------
def _row(name: str, v: PartitionView) -> list[Any]:
    return [
        name,
        v.ts,
        list(v.replicas),
        list(v.isr),
        v.min_isr,
        v.lag_limit_ms,
        [[b, t] for b, t in v.behind.items()],
        sorted(v.stalled),
        v.reassigning,
        v.leader,
    ]


def to_doc(facts: GateFacts) -> dict[str, Any]:
    """The view as plain data; its partitions' rows as one JSON text, each row encoded when its
    partition changes, not at every save (at 100,000 partitions, encoding every row took 0.3 s
    a batch; `from_doc` also reads them as a list)."""
    rows = _indexed(facts).rows
    return {
        "partitions": f"[{','.join([rows[name] for name in facts.partitions])}]",
        "open_alerts": facts.open_alerts,
    }


def from_doc(d: dict[str, Any] | None) -> GateFacts:
    facts = GateFacts()
    if not d:
        return facts
    rows = d["partitions"]
    for name, ts, replicas, isr, min_isr, lag, behind, stalled, reassigning, leader in (
        json.loads(rows) if isinstance(rows, str) else rows
    ):
        facts.partitions[name] = PartitionView(
            ts, tuple(replicas), tuple(isr), min_isr, lag, dict(behind), set(stalled), reassigning, leader
        )
    facts.index.dirty.update(facts.partitions)
    facts.open_alerts = {k: list(v) for k, v in d["open_alerts"].items()}
    return facts


# -- what it says ------------------------------------------------------------------------------
REASON_TEXTS = {
    "offline": "{n} partition(s) would go offline (broker {broker} is their only effective ISR member)",
    "under_min_isr": "{n} partition(s) would fall under min ISR (acks=all gets NotEnoughReplicas)",
    "brokers_unavailable": "{n} other broker(s) unavailable",
    "replicas_out_of_sync": "{n} replica(s) of other brokers out of sync (ReplicaOutOfSync)",
    "partitions_under_min_isr": "{n} partition(s) under min ISR now (UnderMinIsr)",
    "partitions_offline": "{n} partition(s) offline now (OfflinePartition)",
    "reassignment": "{n} partition(s) being reassigned",
    "at_min_isr": "{n} partition(s) would be at min ISR (one more failure stops their writes)",
    "followers_out": "{n} follower(s) Kafka lists in the ISR but lagging past the share of L or stalled",
    "self_out_of_sync": "broker {broker} is out of sync on {n} partition(s): its stop removes no ISR member",
    "self_unavailable": "broker {broker} is unavailable already",
}
ANSWERS = {SAFE: "safe", NOT_SAFE: "not safe", UNKNOWN: "unknown"}


def answer_line(v: dict[str, Any]) -> str:
    """'broker 1: not safe to stop (2 blocking reasons)', the first line `safe-to-stop` prints."""
    blocking = [c for c, r in v["reasons"].items() if r["blocks"]]
    said = f"broker {v['broker']}: {ANSWERS[v['verdict']]} to stop"
    if v["verdict"] == SAFE:
        said += " for availability"
    if blocking:
        said += f" ({', '.join(blocking)})"
    return said


def reason_lines(v: dict[str, Any]) -> list[str]:
    """One line per reason class: what, how many, the first ones by name."""
    lines = []
    for c, r in v["reasons"].items():
        text = REASON_TEXTS[c].format(n=r["count"], broker=v["broker"])
        more = f", +{r['count'] - len(r['examples'])} more" if r["count"] > len(r["examples"]) else ""
        mark = "BLOCKS" if r["blocks"] else "info"
        lines.append(f"  {mark:6} {c}: {text}: {', '.join(r['examples'])}{more}")
    return lines
