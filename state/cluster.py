"""Cluster-wide reasoning: broker roots, which alerts each root explains, and what pages.

The buckets (state/bucket.py) hold slices of the partitions and decide per-partition rules only.
Whatever needs the whole cluster is decided here, in one step that sees every bucket's output
(the bridge runs it on the driver, once per micro-batch, and keeps its state with the
query's checkpoint: streaming/cluster_state.py):

* **Broker episodes** (`BrokerUnavailable`, state/cluster_episodes.py): a broker is unavailable
  while it is *silent* (nothing from it as leader and no fetch by it as follower, anywhere in
  the cluster, for more than `alerts.stuck_after_ms`: state/cluster_activity.py), *fenced* or
  *shutting down* (the controller's word, `broker` events). One episode per outage: when the
  cause moves (silent -> fenced) the same alert is updated (status `updated`, same id), never
  paged again. A controlled shutdown is a warning, not a page.
* **Grouping in event time and claims** (state/cluster_hold.py): every alert is held until
  `alerts.group_wait_ms` of event time after it started, so that a root found within that
  window claims it: it then carries the episode's id in `caused_by` and is not notified
  (except UnderMinIsr and OfflinePartition, which always page).
* **Lag groups** (state/cluster_lag.py): a follower broker lagging on several partitions for
  its own reason is one notification.
* **Counts**: the episode counts the partitions it took down (under-replicated, under min
  ISR, offline) and the leaders it held; the counts travel on `updated` records (at most one
  per `COUNTS_EVERY_MS` of event time) and on the resolving record.

Decisions are taken in event-time order up to a horizon (the newest activity anywhere less
`stream.reorder_tolerance_ms`: state/cluster_timeline.py), so a replay, or another cut into
micro-batches, decides the same. The state is the parts of state/cluster_facts.py, saved as a
versioned document.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from replmon.state import cluster_facts, restart_gate
from replmon.state.alerts import AlertRecord
from replmon.state.cluster_activity import NEVER
from replmon.state.cluster_episodes import (
    CONTROLLED_WITHIN_MS,
    COUNTS_EVERY_MS,
    FENCED,
    SHUTTING_DOWN,
    SILENT,
    Episode,
    root_record,
)
from replmon.state.cluster_facts import ClusterFacts
from replmon.state.cluster_hold import LEADER_UNAVAILABLE, claimed, decide
from replmon.state.cluster_lag import REGROUP_MS
from replmon.state.cluster_timeline import (
    CountsDue,
    Entry,
    Heard,
    Release,
    ReleaseRoot,
    Run,
    Silent,
    StateSeen,
)
from replmon.state.root_cause import BROKER_UNAVAILABLE, merge_root_alerts

__all__ = [
    "CONTROLLED_WITHIN_MS",
    "COUNTS_EVERY_MS",
    "FENCED",
    "LEADER_UNAVAILABLE",
    "NEVER",
    "REGROUP_MS",
    "SHUTTING_DOWN",
    "SILENT",
    "ClusterConfig",
    "ClusterFacts",
    "ClusterStep",
    "Episode",
    "cluster_config",
    "fold_batches",
]


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    silent_after_ms: int  # a broker with no activity anywhere for longer than this is silent
    group_wait_ms: int  # every alert is held this long (event time) for a root to claim it
    slack_ms: int  # decisions wait until activity this far past them has been seen
    lag_share: float  # the restart gate: a listed follower lagging past this share of L is out


class ClusterStep:
    """The cluster-wide step's state and its fold over micro-batches (pure)."""

    def __init__(self, cfg: ClusterConfig) -> None:
        self.cfg = cfg
        self.clusters: dict[str, ClusterFacts] = {}

    # -- input -----------------------------------------------------------------------------
    def step(
        self,
        alerts: list[AlertRecord],
        activity: list[dict[str, Any]],
        flush: bool = False,
        statuses: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], []),
    ) -> list[AlertRecord]:
        """Fold one micro-batch: the buckets' alert records and activity reports in, the alert
        records to output (decided, in event-time order) out. `flush`: the input has ended
        (a bounded run): release every held alert now. `statuses`: the batch's partition and
        replica statuses, for the restart gate (`restart_verdicts`). The records passed in are
        not changed: what the step adds to one is on a new record (`alerts.derived`)."""
        out: list[AlertRecord] = []
        for report in activity:
            self._facts(report["cluster"]).activity.add_report(report, self.cfg.silent_after_ms)
        for rec in merge_root_alerts(alerts):
            self._take(self._facts(rec["cluster"]), rec)
        for name, facts in self.clusters.items():
            horizon = facts.activity.newest_activity_ms - self.cfg.slack_ms
            self._run(name, facts, max(horizon, facts.horizon_ms), out, flush)
        self._observe_gate(statuses, out)
        return out

    @staticmethod
    def _take(facts: ClusterFacts, rec: AlertRecord) -> None:
        """A bucket's record: a controller decision on a broker to apply, or an alert to hold."""
        outages = facts.outages
        if rec["name"] == BROKER_UNAVAILABLE:  # a bucket's view of a controller decision
            broker = rec["broker"]
            assert broker is not None  # (a broker alert names its broker)
            outages.aliases[rec["alert_id"]] = broker
            state = "running" if rec["status"] == "resolved" else _state_of(rec.get("cause"))
            if state is not None:
                outages.pending_states.append(
                    (rec["started_ms"] if state != "running" else rec["ts"], broker, state)
                )
            return
        if (
            rec["name"] == "ReplicaOutOfSync"
            and rec["status"] == "firing"
            and rec.get("cause") == "controller"
        ):
            # the controller took the replica out of the ISR while its broker ran: what a
            # controlled shutdown does first (leaders moved away, out of every ISR)
            key = str(rec["replica"])
            outages.controller_exits[key] = max(outages.controller_exits.get(key, -NEVER), rec["started_ms"])
        facts.holding.held.append(rec)

    def _observe_gate(
        self, statuses: tuple[list[dict[str, Any]], list[dict[str, Any]]], out: list[AlertRecord]
    ) -> None:
        by_cluster: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], list[AlertRecord]]] = {}
        for r in statuses[0]:
            by_cluster.setdefault(r["cluster"], ([], [], []))[0].append(r)
        for r in statuses[1]:
            by_cluster.setdefault(r["cluster"], ([], [], []))[1].append(r)
        for a in out:
            by_cluster.setdefault(a["cluster"], ([], [], []))[2].append(a)
        for name, (partitions, replicas, released) in by_cluster.items():
            restart_gate.observe(self._facts(name).gate, partitions, replicas, released)

    def restart_verdicts(self) -> list[dict[str, Any]]:
        """The restart gate's verdict for every broker of every cluster, as of its clock."""
        cfg = restart_gate.GateConfig(self.cfg.lag_share)
        out = []
        for name, facts in self.clusters.items():
            now = facts.activity.newest_activity_ms
            if now == -NEVER:
                continue
            down = {b: (ep.cause, ep.alert_id) for b, ep in facts.outages.open.items()}
            for broker in sorted(restart_gate.brokers_of(facts.gate) | set(facts.activity.segments)):
                v = restart_gate.indexed_verdict(facts.gate, broker, now, down, cfg)
                out.append({"cluster": name, **v})
        return out

    def _facts(self, cluster: str) -> ClusterFacts:
        facts = self.clusters.get(cluster)
        if facts is None:
            facts = self.clusters[cluster] = ClusterFacts()
        return facts

    # -- the timeline ------------------------------------------------------------------------
    def _run(
        self, cluster: str, facts: ClusterFacts, horizon: int, out: list[AlertRecord], flush: bool
    ) -> None:
        """Apply, in event-time order, everything that happens in (facts.horizon_ms, horizon]:
        broker silences and returns, controller states, and the release of held alerts."""
        held = facts.holding.held
        run = Run(
            cluster,
            start=facts.horizon_ms,
            horizon=horizon,
            flush=flush,
            out=out,
            held_firing={r["alert_id"] for r in held if r["status"] == "firing"},
        )
        self._schedule(run, facts)
        while run.heap:
            ts, entry = run.pop()
            self._apply(run, facts, ts, entry)
            self._counts_due(run, facts)
        facts.holding.held = run.waiting + facts.holding.held
        facts.horizon_ms = max(horizon, run.start)
        facts.outages.forget(facts.horizon_ms, self.cfg.group_wait_ms)
        facts.activity.forget(facts.horizon_ms, self.cfg.silent_after_ms)

    def _schedule(self, run: Run, facts: ClusterFacts) -> None:
        """What is known to happen in the run before it starts: silences and returns, the
        controller states seen, the roots and alerts whose group_wait ends."""
        for ts, broker, last in facts.activity.changes(run.start, run.horizon, self.cfg.silent_after_ms):
            run.push(ts, Heard(broker) if last is None else Silent(broker, last))
        keep = []
        for ts, broker, state in facts.outages.pending_states:
            if run.due(ts):
                run.push(ts, StateSeen(broker, state))
            else:
                keep.append((ts, broker, state))
        facts.outages.pending_states = keep
        for ep in facts.outages.open.values():
            if not ep.released:
                self._release_due(run, ep)
        held, facts.holding.held = facts.holding.held, []
        for rec in held:
            due = rec["started_ms"] + self.cfg.group_wait_ms if rec["status"] == "firing" else rec["ts"]
            if run.due(due):
                run.push(due, Release(rec))
            else:
                run.waiting.append(rec)

    def _release_due(self, run: Run, ep: Episode) -> None:
        """Schedule the release of an episode's root alert, if its group_wait ends in the run."""
        at = ep.started_ms + self.cfg.group_wait_ms
        if run.due(at):
            run.push(at, ReleaseRoot(ep.broker))

    def _counts_due(self, run: Run, facts: ClusterFacts) -> None:
        """An update of each outage whose counts changed, at most one per COUNTS_EVERY_MS."""
        for ep in facts.outages.open.values():
            if ep.counts_dirty and ep.released and ep.broker not in run.scheduled:
                at = max(ep.dirty_ms, ep.counts_ms + COUNTS_EVERY_MS)
                if run.due(at):
                    run.scheduled.add(ep.broker)
                    run.push(at, CountsDue(ep.broker))

    def _apply(self, run: Run, facts: ClusterFacts, ts: int, entry: Entry) -> None:
        outages = facts.outages
        match entry:
            case Silent(broker, last_ms):
                if broker not in outages.silent:
                    outages.silent[broker] = last_ms
                    self._broker_changed(run, facts, broker, ts)
            case Heard(broker):
                if outages.silent.pop(broker, None) is not None:
                    self._broker_changed(run, facts, broker, ts)
            case StateSeen(broker, state):
                outages.apply_state(broker, state)
                self._broker_changed(run, facts, broker, ts)
            case ReleaseRoot(broker):
                ep = outages.open.get(broker)
                if ep is not None and not ep.released:
                    ep.released, ep.notify, ep.counts_dirty, ep.counts_ms = True, True, False, ts
                    run.out.append(self._root_record(run, ep, "firing", ep.started_ms))
            case CountsDue(broker):
                run.scheduled.discard(broker)
                ep = outages.open.get(broker)
                if ep is not None and ep.counts_dirty and ep.released:
                    ep.counts_dirty, ep.counts_ms = False, ts
                    run.out.append(self._root_record(run, ep, "updated", ts))
            case Release(rec):
                self._release(run, facts, rec, ts)

    # -- broker episodes --------------------------------------------------------------------
    def _broker_changed(self, run: Run, facts: ClusterFacts, broker: int, ts: int) -> None:
        outages = facts.outages
        cause = outages.cause_of(broker)
        ep = outages.open.get(broker)
        if cause is not None and ep is None:
            ep = outages.begin(run.cluster, broker, cause, ts, self.cfg.silent_after_ms)
            self._release_due(run, ep)
        elif cause == SILENT and ep is not None and ep.controlled:
            pass  # a broker that shut down is silent too: still the shutdown
        elif cause is not None and ep is not None and cause != ep.cause:
            ep.cause = cause
            ep.cause_ms = ts
            ep.controlled = ep.controlled or cause == SHUTTING_DOWN
            if ep.released:
                run.out.append(self._root_record(run, ep, "updated", ts))
        elif cause is None and ep is not None:
            outages.end(broker, ts)
            if not ep.released:  # over within group_wait: recorded, never notified
                ep.released, ep.notify = True, False
                run.out.append(self._root_record(run, ep, "firing", ep.started_ms))
            run.out.append(self._root_record(run, ep, "resolved", ts))

    def _root_record(self, run: Run, ep: Episode, status: str, ts: int) -> AlertRecord:
        return root_record(run.cluster, ep, status, ts, self.cfg.silent_after_ms)

    # -- consequences ------------------------------------------------------------------------
    def _release(self, run: Run, facts: ClusterFacts, rec: AlertRecord, ts: int) -> None:
        if rec["status"] != "firing":
            self._release_resolve(run, facts, rec)
            return
        aid = rec["alert_id"]
        run.held_firing.discard(aid)
        decision = decide(facts.outages, facts.holding.decided, rec, self.cfg.group_wait_ms)
        # its resolve, if it came by the time of this release (a later one may already be in
        # hand, the batch having cut past it: it is not within group_wait for that)
        resolves = [w for w in run.waiting if w["alert_id"] == aid and w["ts"] <= ts]
        quiet = bool(resolves)  # over before its group_wait ended: recorded, not notified
        caused_by = facts.lag.claim(rec, decision.caused_by, quiet)
        decision = replace(decision, caused_by=caused_by, quiet=quiet)
        ep = facts.outages.by_id(decision.episode)
        run.out.append(claimed(rec, decision, ep))
        facts.holding.decided[aid] = decision
        if ep is not None:
            ep.count(rec, ts)
        for other in resolves:  # its resolve, already in hand, follows at once
            run.waiting.remove(other)
            self._release(run, facts, other, ts)

    @staticmethod
    def _release_resolve(run: Run, facts: ClusterFacts, rec: AlertRecord) -> None:
        decision = facts.holding.decided.pop(rec["alert_id"], None)
        facts.lag.resolved(rec, facts.horizon_ms)
        if decision is not None:
            run.out.append(claimed(rec, decision, facts.outages.by_id(decision.episode)))
        elif rec["alert_id"] in run.held_firing:  # its firing is still held: resolved within group_wait
            run.waiting.append(rec)
        else:  # its firing was decided before this step existed: as it comes
            run.out.append(rec)

    # -- persistence ---------------------------------------------------------------------------
    def to_doc(self) -> dict[str, Any]:
        """The state as plain JSON-able data (kept with the query's checkpoint): state/cluster_facts.py."""
        return cluster_facts.to_doc(self.clusters)

    @classmethod
    def from_doc(cls, cfg: ClusterConfig, doc: dict[str, Any] | None) -> ClusterStep:
        step = cls(cfg)
        step.clusters = cluster_facts.from_doc(doc)
        return step


def _state_of(cause: str | None) -> str | None:
    return {FENCED: "fenced", SHUTTING_DOWN: "shutting_down"}.get(cause or "")


def cluster_config(cfg: Any) -> ClusterConfig:
    """The cluster step's settings, from the engine's (state/monitor.py MonitorConfig)."""
    return ClusterConfig(
        silent_after_ms=cfg.stuck_after_ms,
        group_wait_ms=cfg.group_wait_ms,
        slack_ms=cfg.reorder_tolerance_ms,
        lag_share=cfg.lag_share,
    )


def fold_batches(
    batches: list[tuple[list[AlertRecord], list[dict[str, Any]]]], cfg: Any, flush: bool = True
) -> list[AlertRecord]:
    """The cluster step over micro-batches of (bucket alert records, activity reports), as the
    streaming query runs it; `flush`: release what is still held after the last one."""
    step = ClusterStep(cluster_config(cfg))
    out: list[AlertRecord] = []
    for alerts, activity in batches:
        out += step.step(alerts, activity)
    if flush:
        out += step.step([], [], flush=True)
    return out
