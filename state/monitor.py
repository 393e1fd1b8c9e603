"""One partition under watch: contract events in, the leader's rules applied, alerts out.

`PartitionWatch` drives a `PartitionLeader` with the events of docs/events.md, runs Kafka's
isr-expiration task on its schedule (every replica.lag.time.max.ms / 2) where a run can remove a
follower, and evaluates the alert conditions at every event and at every *deadline* in between
(the exact event time a follower would pass the imminent fraction, fail isCaughtUp, the HW stall
limit, ...), so alert times do not depend on when events happen to arrive or how a stream is cut
into batches.
"""

from __future__ import annotations

from dataclasses import dataclass

from replmon.state import alert_rules as rules
from replmon.state import texts
from replmon.state.alert_rules import PARTITION_RULES, REPLICA_RULES, AlertRule, PartitionFacts, ReplicaFacts
from replmon.state.alerts import AlertBook
from replmon.state.explain import (
    BROKER_FENCED,
    BROKER_SHUTTING_DOWN,
    explain_replica,
    hw_holders,
    out_of_isr_cause,
)
from replmon.state.fetcher import FetcherRoot, fetcher_id, fetcher_key
from replmon.state.legacy import CURRENT
from replmon.state.partition import PartitionConfig, PartitionLeader
from replmon.state.replica import ReplicaState
from replmon.state.root_cause import root_id
from replmon.state.texts import fmt_clock

BROKER_CAUSES = (BROKER_FENCED, BROKER_SHUTTING_DOWN)


def explains_lag(root) -> bool:
    """A root cause that stops a replica's fetching: a stalled fetcher (a fenced or
    shutting-down broker explains the ISR exit itself, not lag before it; a silent broker is
    the cluster step's to decide: state/cluster.py)."""
    return isinstance(root, FetcherRoot)


NEVER = 1 << 62
# A partition whose ISR followers are all at the leader's LEO gets no isr-expiration run, only
# the runs that can remove one (_isr_expiration_due). Off: every run of the schedule evaluates
# every partition, as before (bench/bucket_step.py --every-run, bench/engine_diff.py --every-run:
# the alerts must not change).
SKIP_IDLE_RUNS = True


def _imminent_after_ms(p: PartitionLeader, cfg: MonitorConfig) -> int:
    """IsrExitImminent holds past this lag: alerts.imminent_fraction of replica.lag.time.max.ms."""
    return int(p.config.replica_lag_time_max_ms * cfg.imminent_fraction)


PARKED_FETCH_MS = 500  # Kafka's replica.fetch.wait.max.ms default: a caught-up follower's longest gap
# A compaction resolution up to this needs no allowance: its longest gap between sent events
# (the resolution and a parked fetch) is well inside alerts.stuck_after_ms (3 s), and the
# differential test decides the same on compacted and uncompacted events at it (the
# collector's default: L/8, at most 1 s; docs/real-cluster.md).
COVERED_RESOLUTION_MS = 1000


def quiet_after_ms(cfg: MonitorConfig, replica_lag_time_max_ms: int) -> int:
    """How long a partition's sources may send nothing before the engine calls one silent
    (its leader silent, a replica stuck, a fetcher thread stalled): alerts.stuck_after_ms, plus,
    when its source compacts above 1 s, the partition's resolution (at most L/4, as
    streaming/collect/compact.py resolution_ms caps it) and a parked fetch, the longest a
    caught-up follower's sent fetches are apart. The resolution is the one the cluster's source
    states on its heartbeats (state/cluster_view.py `config`), else alerts.compaction_resolution_ms.
    The last event before a real silence is always sent, so compacted and uncompacted events
    then decide the same (docs/real-cluster.md)."""
    resolution = min(cfg.compaction_resolution_ms, replica_lag_time_max_ms // 4)
    if resolution <= COVERED_RESOLUTION_MS:
        return cfg.stuck_after_ms
    return cfg.stuck_after_ms + resolution + PARKED_FETCH_MS


@dataclass(frozen=True, slots=True)
class MonitorConfig:
    """The engine's frozen config: what a partition's metadata does not say, and the alert
    thresholds.

    No field has a default here: each value is stated once, as a setting in streaming/settings.py
    (the `rules`, `alerts` and `stream` sections), and `Settings.monitor_config()` fills every
    field from the setting of the same name. A new field is this one line plus its setting, with its
    default, in one of those sections; tests/test_config_once.py fails until both exist. Code
    that wants the defaults (tests, benches) calls replmon.streaming.settings.monitor_config().
    """

    replica_lag_time_max_ms: int
    min_insync_replicas: int
    rule_set: str
    replica_lag_max_messages: int
    imminent_fraction: float  # IsrExitImminent after this fraction of the limit
    hw_stall_ms: int  # HighWatermarkStalled after this long behind the LEO
    flap_count: int  # IsrFlapping: this many ISR exits ...
    flap_window_ms: int  # ... within this window
    telemetry_gap_ms: int  # TelemetryMissing after this much silence
    lateness_ms: int  # how far behind its cluster's clock a partition may lag
    reorder_tolerance_ms: int  # out-of-order events within this are taken at partition time
    stuck_after_ms: int
    caught_up_grace_ms: int
    # the compaction resolution of a source that does not state it on its heartbeats (quiet_after_ms)
    compaction_resolution_ms: int
    status_interval_ms: int  # at most one routine status per partition per this much event time
    status_refresh_ms: int  # a healthy partition's unchanged status is sent again after this long
    evict_after_ms: int  # a partition with no event for this long leaves the state
    num_replica_fetchers: int  # Kafka's num.replica.fetchers (ReplicaFetcherStalled groups)
    group_wait_ms: int  # every alert waits this long (event time) for a root to claim it (state/cluster.py)
    lag_share: float  # restart gate: a listed follower lagging past this share of L is out

    def partition_config(self, lag_ms: int | None = None, min_isr: int | None = None) -> PartitionConfig:
        return PartitionConfig(
            replica_lag_time_max_ms=lag_ms or self.replica_lag_time_max_ms,
            min_insync_replicas=min_isr or self.min_insync_replicas,
            alter_partition="immediate",
            rule_set=self.rule_set,
            replica_lag_max_messages=self.replica_lag_max_messages,
        )


class PartitionWatch:
    """The monitor's view of one partition: the leader's state plus alert bookkeeping."""

    __slots__ = (
        "auto_assign",
        "book",
        "cluster",
        "deadline_ms",
        "dirty",
        "ever_in_isr",
        "exits",
        "hw_last_advanced_ms",
        "hw_seen",
        "hw_waiting_since_ms",
        "lag_override",
        "last_event_ms",
        "last_isr",
        "last_status_ms",
        "leader",
        "leo_seen",
        "min_isr_override",
        "name",
        "next_tick_ms",
        "partition",
        "reported_isr",
        "significant",
        "status_sent",
        "time_ms",
        "topic",
    )

    def __init__(
        self,
        cluster: str,
        topic: str,
        partition: int,
        leader: PartitionLeader,
        now_ms: int,
        auto_assign: bool = False,
    ) -> None:
        self.cluster, self.topic, self.partition = cluster, topic, partition
        self.name = f"{topic}-{partition}"
        self.leader = leader
        self.time_ms = now_ms
        self.next_tick_ms = self._tick_after(now_ms)
        self.deadline_ms = self.next_tick_ms
        self.reported_isr: tuple | None = None
        self.ever_in_isr = set(leader.isr)
        self.last_isr = leader.isr
        self.exits: dict[int, list[int]] = {}
        self.hw_seen = leader.hw
        self.hw_last_advanced_ms = now_ms
        self.hw_waiting_since_ms = now_ms if leader.hw < leader.leader_leo else None
        self.last_event_ms = now_ms
        self.book = AlertBook()
        self.dirty = True
        self.significant = True
        self.last_status_ms = -NEVER
        # (digest, event time) of the last status sent, and the offsets it or a point gave last
        self.status_sent: tuple[int, ...] | None = None
        self.auto_assign = auto_assign
        self.lag_override: int | None = None
        self.min_isr_override: int | None = None
        self.leo_seen = leader.leader_leo

    # -- time -------------------------------------------------------------------------------
    def _half(self) -> int:
        return max(1, self.leader.config.replica_lag_time_max_ms // 2)

    def _tick_after(self, t: int) -> int:
        """Next isr-expiration run strictly after t (Kafka runs it every L/2; phase: epoch)."""
        half = self._half()
        return (t // half + 1) * half

    def next_run_ms(self, after: int) -> int:
        """The first run of the isr-expiration schedule after `after`. `next_tick_ms` is the
        schedule as last brought up to date: the runs that fell due since were not needed (no
        follower could be removed, _isr_expiration_due) and count on from it. The bucket brings
        it up to date before it changes the partition's L, which moves the runs after it."""
        if self.next_tick_ms <= after:
            self.next_tick_ms = self._tick_after(after)
        return self.next_tick_ms

    def advance_to(self, t: int, out: list, cfg: MonitorConfig, roots: dict | None = None) -> None:
        """Run every scheduled tick and deadline up to and including event time t."""
        while self.deadline_ms <= t:
            d = self.deadline_ms
            self.time_ms = d
            if self.next_run_ms(d - 1) == d:
                self.leader.isr_expiration(d)
                self.next_tick_ms = self._tick_after(d)
            self.evaluate(d, out, cfg, roots)
        if t > self.time_ms:
            self.time_ms = t

    # -- alerts -------------------------------------------------------------------------------
    def observe(
        self, now: int, out: list, cfg: MonitorConfig, roots: dict | None = None, replica: int | None = None
    ) -> None:
        """After a fetch (by `replica`) or an append. Alerts only fire when a deadline passes or
        the ISR changes, and only resolve while one is open; otherwise an event can only bring a
        deadline closer (a follower falling behind, the HW falling behind the LEO), which is
        cheap to track. This keeps the common event at a few attribute reads."""
        self.dirty = True
        p = self.leader
        if self.book.open or now >= self.deadline_ms or p.isr != self.last_isr:
            self.evaluate(now, out, cfg, roots)
            return
        if p.hw != self.hw_seen or (p.hw < p.leader_leo) != (self.hw_waiting_since_ms is not None):
            self._track_hw(now)
            if self.hw_waiting_since_ms is not None:
                self._bring_forward(self.hw_waiting_since_ms + cfg.hw_stall_ms + 1)
        leo = p.leader_leo
        if leo != self.leo_seen:
            self.leo_seen = leo
            imminent_after = _imminent_after_ms(p, cfg)
            followers = p.followers
            for r in p.isr:
                st = followers.get(r)
                if st is not None and st.leo != leo:
                    at = p.lag_passes_at_ms(st, imminent_after)
                    if at is not None:
                        self._bring_forward(at)
        elif replica is not None and replica in p.isr:
            # a fetch below the LEO it had reached (its log truncated) puts it behind: it may lag
            st = p.followers.get(replica)
            if st is not None and st.leo != leo:
                at = p.lag_passes_at_ms(st, _imminent_after_ms(p, cfg))
                if at is not None:
                    self._bring_forward(at)
        if now >= self.deadline_ms:
            self.evaluate(now, out, cfg, roots)

    def _bring_forward(self, d: int) -> None:
        if d < self.deadline_ms:
            self.deadline_ms = d

    def evaluate(self, now: int, out: list, cfg: MonitorConfig, roots: dict | None = None) -> None:
        """Bring every alert of this partition in line with its condition at `now`: derive the
        facts once, apply the rules of state/alert_rules.py (per follower, then per partition),
        and set the next deadline at which a condition may change.

        `roots` maps each unavailable broker of the cluster to its BrokerUnavailable alert id
        (state/root_cause.py): alerts it explains carry that id in `caused_by`."""
        p = self.leader
        roots = self._roots_here(roots, cfg) if roots else {}
        self.leo_seen = p.leader_leo
        emitted = len(out)
        self._track_isr(now)
        self._track_hw(now)
        pf = self._facts(now, cfg)
        subject = f"{self.cluster}/{self.name}"
        deadline = self._isr_expiration_due(now)
        if p.leader >= 0:
            out_of_sync = p.out_of_sync_replicas(now, ignore_inflight=True)
            isr = p.isr
            imminent_after = _imminent_after_ms(p, cfg)
            for r in p.replicas:
                if r == p.leader:
                    continue
                st = p.followers.get(r)
                if st is None:
                    continue
                f = ReplicaFacts(
                    pf,
                    r,
                    r in isr,
                    st.leo != p.leader_leo,
                    now - st.last_caught_up_ms,
                    imminent_after,
                    r in out_of_sync,
                    r in self.ever_in_isr,
                    self._exits_in_window(r, now, cfg),
                    cfg.flap_count,
                )
                rsub = f"{subject}/{r}"
                for rule, holds in REPLICA_RULES:
                    self._apply(rule, holds(f), rsub, r, f, now, out, cfg, roots)
                deadline = self._replica_deadline(st, f, deadline, now, cfg)
        if self.book.open:
            self._resolve_former_followers(now, out)
        for rule, holds in PARTITION_RULES:
            self._apply(rule, holds(pf), subject, None, pf, now, out, cfg, roots)
        waiting = self.hw_waiting_since_ms
        if waiting is not None and now < waiting + cfg.hw_stall_ms + 1 < deadline:
            deadline = waiting + cfg.hw_stall_ms + 1
        t_gap = self.last_event_ms + cfg.telemetry_gap_ms + 1
        if now < t_gap < deadline:
            deadline = t_gap
        self.deadline_ms = deadline
        self.dirty = True
        if len(out) > emitted:
            self.significant = True
            self._annotate(out, emitted, pf.holders)

    def _isr_expiration_due(self, now: int) -> int:
        """The next isr-expiration run that may remove a follower from the ISR: the first run of
        the schedule at or after the earliest time an ISR follower behind the leader's LEO fails
        isCaughtUp (lcu + L + 1); NEVER while every ISR follower is at the LEO, which Kafka's
        rule never calls out of sync (KAFKA-7152), so a partition whose followers are all caught
        up costs no run. An event that puts one behind brings its IsrExitImminent deadline
        forward (observe), which comes before lcu + L and schedules the run from there. Every
        run: under the older rule sets (no such exemption), and while the replicas are learnt
        from fetches (auto_assign: a fetch adds one, and the run is when the alerts see it)."""
        p = self.leader
        first = self.next_run_ms(now)
        if self.auto_assign or p.config.rule_set != CURRENT or not SKIP_IDLE_RUNS:
            return first
        lag_limit = p.config.replica_lag_time_max_ms
        earliest = NEVER
        followers = p.followers
        for r in p.isr:
            if r == p.leader:
                continue
            st = followers.get(r)
            if st is None:
                return first  # an ISR member the leader has no state of: out at the next run
            at = p.lag_passes_at_ms(st, lag_limit)
            if at is not None and at < earliest:
                earliest = at
        if earliest == NEVER:
            return NEVER
        return first if earliest <= first else self._tick_after(earliest - 1)

    def _facts(self, now: int, cfg: MonitorConfig) -> PartitionFacts:
        """The partition's facts at `now`, for its rules (state/alert_rules.py)."""
        p = self.leader
        return PartitionFacts(
            p,
            now,
            self.reported_isr is not None,
            self.hw_waiting_since_ms,
            cfg.hw_stall_ms,
            hw_holders(p, now),
            self.last_event_ms,
            cfg.telemetry_gap_ms,
            now - self.last_event_ms > quiet_after_ms(cfg, p.config.replica_lag_time_max_ms),
            p.election_ms == now,
        )

    def _apply(
        self,
        rule: AlertRule,
        active: bool,
        subject: str,
        replica: int | None,
        f: ReplicaFacts | PartitionFacts,
        now: int,
        out: list,
        cfg: MonitorConfig,
        roots: dict,
    ) -> None:
        """Fire or resolve one rule's episode for `subject` so that it matches `active` (whether
        its condition holds)."""
        book = self.book
        key = (rule.name, subject)
        if active:
            if key in book.open:
                return
            how = rule.cause
            cause = how(f) if callable(how) else how
            assert cause is not None  # every rule the engine applies names its cause
            says: str = rule.open_text(f) if rule.open_text is not None else cause
            book.fire(
                out,
                rule.name,
                subject,
                now,
                (self.cluster, self.topic, self.partition, replica),
                texts.open_text(rule.name, says, **self._text_facts(f, now, cfg, roots)),
                self._root_of(rule.root, f, cause, roots),
                cause,
            )
        elif key in book.open:
            closes: str = rule.close_text(f) if rule.close_text is not None else rule.closes[0]
            book.resolve(
                out,
                rule.name,
                subject,
                now,
                (self.cluster, self.topic, self.partition, replica),
                texts.close_text(rule.name, closes, **self._text_facts(f, now, cfg, roots)),
            )

    def _root_of(
        self, how: str | None, f: ReplicaFacts | PartitionFacts, cause: str, roots: dict
    ) -> str | None:
        """The alert that explains a firing episode (alert_rules.ROOT_OF_*), or None."""
        p = self.leader
        if isinstance(f, PartitionFacts):
            if how == rules.ROOT_OF_MISSING:  # a missing replica's own ReplicaOutOfSync may explain it
                return self._partition_root(roots)
            if how == rules.ROOT_OF_REPLICAS:
                return self._single_root(roots, p.replicas)
            if how == rules.ROOT_OF_HOLDERS:
                return self._single_root(roots, f.holders, every=True)
            return root_id(roots, p.leader)  # ROOT_OF_LEADER
        r = f.replica
        if how == rules.ROOT_OF_REPLICA:
            return root_id(roots, r)
        # a silent leader makes every follower look stuck: it is the cause
        leader_root = roots[p.leader].alert_id if explains_lag(roots.get(p.leader)) else None
        if how == rules.ROOT_OF_REPLICA_OR_LEADER:
            return root_id(roots, r) or leader_root
        if cause in BROKER_CAUSES or explains_lag(roots.get(r)):  # ROOT_OF_OUT_OF_SYNC
            return root_id(roots, r)
        return leader_root

    def _text_facts(
        self, f: ReplicaFacts | PartitionFacts, now: int, cfg: MonitorConfig, roots: dict
    ) -> dict:
        """Every fact a template of the rule's scope may name (only built on a transition)."""
        if isinstance(f, ReplicaFacts):
            facts = self._replica_text_facts(f.replica, now, cfg, roots)
            facts["exits"] = f.exits_in_window
            facts["window"] = f"{cfg.flap_window_ms / 1000:g} s"
            return facts
        facts = self._partition_text_facts()
        facts["holders"] = list(f.holders)
        facts["stalled"] = texts.fmt_seconds(now - (self.hw_waiting_since_ms or now))
        facts["since"] = fmt_clock(self.last_event_ms)
        facts["silent"] = texts.fmt_seconds(now - self.last_event_ms)
        return facts

    def _track_isr(self, now: int) -> None:
        """Record the followers that left the ISR since the last evaluation (IsrFlapping).

        Only a follower that the rule set's out-of-sync test holds for (today's: not isCaughtUp)
        has left: one taken out while in sync left on a report, not on its lag. That is a cluster report
        that predates the rejoin replmon derived (the metadata poll lags the leader), or a
        controller decision about a broker that is unavailable (its BrokerUnavailable tells
        it). Counted, such removals made one incident look like a flapping replica: a paused
        leader's followers, rejoined on resume and then taken out again by the reports of the
        shrink it made on resume, left three times in a few seconds."""
        p = self.leader
        isr = p.isr
        if isr != self.last_isr:
            for r in self.last_isr:
                if r not in isr and r != p.leader and p.lags_out(r, now):
                    self.exits.setdefault(r, []).append(now)
            self.ever_in_isr.update(isr)
            self.last_isr = isr
            self.significant = True

    def _exits_in_window(self, r: int, now: int, cfg: MonitorConfig) -> int:
        """The follower's ISR exits within the flap window ending now (older ones are dropped)."""
        exits = self.exits.get(r)
        if not exits:
            return 0
        cutoff = now - cfg.flap_window_ms
        while exits and exits[0] <= cutoff:
            exits.pop(0)
        return len(exits)

    def _replica_deadline(
        self, st: ReplicaState, f: ReplicaFacts, deadline: int, now: int, cfg: MonitorConfig
    ) -> int:
        """The earliest time before `deadline` at which a rule of this follower may change: its
        oldest ISR exit leaving the flap window, and while in the ISR its lag passing the
        imminent fraction and the limit, and the limit after its last fetch."""
        exits = self.exits.get(f.replica)
        if exits:
            deadline = min(deadline, exits[0] + cfg.flap_window_ms)
        if f.in_isr:
            p = self.leader
            lag_limit = p.config.replica_lag_time_max_ms
            imminent_at = p.lag_passes_at_ms(st, f.imminent_after_ms)
            out_of_sync_at = p.lag_passes_at_ms(st, lag_limit)
            if imminent_at is not None and out_of_sync_at is not None:  # None: exempt, nothing to come
                for d in (imminent_at, out_of_sync_at, st.last_fetch_ms + lag_limit + 1):
                    if now < d < deadline:
                        deadline = d
        return deadline

    def _annotate(self, out: list, start: int, holders) -> None:
        """The brokers each new record depends on, for the cluster step (state/cluster.py):
        the partition's leader and replicas, and for a partition alert the brokers whose absence
        explains it (the replicas missing from the ISR, the HW holders, every replica when offline)."""
        p = self.leader
        missing = [r for r in p.replicas if r not in p.isr and r not in p.adding_replicas]
        for rec in out[start:]:
            rec["leader"] = p.leader
            rec["replicas"] = list(p.replicas)
            name = rec["name"]
            if rec["replica"] is not None:
                rec["brokers"] = [rec["replica"]]
            elif name == "HighWatermarkStalled":
                rec["brokers"] = list(holders)
            elif name == "OfflinePartition":
                rec["brokers"] = list(p.replicas)
            elif name == "TelemetryMissing":
                rec["brokers"] = [p.leader] if p.leader >= 0 else []
            else:
                rec["brokers"] = missing

    def _roots_here(self, roots: dict, cfg: MonitorConfig) -> dict:
        """Replica -> the outage or fetcher stall that explains it, for this partition."""
        here = {k: v for k, v in roots.items() if isinstance(k, int)}
        if len(here) < len(roots) and self.leader.leader >= 0:
            k = fetcher_id(self.topic, self.partition, cfg.num_replica_fetchers)
            for r in self.leader.followers:
                root = roots.get(fetcher_key(r, self.leader.leader, k))
                if root is not None and r not in here:
                    here[r] = root
        return here

    def _partition_text_facts(self) -> dict:
        p = self.leader
        return {
            "partition": self.name,
            "isr": list(p.isr),
            "replicas": list(p.replicas),
            "isr_size": len(p.isr),
            "replica_count": len(p.replicas),
            "hw": p.hw,
            "leader": p.leader,
            "leader_leo": p.leader_leo,
            "min_isr": p.effective_min_isr,
            "out": [r for r in p.replicas if r not in p.isr],
        }

    def _partition_root(self, roots: dict) -> str | None:
        """The alert that explains every replica missing from the ISR: a broker's
        BrokerUnavailable, or a missing replica's own ReplicaOutOfSync; of several, the latest
        to start (the one that made the partition cross its threshold). None when a missing
        replica has no such alert (then the partition alert stands on its own)."""
        p = self.leader
        found = []
        for r in p.replicas:
            if r in p.isr or r in p.adding_replicas:
                continue
            root = roots.get(r)
            if root is not None:
                found.append((root.since_ms, root.alert_id))
                continue
            own = self.book.open.get(("ReplicaOutOfSync", f"{self.cluster}/{self.name}/{r}"))
            if own is None:
                return None
            found.append((own.started_ms, own.alert_id))
        return max(found)[1] if found else None

    @staticmethod
    def _single_root(roots: dict, brokers, every: bool = False) -> str | None:
        """The latest outage among the given brokers (with `every`, only if all of them are
        unavailable)."""
        found = [(roots[b].since_ms, roots[b].alert_id) for b in brokers if b in roots]
        if every and len(found) < len(tuple(brokers)):
            return None
        return max(found)[1] if found else None

    def _resolve_former_followers(self, now: int, out: list) -> None:
        """Per-replica alerts only concern followers: a replica that became the leader or left
        the assignment closes its episodes (docs/kafka-rules.md §1.4: a leader is not a follower)."""
        p = self.leader
        for (name, subject), alert in list(self.book.open.items()):
            r = alert.labels[3]
            if r is not None and (r == p.leader or r not in p.replicas):
                role = "became_leader" if r == p.leader else "left_assignment"
                self.book.update(
                    out, name, subject, False, now, alert.labels, self._replica_close(name, role, r)
                )

    def _track_hw(self, now: int) -> None:
        p = self.leader
        if p.hw != self.hw_seen:
            self.hw_seen = p.hw
            self.hw_last_advanced_ms = now
            self.hw_waiting_since_ms = now if p.hw < p.leader_leo else None
        elif p.hw >= p.leader_leo:
            self.hw_waiting_since_ms = None
        elif self.hw_waiting_since_ms is None:
            self.hw_waiting_since_ms = now

    def _replica_close(self, name: str, cause: str, r: int) -> str:
        return texts.close_text(name, cause, replica=r, partition=self.name, leader=self.leader.leader)

    def _replica_text_facts(self, r: int, now: int, cfg: MonitorConfig, roots: dict) -> dict:
        p = self.leader
        st = p.followers[r]
        view = explain_replica(
            p,
            r,
            now,
            ever_in_isr=r in self.ever_in_isr,
            stuck_after_ms=quiet_after_ms(cfg, p.config.replica_lag_time_max_ms),
            caught_up_grace_ms=cfg.caught_up_grace_ms,
        )
        fetch = (
            f"no fetch since {fmt_clock(st.last_fetch_ms)}"
            if st.last_fetch_ms
            else "no fetch since the election"
        )
        limit = p.config.replica_lag_time_max_ms
        if st.last_caught_up_ms:  # 0 means never (Kafka's reset for a non-ISR follower)
            lag = f"not caught up for {texts.fmt_against_limit(now - st.last_caught_up_ms, limit)}"
        else:
            lag = f"never caught up since the election (limit {limit / 1000:g} s)"
        return {
            "replica": r,
            "partition": self.name,
            "lag": lag,
            "lag_messages": view.lag_messages,
            "state": view.state,
            "fetch": fetch,
            "leader": p.leader,
            "leader_epoch": p.leader_epoch,
            "silent_since": fmt_clock(self.last_event_ms),
            "since": fmt_clock(roots[r].since_ms if r in roots else now),
        }

    # -- status -------------------------------------------------------------------------------
    def partition_status(self) -> dict:
        p = self.leader
        now = self.time_ms
        waiting = self.hw_waiting_since_ms
        holders = list(hw_holders(p, now))
        return {
            "cluster": self.cluster,
            "topic": self.topic,
            "partition": self.partition,
            "ts": now,
            "leader": p.leader,
            "leader_epoch": p.leader_epoch,
            "replicas": list(p.replicas),
            "isr": list(p.isr),
            "maximal_isr": list(p.maximal_isr),
            "reported_isr": list(self.reported_isr) if self.reported_isr is not None else None,
            "hw": p.hw,
            "leader_leo": p.leader_leo,
            "under_replicated": p.under_replicated,
            "under_min_isr": p.under_min_isr,
            "at_min_isr": p.at_min_isr,
            "min_insync_replicas": p.config.min_insync_replicas,
            "replica_lag_time_max_ms": p.config.replica_lag_time_max_ms,
            "hw_last_advanced_ms": self.hw_last_advanced_ms,
            "hw_stalled_ms": now - waiting if waiting is not None else 0,
            "hw_holders": holders,
        }

    def replica_statuses(self, cfg: MonitorConfig) -> list[dict]:
        p = self.leader
        now = self.time_ms
        rows = []
        for r in p.replicas:
            if r == p.leader or r not in p.followers:
                continue
            v = explain_replica(
                p,
                r,
                now,
                ever_in_isr=r in self.ever_in_isr,
                stuck_after_ms=quiet_after_ms(cfg, p.config.replica_lag_time_max_ms),
                caught_up_grace_ms=cfg.caught_up_grace_ms,
            )
            rows.append(
                {
                    "cluster": self.cluster,
                    "topic": self.topic,
                    "partition": self.partition,
                    "replica": r,
                    "ts": now,
                    "leo": v.leo,
                    "leader_leo": v.leader_leo,
                    "lag_messages": v.lag_messages,
                    "last_caught_up_ms": v.last_caught_up_ms,
                    "lag_ms": v.lag_ms,
                    "last_fetch_ms": v.last_fetch_ms,
                    "in_isr": v.in_isr,
                    "in_reported_isr": (r in self.reported_isr) if self.reported_isr is not None else None,
                    "caught_up": v.caught_up,
                    "state": v.state,
                    "out_of_sync_at_ms": v.out_of_sync_at_ms,
                    "removable_by_ms": v.removable_by_ms,
                    "holds_hw": v.holds_hw,
                    # the one definition the alert texts use too (explain.out_of_isr_cause)
                    "out_of_isr_cause": (
                        None
                        if v.in_isr and v.caught_up
                        else out_of_isr_cause(p, r, now, ever_in_isr=r in self.ever_in_isr)
                    ),
                }
            )
        return rows
