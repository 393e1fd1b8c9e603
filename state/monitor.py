"""One partition under watch: contract events in, the leader's rules applied, alerts out.

`PartitionWatch` drives a `PartitionLeader` with the events of docs/events.md, runs Kafka's
isr-expiration task on its schedule (every replica.lag.time.max.ms / 2) where a run can remove a
follower, and evaluates the alert conditions at every event and at every *deadline* in between
(the exact event time a follower would pass the imminent fraction, fail isCaughtUp, the HW stall
limit, ...), so alert times do not depend on when events happen to arrive or how a stream is cut
into batches.
"""

from __future__ import annotations

from typing import Any

from replmon.state import alert_roots, deadlines, partition_status, texts
from replmon.state.alert_roots import ReplicaRoots, Roots
from replmon.state.alert_rules import PARTITION_RULES, REPLICA_RULES, AlertRule, PartitionFacts, ReplicaFacts
from replmon.state.alerts import AlertBook, AlertRecord
from replmon.state.deadlines import NEVER
from replmon.state.explain import ReplicaView, explain_replica, hw_holders
from replmon.state.monitor_config import MonitorConfig  # its users import it from here too
from replmon.state.partition import PartitionLeader
from replmon.state.sessions import SessionTable
from replmon.state.text_facts import replica_close, text_facts

# A partition whose ISR followers are all at the leader's LEO gets no isr-expiration run, only
# the runs that can remove one (deadlines.isr_expiration_due). Off: every run of the schedule
# evaluates every partition, as before (bench/bucket_step.py --every-run, bench/engine_diff.py
# --every-run: the alerts must not change).
SKIP_IDLE_RUNS = True


def _imminent_after_ms(p: PartitionLeader, cfg: MonitorConfig) -> int:
    """IsrExitImminent holds past this lag: alerts.imminent_fraction of replica.lag.time.max.ms."""
    return int(p.config.replica_lag_time_max_ms * cfg.imminent_fraction)


PARKED_FETCH_MS = 500  # Kafka's replica.fetch.wait.max.ms default: a caught-up follower's longest gap
# A compaction resolution up to this needs no allowance: its longest gap between sent events
# (the resolution and a parked fetch) is well inside alerts.stuck_after_ms (3 s), and the
# differential test decides the same on compacted and uncompacted events at it. It is also the
# default resolution's cap at L = 10 s and below (`resolution_ms`).
COVERED_RESOLUTION_MS = 1000
# The default resolution's cap above L = 10 s: L/10 there, so 3 s from L = 30 s (Kafka's default)
LONG_LAG_RESOLUTION_MS = 3000


def resolution_ms(replica_lag_time_max_ms: int, requested_ms: int | None = None) -> int:
    """A partition's compaction resolution (streaming/collect/compact.py): the requested one, else
    the default for its L: L/8 up to 1 s, and L/10 up to 3 s above L = 10 s (1 s at L = 10 s,
    2 s at 20 s, 3 s at 30 s and above; `alerts.compaction_scheme` "lag"); never more than L/4
    (isr-expiration runs every L/2)."""
    lag = replica_lag_time_max_ms
    default = max(min(lag // 8, COVERED_RESOLUTION_MS), min(lag // 10, LONG_LAG_RESOLUTION_MS))
    return max(1, min(requested_ms or default, lag // 4))


def resolution_allowance_ms(cfg: MonitorConfig, replica_lag_time_max_ms: int) -> int:
    """How much older than the source's own view the engine's view of a partition can be when
    its source compacts above 1 s: the partition's resolution and a parked fetch, the longest a
    caught-up follower's sent fetches are apart; 0 at 1 s and below. The resolution is the one
    the cluster's source states on its heartbeats (state/cluster_view.py `config`), else
    alerts.compaction_resolution_ms and alerts.compaction_scheme: "fixed", that resolution (at
    most L/4, as the collector caps it); "lag", the collector's default for the partition's L
    (`resolution_ms`)."""
    if cfg.compaction_scheme == "lag":
        resolution = resolution_ms(replica_lag_time_max_ms)
    else:
        resolution = min(cfg.compaction_resolution_ms, replica_lag_time_max_ms // 4)
    if resolution <= COVERED_RESOLUTION_MS:
        return 0
    return resolution + PARKED_FETCH_MS


def quiet_after_ms(cfg: MonitorConfig, replica_lag_time_max_ms: int) -> int:
    """How long a partition's sources may send nothing before the engine calls one silent
    (its leader silent, a replica stuck, a fetcher thread stalled): alerts.stuck_after_ms plus
    the resolution's allowance. The last event before a real silence is always sent, so
    compacted and uncompacted events then decide the same (docs/real-cluster.md)."""
    return cfg.stuck_after_ms + resolution_allowance_ms(cfg, replica_lag_time_max_ms)


def caught_up_grace_ms(cfg: MonitorConfig, replica_lag_time_max_ms: int) -> int:
    """How long after its last caught-up moment a follower below the leader's LEO still counts as
    caught up (state `caught_up`, a healthy partition): alerts.caught_up_grace_ms plus the
    resolution's allowance. A busy follower that keeps up is credited at its sent fetches only
    (Kafka's previous-fetch rule, docs/kafka-rules.md §1.2): compacted to 3 s, its time since
    last caught up reaches 3 s between them, and its partition would flip between healthy and
    not, every flip a status record."""
    return cfg.caught_up_grace_ms + resolution_allowance_ms(cfg, replica_lag_time_max_ms)


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
        self.reported_isr: tuple[int, ...] | None = None
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
    def _tick_after(self, t: int) -> int:
        """Next isr-expiration run strictly after t (state/deadlines.py)."""
        return deadlines.run_after(self.leader.config.replica_lag_time_max_ms, t)

    def next_run_ms(self, after: int) -> int:
        """The first run of the isr-expiration schedule after `after`. `next_tick_ms` is the
        schedule as last brought up to date: the runs that fell due since were not needed (no
        follower could be removed, deadlines.isr_expiration_due) and count on from it. The
        bucket brings it up to date before it changes the partition's L, which moves the runs
        after it."""
        if self.next_tick_ms <= after:
            self.next_tick_ms = self._tick_after(after)
        return self.next_tick_ms

    def advance_to(
        self,
        t: int,
        out: list[AlertRecord],
        cfg: MonitorConfig,
        roots: Roots | None = None,
        sessions: SessionTable | None = None,
    ) -> None:
        """Run every scheduled tick and deadline up to and including event time t."""
        while self.deadline_ms <= t:
            d = self.deadline_ms
            self.time_ms = d
            if self.next_run_ms(d - 1) == d:
                self.leader.isr_expiration(d)
                self.next_tick_ms = self._tick_after(d)
            self.evaluate(d, out, cfg, roots, sessions)
        if t > self.time_ms:
            self.time_ms = t

    # -- alerts -------------------------------------------------------------------------------
    def observe(
        self,
        now: int,
        out: list[AlertRecord],
        cfg: MonitorConfig,
        roots: Roots | None = None,
        replica: int | None = None,
        sessions: SessionTable | None = None,
    ) -> None:
        """After a fetch (by `replica`) or an append. Alerts only fire when a deadline passes or
        the ISR changes, and only resolve while one is open; otherwise an event can only bring a
        deadline closer (a follower falling behind, the HW falling behind the LEO), which is
        cheap to track. This keeps the common event at a few attribute reads."""
        self.dirty = True
        p = self.leader
        if self.book.open or now >= self.deadline_ms or p.isr != self.last_isr:
            self.evaluate(now, out, cfg, roots, sessions)
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
            self.evaluate(now, out, cfg, roots, sessions)

    def _bring_forward(self, d: int) -> None:
        if d < self.deadline_ms:
            self.deadline_ms = d

    def evaluate(
        self,
        now: int,
        out: list[AlertRecord],
        cfg: MonitorConfig,
        roots: Roots | None = None,
        sessions: SessionTable | None = None,
    ) -> None:
        """Bring every alert of this partition in line with its condition at `now`: derive the
        facts once, apply the rules of state/alert_rules.py (per follower, then per partition),
        and set the next deadline at which a condition may change.

        `roots` maps each unavailable broker of the cluster to its outage and each stalled
        fetcher to its stall (alert_roots.Roots): alerts one explains carry its alert id in
        `caused_by`.

        `sessions`: the cluster's fetch sessions (state/sessions.py). A healthy partition a live
        session carries is not checked for silence on its own: the session's silence wakes it
        (Bucket.advance), and its next date is the repeat of its status. One whose last status
        was not healthy still wakes at its silence check, which takes its sessions' reads and
        sends the status that says it recovered (the restart gate waits on it)."""
        p = self.leader
        here = alert_roots.roots_here(self, roots, cfg.num_replica_fetchers) if roots else {}
        self.leo_seen = p.leader_leo
        emitted = len(out)
        self._track_isr(now)
        self._track_hw(now)
        pf = self._facts(now, cfg)
        subject = f"{self.cluster}/{self.name}"
        # every run while the replicas are learnt from fetches (auto_assign: a fetch adds one,
        # and the run is when the alerts see it)
        every_run = self.auto_assign or not SKIP_IDLE_RUNS
        deadline = deadlines.isr_expiration_due(p, self.next_run_ms(now), every_run)
        if p.leader >= 0:
            deadline = self._evaluate_followers(pf, now, out, cfg, here, deadline)
        if self.book.open:
            self._resolve_former_followers(now, out)
        for rule, holds in PARTITION_RULES:
            self._apply(rule, holds(pf), subject, None, pf, now, out, cfg, here)
        waiting = self.hw_waiting_since_ms
        if waiting is not None and now < waiting + cfg.hw_stall_ms + 1 < deadline:
            deadline = waiting + cfg.hw_stall_ms + 1
        if (
            self.status_sent is not None  # its last status healthy: nothing it says can be stale
            and sessions is not None
            and sessions.reads
            and sessions.covers(self, now, cfg.telemetry_gap_ms)
        ):
            refresh = self.refresh_due_ms(cfg)
            if now < refresh < deadline:
                deadline = refresh
        else:
            t_gap = self.last_event_ms + cfg.telemetry_gap_ms + 1
            if now < t_gap < deadline:
                deadline = t_gap
        self.deadline_ms = deadline
        self.dirty = True
        if len(out) > emitted:
            self.significant = True
            out[emitted:] = alert_roots.with_brokers(p, out[emitted:], pf.holders)

    def refresh_due_ms(self, cfg: MonitorConfig) -> int:
        """When its healthy status goes out again (stream.status_refresh_ms, at its own phase:
        state/deadlines.py refresh_due); NEVER before a healthy status or with no refresh."""
        sent = self.status_sent
        if sent is None or not cfg.status_refresh_ms:
            return NEVER
        return deadlines.refresh_due(self.cluster, self.topic, self.partition, sent[1], cfg.status_refresh_ms)

    def _evaluate_followers(
        self,
        pf: PartitionFacts,
        now: int,
        out: list[AlertRecord],
        cfg: MonitorConfig,
        roots: ReplicaRoots,
        deadline: int,
    ) -> int:
        """Apply the per-follower rules to each follower the leader has state of; the deadline,
        brought forward to the first time one of them may change."""
        p = self.leader
        subject = f"{self.cluster}/{self.name}"
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
            exits = self.exits.get(r)
            deadline = deadlines.follower_deadline(p, st, f, exits, cfg.flap_window_ms, deadline, now)
        return deadline

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
        out: list[AlertRecord],
        cfg: MonitorConfig,
        roots: ReplicaRoots,
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
                texts.open_text(rule.name, says, **text_facts(self, f, now, cfg, roots)),
                alert_roots.root_of(self, rule.root, f, cause, roots),
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
                texts.close_text(rule.name, closes, **text_facts(self, f, now, cfg, roots)),
            )

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

    def _resolve_former_followers(self, now: int, out: list[AlertRecord]) -> None:
        """Per-replica alerts only concern followers: a replica that became the leader or left
        the assignment closes its episodes (docs/kafka-rules.md §1.4: a leader is not a follower)."""
        p = self.leader
        for (name, subject), alert in list(self.book.open.items()):
            r = alert.labels[3]
            if r is not None and (r == p.leader or r not in p.replicas):
                role = "became_leader" if r == p.leader else "left_assignment"
                self.book.update(
                    out, name, subject, False, now, alert.labels, replica_close(self, name, role, r)
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

    def explain(self, r: int, now: int, cfg: MonitorConfig) -> ReplicaView:
        """Follower r as its status and the alert texts describe it (state/explain.py)."""
        p = self.leader
        return explain_replica(
            p,
            r,
            now,
            ever_in_isr=r in self.ever_in_isr,
            stuck_after_ms=quiet_after_ms(cfg, p.config.replica_lag_time_max_ms),
            caught_up_grace_ms=caught_up_grace_ms(cfg, p.config.replica_lag_time_max_ms),
        )

    # -- status -------------------------------------------------------------------------------
    def partition_status(self) -> dict[str, Any]:
        """The partition's status record at its time (state/partition_status.py)."""
        return partition_status.partition_status(self)

    def replica_statuses(self, cfg: MonitorConfig) -> list[dict[str, Any]]:
        """Its followers' status records at its time (state/partition_status.py)."""
        return partition_status.replica_statuses(self, cfg)
