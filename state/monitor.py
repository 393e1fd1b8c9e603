"""One partition under watch: contract events in, the leader's rules applied, alerts out.

`PartitionWatch` drives a `PartitionLeader` with the events of docs/events.md, runs Kafka's
isr-expiration task on its schedule (every replica.lag.time.max.ms / 2), and evaluates the
alert conditions at every event and at every *deadline* in between (the exact event time a
follower would pass the imminent fraction, fail isCaughtUp, the HW stall limit, ...), so alert
times do not depend on when events happen to arrive or how a stream is cut into batches.
"""
from __future__ import annotations

from dataclasses import dataclass

from replmon.state.alerts import AlertBook
from replmon.state.explain import explain_replica
from replmon.state.partition import PartitionConfig, PartitionLeader

NEVER = 1 << 62


@dataclass(frozen=True, slots=True)
class MonitorConfig:
    """Defaults for every partition, and the alert thresholds."""

    replica_lag_time_max_ms: int = 30000
    min_insync_replicas: int = 1
    rule_set: str = "current"
    replica_lag_max_messages: int = 4000
    imminent_fraction: float = 0.5      # IsrExitImminent after this fraction of the limit
    hw_stall_ms: int = 10000            # HighWatermarkStalled after this long behind the LEO
    flap_count: int = 3                 # IsrFlapping: this many ISR exits ...
    flap_window_ms: int = 600000        # ... within this window
    telemetry_gap_ms: int = 30000       # TelemetryMissing after this much silence
    lateness_ms: int = 10000            # how far behind its cluster's clock a partition may lag
    reorder_tolerance_ms: int = 1000    # out-of-order events within this are taken at partition time
    stuck_after_ms: int = 3000
    caught_up_grace_ms: int = 2000
    status_interval_ms: int = 1000      # at most one routine status per partition per this much event time
    evict_after_ms: int = 600000        # a partition with no event for this long leaves the state

    def partition_config(self, lag_ms: int | None = None, min_isr: int | None = None) -> PartitionConfig:
        return PartitionConfig(
            replica_lag_time_max_ms=lag_ms or self.replica_lag_time_max_ms,
            min_insync_replicas=min_isr or self.min_insync_replicas,
            alter_partition="immediate",
            rule_set=self.rule_set,
            replica_lag_max_messages=self.replica_lag_max_messages,
        )


def fmt_clock(ms: int) -> str:
    """HH:MM:SS (UTC) of an event time, for alert reasons; pure arithmetic, no clock read."""
    s = (ms // 1000) % 86400
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


class PartitionWatch:
    """The monitor's view of one partition: the leader's state plus alert bookkeeping."""

    __slots__ = ("cluster", "topic", "partition", "name", "leader", "time_ms", "next_tick_ms",
                 "deadline_ms", "reported_isr", "ever_in_isr", "last_isr", "exits",
                 "hw_seen", "hw_last_advanced_ms", "hw_waiting_since_ms", "last_event_ms",
                 "book", "dirty", "significant", "last_status_ms", "auto_assign",
                 "lag_override", "min_isr_override", "leo_seen")

    def __init__(self, cluster: str, topic: str, partition: int, leader: PartitionLeader,
                 now_ms: int, auto_assign: bool = False) -> None:
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

    def advance_to(self, t: int, out: list, cfg: MonitorConfig) -> None:
        """Run every scheduled tick and deadline up to and including event time t."""
        while self.deadline_ms <= t:
            d = self.deadline_ms
            self.time_ms = d
            if d >= self.next_tick_ms:
                self.leader.isr_expiration(self.next_tick_ms)
                self.next_tick_ms = self._tick_after(self.next_tick_ms)
            self.evaluate(d, out, cfg)
        if t > self.time_ms:
            self.time_ms = t

    # -- alerts -------------------------------------------------------------------------------
    def observe(self, now: int, out: list, cfg: MonitorConfig) -> None:
        """After a fetch or an append. Alerts only fire when a deadline passes or the ISR
        changes, and only resolve while one is open; otherwise an event can only bring a
        deadline closer (a follower falling behind, the HW falling behind the LEO), which is
        cheap to track. This keeps the common event at a few attribute reads."""
        self.dirty = True
        p = self.leader
        if self.book.open or now >= self.deadline_ms or p.isr != self.last_isr:
            self.evaluate(now, out, cfg)
            return
        if p.hw != self.hw_seen or (p.hw < p.leader_leo) != (self.hw_waiting_since_ms is not None):
            self._track_hw(now)
            if self.hw_waiting_since_ms is not None:
                self._bring_forward(self.hw_waiting_since_ms + cfg.hw_stall_ms + 1)
        leo = p.leader_leo
        if leo != self.leo_seen:
            self.leo_seen = leo
            soon = int(p.config.replica_lag_time_max_ms * cfg.imminent_fraction) + 1
            followers = p.followers
            for r in p.isr:
                st = followers.get(r)
                if st is not None and st.leo != leo:
                    self._bring_forward(st.last_caught_up_ms + soon)
        if now >= self.deadline_ms:
            self.evaluate(now, out, cfg)

    def _bring_forward(self, d: int) -> None:
        if d < self.deadline_ms:
            self.deadline_ms = d

    def evaluate(self, now: int, out: list, cfg: MonitorConfig) -> None:
        """Bring every alert of this partition in line with its condition at `now`."""
        p = self.leader
        self.leo_seen = p.leader_leo
        emitted = len(out)
        isr = p.isr
        if isr != self.last_isr:
            for r in self.last_isr:
                if r not in isr and r != p.leader:
                    self.exits.setdefault(r, []).append(now)
            self.ever_in_isr.update(isr)
            self.last_isr = isr
            self.significant = True
        self._track_hw(now)
        labels = (self.cluster, self.topic, self.partition, None)
        subject = f"{self.cluster}/{self.name}"
        book = self.book
        lag_limit = p.config.replica_lag_time_max_ms
        imminent_after = int(lag_limit * cfg.imminent_fraction)
        leader_leo = p.leader_leo
        deadline = self.next_tick_ms
        exemption = p.config.rule_set == "current"  # older rule sets have no LEO exemption
        if p.leader >= 0:
            out_of_sync = p.out_of_sync_replicas(now, ignore_inflight=True)
            for r in p.replicas:
                if r == p.leader:
                    continue
                st = p.followers.get(r)
                if st is None:
                    continue
                in_isr = r in isr
                behind = st.leo != leader_leo
                rsub = f"{subject}/{r}"
                rlabels = (self.cluster, self.topic, self.partition, r)
                since = now - st.last_caught_up_ms
                book.update(out, "IsrExitImminent", rsub,
                            in_isr and behind and since > imminent_after and r not in out_of_sync,
                            now, rlabels,
                            lambda r=r, st=st: self._lag_reason(r, st, now, lag_limit, cfg,
                                                                "may leave the ISR soon"),
                            f"replica {r} of {self.name} caught up again or left the ISR")
                book.update(out, "ReplicaOutOfSync", rsub,
                            (in_isr and r in out_of_sync) or (not in_isr and r in self.ever_in_isr),
                            now, rlabels,
                            lambda r=r, st=st: self._lag_reason(r, st, now, lag_limit, cfg,
                                                                "is out of sync"),
                            f"replica {r} of {self.name} is in sync and in the ISR again")
                exits = self.exits.get(r)
                if exits:
                    cutoff = now - cfg.flap_window_ms
                    while exits and exits[0] <= cutoff:
                        exits.pop(0)
                    n = len(exits)
                    book.update(out, "IsrFlapping", rsub, n >= cfg.flap_count, now, rlabels,
                                lambda r=r, n=n: f"replica {r} of {self.name} left the ISR {n} times "
                                                 f"in {cfg.flap_window_ms / 1000:.0f} s",
                                f"replica {r} of {self.name} has stopped leaving the ISR")
                    if exits:
                        deadline = min(deadline, exits[0] + cfg.flap_window_ms)
                if in_isr and (behind or not exemption):
                    for d in (st.last_caught_up_ms + imminent_after + 1,
                              st.last_caught_up_ms + lag_limit + 1,
                              st.last_fetch_ms + lag_limit + 1):
                        if now < d < deadline:
                            deadline = d
        if book.open:
            self._resolve_former_followers(now, out)
        book.update(out, "UnderReplicated", subject, p.under_replicated, now, labels,
                    lambda: f"{self.name} has {len(isr)} of {len(p.replicas)} replicas in sync "
                            f"(ISR {list(isr)})",
                    f"{self.name} has all its replicas in sync again (ISR {list(isr)})")
        book.update(out, "UnderMinIsr", subject, p.under_min_isr, now, labels,
                    lambda: f"{self.name} ISR {list(isr)} is below min.insync.replicas "
                            f"{p.effective_min_isr}: acks=all produce fails and the HW is frozen",
                    f"{self.name} ISR {list(isr)} is back at min.insync.replicas or above")
        book.update(out, "AtMinIsr", subject,
                    p.at_min_isr and len(p.replicas) > p.effective_min_isr, now, labels,
                    lambda: f"{self.name} ISR {list(isr)} is at min.insync.replicas "
                            f"{p.effective_min_isr}: one more loss stops acks=all produce",
                    f"{self.name} ISR {list(isr)} is no longer at min.insync.replicas")
        waiting = self.hw_waiting_since_ms
        stalled = waiting is not None and now - waiting > cfg.hw_stall_ms
        book.update(out, "HighWatermarkStalled", subject, stalled, now, labels,
                    lambda: self._stall_reason(now),
                    f"high watermark of {self.name} is moving again ({p.hw})")
        if waiting is not None and now < waiting + cfg.hw_stall_ms + 1 < deadline:
            deadline = waiting + cfg.hw_stall_ms + 1
        book.update(out, "TelemetryMissing", subject,
                    now - self.last_event_ms > cfg.telemetry_gap_ms, now, labels,
                    lambda: f"no events for {self.name} since {fmt_clock(self.last_event_ms)} "
                            f"({(now - self.last_event_ms) / 1000:.1f} s)",
                    f"events for {self.name} again")
        t_gap = self.last_event_ms + cfg.telemetry_gap_ms + 1
        if now < t_gap < deadline:
            deadline = t_gap
        self.deadline_ms = deadline
        self.dirty = True
        if len(out) > emitted:
            self.significant = True

    def _resolve_former_followers(self, now: int, out: list) -> None:
        """Per-replica alerts only concern followers: a replica that became the leader or left
        the assignment closes its episodes (RULES §1.4: a leader is not a follower)."""
        p = self.leader
        for (name, subject), alert in list(self.book.open.items()):
            r = alert.labels[3]
            if r is not None and (r == p.leader or r not in p.replicas):
                role = "became the leader" if r == p.leader else "left the assignment"
                self.book.update(out, name, subject, False, now, alert.labels,
                                 f"replica {r} {role} of {self.name}")

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

    def _lag_reason(self, r, st, now, lag_limit, cfg, what) -> str:
        view = explain_replica(self.leader, r, now, ever_in_isr=r in self.ever_in_isr,
                               stuck_after_ms=cfg.stuck_after_ms,
                               caught_up_grace_ms=cfg.caught_up_grace_ms)
        fetch = (f"no fetch since {fmt_clock(st.last_fetch_ms)}" if st.last_fetch_ms
                 else "no fetch since the election")
        if st.last_caught_up_ms:  # 0 means never (Kafka's reset for a non-ISR follower)
            lag = f"not caught up for {(now - st.last_caught_up_ms) / 1000:.1f} s"
        else:
            lag = "never caught up since the election"
        return (f"replica {r} of {self.name} {what}: {lag} "
                f"(limit {lag_limit / 1000:g} s), {view.lag_messages} messages behind: "
                f"{view.state}, {fetch}")

    def _stall_reason(self, now: int) -> str:
        p = self.leader
        holders = [r for r in p.maximal_isr if r != p.leader and r in p.followers
                   and p.followers[r].leo == p.hw]
        waiting = self.hw_waiting_since_ms or now
        who = f"waiting on replica(s) {holders}" if holders else "waiting on the ISR"
        return (f"high watermark of {self.name} stuck at {p.hw} for {(now - waiting) / 1000:.1f} s "
                f"while the leader LEO is {p.leader_leo}: {who}; acks=all producers are waiting")

    # -- status -------------------------------------------------------------------------------
    def partition_status(self) -> dict:
        p = self.leader
        now = self.time_ms
        waiting = self.hw_waiting_since_ms
        holders = [r for r in p.maximal_isr if r != p.leader and r in p.followers
                   and p.followers[r].leo == p.hw] if p.hw < p.leader_leo else []
        return {
            "cluster": self.cluster, "topic": self.topic, "partition": self.partition, "ts": now,
            "leader": p.leader, "leader_epoch": p.leader_epoch, "replicas": list(p.replicas),
            "isr": list(p.isr), "maximal_isr": list(p.maximal_isr),
            "reported_isr": list(self.reported_isr) if self.reported_isr is not None else None,
            "hw": p.hw, "leader_leo": p.leader_leo,
            "under_replicated": p.under_replicated, "under_min_isr": p.under_min_isr,
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
            v = explain_replica(p, r, now, ever_in_isr=r in self.ever_in_isr,
                                stuck_after_ms=cfg.stuck_after_ms,
                                caught_up_grace_ms=cfg.caught_up_grace_ms)
            rows.append({
                "cluster": self.cluster, "topic": self.topic, "partition": self.partition,
                "replica": r, "ts": now, "leo": v.leo, "leader_leo": v.leader_leo,
                "lag_messages": v.lag_messages, "last_caught_up_ms": v.last_caught_up_ms,
                "lag_ms": v.lag_ms, "last_fetch_ms": v.last_fetch_ms, "in_isr": v.in_isr,
                "in_reported_isr": (r in self.reported_isr) if self.reported_isr is not None else None,
                "caught_up": v.caught_up, "state": v.state,
                "out_of_sync_at_ms": v.out_of_sync_at_ms, "removable_by_ms": v.removable_by_ms,
                "holds_hw": v.holds_hw,
            })
        return rows
