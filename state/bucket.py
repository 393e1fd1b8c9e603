"""Many partitions in one unit of state: the streaming job keeps one `Bucket` per group.

Spark's stateful operator costs a Python call per group, so partitions are hashed into a few
buckets and each bucket holds a dict of `PartitionWatch`es. `broker` and `heartbeat` events are
delivered to every bucket (they concern the whole cluster), so each bucket keeps a small view
of every cluster: its clock (newest event time seen from it) and its brokers' states.

Events are plain tuples in the order of `EVENT_FIELDS` (state/events.py, the event contract);
the adapter builds them from columns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from replmon.state import alert_rules, sessions, texts
from replmon.state.alerts import Alerts, Emitted
from replmon.state.broker_replay import BrokerReplay
from replmon.state.cluster_view import ClusterView, ColdWatch, is_cold, owner_bucket
from replmon.state.events import (
    BROKER,
    BROKER_EPOCH,
    CLUSTER,
    COMPACTION_RESOLUTION,
    COMPACTION_SCHEME,
    ISR,
    LEADER,
    LEADER_EPOCH,
    LEADER_LEO,
    PARTITION,
    REPLICA,
    REPLICAS,
    SESSION_ID,
    STATE,
    TOPIC,
    TS,
    TYPE,
)
from replmon.state.fetcher import FetcherWatch, PartitionKey
from replmon.state.monitor import MonitorConfig, PartitionWatch, quiet_after_ms
from replmon.state.partition_events import (
    apply_fetch,
    apply_metadata,
    new_leader,
    overrides,
    quarantine_record,
    takes_behind,
)
from replmon.state.root_cause import BROKER_UNAVAILABLE, broker_root, broker_subject, cause_of
from replmon.state.status_records import emit_statuses
from replmon.state.texts import fmt_clock

Records = list[dict[str, Any]]  # quarantine, status and activity records


class Bucket:
    """The state of one group: the partitions hashed to it and a view of every cluster."""

    def __init__(self, bucket_id: int, buckets: int) -> None:
        self.bucket_id = bucket_id
        self.buckets = buckets
        # (after a lazy decode, some values are ColdWatches until `warm` loads them: typed as
        # PartitionWatch so that the engine's many reads of a loaded watch need no narrowing;
        # every path that reads more than ColdWatch's fields calls `warm` first)
        self.partitions: dict[PartitionKey, PartitionWatch] = {}
        self.clusters: dict[str, ClusterView] = {}
        self.global_ms = 0
        self.replay = BrokerReplay()  # how far each partition has applied its cluster's broker log
        self.fetchers = FetcherWatch(self, quiet_after_ms)  # fetcher-stall detection over these partitions
        # The partitions whose stored state changed since the bucket was last written (keys; a
        # key evicted since may be in it): state/codec.encode_chunks re-encodes only these. A
        # partition moved up to its cluster's settled time and nothing else is not in it (the
        # codec stores `time_ms` apart). tests/streaming/test_incremental_state.py fails when a
        # change is not marked.
        self.touched: set[PartitionKey] = set()
        # Loads a ColdWatch's partition (set by state/codec.py when it decodes lazily).
        self.load_cold: Callable[[PartitionKey], PartitionWatch] | None = None

    def warm(self, key: PartitionKey) -> PartitionWatch:
        """The partition's watch, loaded first if the bucket was loaded without it."""
        watch = self.partitions[key]
        if not is_cold(watch):
            return watch
        assert self.load_cold is not None  # only state/codec.py makes ColdWatches, and sets it
        cold = watch
        watch = self.load_cold(key)
        watch.time_ms = cold.time_ms  # moved since it was stored (without loading it)
        self.partitions[key] = watch  # same key: its place in the bucket's order stays
        return watch

    def warm_all(self) -> None:
        """Load every partition the bucket was loaded without (steps that read all of them)."""
        if self.load_cold is None:
            return
        for key in [k for k, w in self.partitions.items() if is_cold(w)]:
            self.warm(key)

    # -- events -------------------------------------------------------------------------------
    def process(self, events, cfg: MonitorConfig, alerts: Alerts, quarantine: Records) -> None:
        """Apply events (already in event-time order) and append the alert transitions to
        `alerts` (the micro-batch's records so far)."""
        out = Emitted()
        for ev in events:
            if out.out_of_sync:  # the previous event put a follower out of sync
                self.fetchers.after(cfg, out, alerts)
            view = self._clock(ev, out)
            kind = ev[TYPE]
            if kind == "heartbeat":
                view.state_resolution(ev[COMPACTION_RESOLUTION], ev[COMPACTION_SCHEME])
                continue
            if kind == "session":
                self._session(ev, view, view.config(cfg), out, quarantine)
            elif kind == "broker":
                self._broker(ev, view, out)
            else:
                self._partition_event(ev, kind, view, view.config(cfg), out, quarantine)
        if out.out_of_sync:
            self.fetchers.after(cfg, out, alerts)
        alerts += out

    def _clock(self, ev, alerts: Alerts) -> ClusterView:
        """The event's cluster view, its clock and the bucket's moved up to the event's time (a
        cluster heard from again: its TelemetryMissing resolves)."""
        ts = ev[TS]
        cluster = ev[CLUSTER]
        view = self.clusters.get(cluster)
        if view is None:
            view = self.clusters[cluster] = ClusterView(clock_ms=ts)
        if ts > view.clock_ms:
            if self._owns(cluster) and view.book.open:
                view.book.resolve_all(
                    alerts, ts, texts.close_text("TelemetryMissing", "cluster", cluster=cluster)
                )
            view.clock_ms = ts
        if ts > self.global_ms:
            self.global_ms = ts
        return view

    def _partition_event(
        self, ev, kind: str, view: ClusterView, cfg: MonitorConfig, alerts: Alerts, quarantine: Records
    ) -> None:
        """A fetch, an append or a metadata event: its partition brought up to its time, then
        the event applied and the partition's alerts evaluated."""
        key = (ev[CLUSTER], ev[TOPIC], ev[PARTITION])
        self.touched.add(key)
        ts = ev[TS]
        watch: PartitionWatch | None = self.partitions.get(key)
        if watch is not None:
            brought = self._bring_up(key, watch, ev, kind, view, cfg, alerts, quarantine)
            if brought is None:
                return
            watch, ts = brought
        if kind == "metadata":
            self._on_metadata(key, watch, ev, ts, view, cfg, alerts)
            return
        if watch is None:
            watch = self._start(key, ev, ts, view, cfg, auto=True)
        if kind == "fetch":
            self._on_fetch(watch, ev, ts, view, cfg, alerts, quarantine)
        elif kind == "append":
            self._on_append(watch, ev, ts, view, cfg)
        watch.observe(ts, alerts, cfg, self.replay.roots(key, view), ev[REPLICA], view.sessions)

    def _bring_up(
        self,
        key,
        watch: PartitionWatch,
        ev,
        kind: str,
        view: ClusterView,
        cfg,
        alerts: Alerts,
        quarantine: Records,
    ) -> tuple[PartitionWatch, int] | None:
        """The partition loaded and moved up to the event's time, with the broker events and
        its followers' session reads before it; None when the event is not applied (late,
        stale, a resend). The time is the partition's own when the event is slightly behind it."""
        ts = ev[TS]
        if is_cold(watch):
            watch = self.warm(key)
        # Broker events come first on equal times (streaming/stateful.py's order).
        if view.broker_log:
            self.replay.apply(key, watch, view, ts + 1, cfg, alerts)
        if view.sessions.reads:  # its followers' session reads before this event
            sessions.sync(view.sessions, watch, ts)
            # Silent since its last event or read (sessions carried it, so no deadline of its
            # own said so; a session's silence, noticed at the end of the batch, comes too late
            # for this event): checked at that moment first, as a deadline would have.
            silent_at = watch.last_event_ms + cfg.telemetry_gap_ms + 1
            if watch.time_ms < silent_at <= ts and silent_at < watch.deadline_ms:
                watch.deadline_ms = silent_at
        if ts < watch.time_ms:
            if not takes_behind(watch, ev, kind, cfg, quarantine):
                return None
            ts = watch.time_ms
        if watch.deadline_ms <= ts:
            sessions.advance_watch(view.sessions, watch, ts, alerts, cfg, self.replay.roots(key, view))
        elif ts > watch.time_ms:  # what advance_to does when no deadline is due
            watch.time_ms = ts
        watch.last_event_ms = ts
        return watch, ts

    def _on_fetch(
        self, watch: PartitionWatch, ev, ts: int, view: ClusterView, cfg, alerts: Alerts, quarantine: Records
    ) -> None:
        apply_fetch(watch, ev, ts, quarantine)
        view.active(ev[REPLICA], ts, cfg.stuck_after_ms)
        epoch = ev[LEADER_EPOCH]
        if epoch is None or epoch == watch.leader.leader_epoch:
            # logged by the leader replmon knows (a fetch of a newer epoch was answered by a
            # new leader whose metadata has not arrived yet: not the old one's doing)
            view.active(watch.leader.leader, ts, cfg.stuck_after_ms)
        if view.fetcher_roots:  # does this fetch end a stall?
            self.fetchers.fetch_resumed(ev[CLUSTER], watch, ev[REPLICA], ts, cfg, alerts)

    @staticmethod
    def _on_append(watch: PartitionWatch, ev, ts: int, view: ClusterView, cfg) -> None:
        if ev[LEADER_LEO] > watch.leader.leader_leo:
            watch.leader.append(ts, ev[LEADER_LEO])
        if len(watch.leader.replicas) <= 1:
            # an append carries no leader epoch: after a leader change it may come from the
            # new leader before its metadata does; a partition with followers shows its
            # leader alive by their fetches, so only a leader without followers counts here
            view.active(watch.leader.leader, ts, cfg.stuck_after_ms)

    def _on_metadata(
        self, key, watch: PartitionWatch | None, ev, ts: int, view: ClusterView, cfg, alerts: Alerts
    ) -> None:
        if not ev[REPLICAS]:  # the cluster no longer lists the partition: deleted
            if watch is not None:
                self._evict(
                    key,
                    ts,
                    alerts,
                    f"{watch.name} is gone from the cluster metadata (no replicas): no longer monitored",
                )
            return
        if watch is None:
            watch = self._start(key, ev, ts, view, cfg, auto=False)
        else:
            apply_metadata(watch, ev, ts, view, cfg, self.replay.applied(key))
        watch.reported_isr = tuple(sorted(ev[ISR]))
        watch.significant = True
        watch.evaluate(ts, alerts, cfg, self.replay.roots(key, view), view.sessions)

    def _session(
        self, ev, view: ClusterView, cfg: MonitorConfig, alerts: Alerts, quarantine: Records
    ) -> None:
        """A fetch session read (state/sessions.py): one entry in the cluster's table; the
        partitions it carries take the read when something asks. A refused one is quarantined
        once, by the cluster's owner bucket (every bucket sees it)."""
        replica, leader, ts = ev[REPLICA], ev[LEADER], ev[TS]
        refused = view.sessions.read(replica, leader, ev[SESSION_ID], ts)
        if refused is not None:
            if self._owns(ev[CLUSTER]):
                quarantine.append(quarantine_record(ev, refused))
            return
        view.active(replica, ts, cfg.stuck_after_ms)
        view.active(leader, ts, cfg.stuck_after_ms)
        if view.fetcher_roots:  # rare: does this read end a stall?
            self.fetchers.session_resumed(ev[CLUSTER], replica, leader, ev[SESSION_ID], ts, cfg, alerts)

    def _session_kept(self, key: PartitionKey, view: ClusterView, target: int, cfg: MonitorConfig) -> bool:
        """Whether a partition with no event of its own for stream.evict_after_ms is still
        read by its followers' sessions (then it stays: its last event is that read)."""
        if not view.sessions.reads:
            return False
        watch = self.warm(key)
        if sessions.sync(view.sessions, watch, target):
            self.touched.add(key)
        return target < watch.last_event_ms + cfg.evict_after_ms

    def _owns(self, cluster: str) -> bool:
        return owner_bucket(cluster, self.buckets) == self.bucket_id

    def _start(self, key, ev, ts, view: ClusterView, cfg: MonitorConfig, auto: bool) -> PartitionWatch:
        cluster, topic, partition = key
        leader = new_leader(ev, ts, cfg, auto)
        self.replay.start(key, leader, view, ts)
        watch = PartitionWatch(cluster, topic, partition, leader, ts, auto_assign=auto)
        if not auto:
            watch.lag_override, watch.min_isr_override = overrides(ev)
        self.partitions[key] = watch
        return watch

    def _broker(self, ev, view: ClusterView, alerts: Alerts) -> None:
        """A broker's state changed: the cluster-wide root alert now, and into the log for the
        partitions, which apply it when their own time reaches it (state/broker_replay.py)."""
        broker, state, epoch, ts = ev[BROKER], ev[STATE], ev[BROKER_EPOCH], ev[TS]
        view.broker_log.append((ts, broker, state, epoch))
        view.registered_ms[broker] = ts
        self.warm_all()  # rare: the broker's alert counts the partitions it leads
        watches = [w for (c, _, _), w in self.partitions.items() if c == ev[CLUSTER]]
        self._broker_root(ev[CLUSTER], broker, state, ts, view, watches, alerts)

    @staticmethod
    def _broker_root(
        cluster: str,
        broker: int,
        state: str,
        ts: int,
        view: ClusterView,
        watches: list[PartitionWatch],
        alerts: Alerts,
    ) -> None:
        """Open or close this bucket's share of the broker's BrokerUnavailable alert. Every
        bucket sees the same broker event, so every bucket derives the same id; the shares are
        folded into one record by root_cause.merge_root_alerts."""
        unavailable = alert_rules.is_broker_unavailable(state=state)
        current = view.roots.get(broker)
        if unavailable and current is None:
            root = view.roots[broker] = broker_root(cluster, broker, state, ts)
            rec = view.root_book.update(
                alerts,
                BROKER_UNAVAILABLE,
                broker_subject(cluster, broker),
                True,
                ts,
                (cluster, None, None, broker),
                "",
                cause=cause_of(state),
                counts={"leaders_lost": sum(w.leader.leader == broker for w in watches)},
            )
            assert rec is not None and rec["alert_id"] == root.alert_id
        elif not unavailable and current is not None:
            del view.roots[broker]
            view.root_book.update(
                alerts,
                BROKER_UNAVAILABLE,
                broker_subject(cluster, broker),
                False,
                ts,
                (cluster, None, None, broker),
                "",
            )

    # -- time without events ------------------------------------------------------------------
    def advance(self, cfg: MonitorConfig, alerts: Alerts, watermark_ms: int | None = None) -> None:
        """Move every partition up to its cluster's clock less the allowed lateness, and check
        each owned cluster for silence against the newest event time seen anywhere; append the
        alert transitions to `alerts` (the micro-batch's records so far)."""
        if watermark_ms is not None and watermark_ms > self.global_ms:
            self.global_ms = watermark_ms
        out = Emitted()
        for cluster, view in self.clusters.items():
            if view.sessions.reads:
                self._wake_silent(cluster, view, cfg)
        idle = self._settle(cfg, out)
        self._evict_idle(idle, cfg, out)
        self.replay.trim(self.partitions, self.clusters)
        for view in self.clusters.values():
            if view.sessions.reads:
                settled = view.settled_ms(cfg.lateness_ms)
                view.sessions.prune(settled - cfg.reorder_tolerance_ms, settled - cfg.evict_after_ms)
        if out.out_of_sync:
            self.fetchers.after(cfg, out, alerts)
        self.fetchers.close_lost(cfg, out)
        for cluster, view in self.clusters.items():
            if self._owns(cluster):
                self._telemetry_missing(cluster, view, cfg, out)
        alerts += out

    def _wake_silent(self, cluster: str, view: ClusterView, cfg: MonitorConfig) -> None:
        """The partitions a session carried that fell silent by the cluster's settled time
        (alerts.telemetry_gap_ms after its last read) take that moment as a deadline: they had
        none of their own for it (PartitionWatch.evaluate); so do those of a session heard from
        again after that, at its read. Rare: a broker gone, a session replaced. Scans the
        bucket's partitions of the cluster once for all such sessions."""
        table = view.sessions
        gap = view.config(cfg).telemetry_gap_ms
        wakes = table.silent(view.settled_ms(cfg.lateness_ms), gap)
        if table.resumed:  # heard from again: its partitions' TelemetryMissing may resolve
            wakes += table.resumed
            table.resumed = []
        if not wakes:
            return
        by_leader: dict[int, list[tuple[int, int, int]]] = {}  # leader -> (follower, session, moment)
        for (replica, leader, session_id), at in wakes:
            by_leader.setdefault(leader, []).append((replica, session_id, at))
        partitions: dict[PartitionKey, Any] = self.partitions  # loaded watches and ColdWatches
        for key, w in list(partitions.items()):
            if key[0] != cluster:
                continue
            if w.__class__ is ColdWatch:
                led, replicas = w.leader_id, w.replicas
            else:
                led, replicas = w.leader.leader, w.leader.replicas
            mine = [x for x in by_leader.get(led, ()) if x[0] in replicas]
            if not mine:
                continue
            watch = self.warm(key)
            for replica, session_id, at in mine:
                st = watch.leader.followers.get(replica)
                if st is not None and st.session_id == session_id and watch.time_ms < at < watch.deadline_ms:
                    watch.deadline_ms = at
                    self.touched.add(key)

    def _settle(self, cfg: MonitorConfig, alerts: Alerts) -> list[PartitionKey]:
        """Move every partition up to its cluster's settled time; the keys of those with no
        event for stream.evict_after_ms (to evict), which stay where they are."""
        idle: list[PartitionKey] = []
        evict_after = cfg.evict_after_ms
        # per cluster, once: its settled time, its view and whether it has a broker log (this
        # loop visits every partition every batch; nothing in it moves a cluster's clock or log)
        clusters = {
            name: (view.settled_ms(cfg.lateness_ms), view, bool(view.broker_log))
            for name, view in self.clusters.items()
        }
        for key, watch in self.partitions.items():
            target, view, logged = clusters[key[0]]
            if target >= watch.last_event_ms + evict_after and not self._session_kept(key, view, target, cfg):
                idle.append(key)
                continue
            if logged:
                watch = self.warm(key)
                self.touched.add(key)
                self.replay.apply(key, watch, view, target + 1, view.config(cfg), alerts)
            if target > watch.time_ms:
                if watch.deadline_ms <= target:
                    watch = self.warm(key)
                    self.touched.add(key)
                    sessions.advance_watch(
                        view.sessions, watch, target, alerts, view.config(cfg), self.replay.roots(key, view)
                    )
                else:  # what advance_to does when no deadline is due (a ColdWatch stays cold)
                    watch.time_ms = target
        return idle

    def _evict_idle(self, idle: list[PartitionKey], cfg: MonitorConfig, alerts: Alerts) -> None:
        """Evict the partitions with no event for stream.evict_after_ms, at that time."""
        for key in idle:
            watch = self.warm(key)
            view = self.clusters[key[0]]
            at = watch.last_event_ms + cfg.evict_after_ms
            own = view.config(cfg)  # the cluster's: its stated compaction resolution
            self.replay.apply(key, watch, view, at + 1, own, alerts)
            sessions.advance_watch(view.sessions, watch, at, alerts, own, self.replay.roots(key, view))
            self._evict(
                key,
                at,
                alerts,
                f"{watch.name} is no longer reported: no event since "
                f"{fmt_clock(watch.last_event_ms)} (stream.evict_after_ms "
                f"{cfg.evict_after_ms / 1000:g} s): no longer monitored",
            )

    def _telemetry_missing(self, cluster: str, view: ClusterView, cfg: MonitorConfig, alerts: Alerts) -> None:
        """An owned cluster silent for alerts.telemetry_gap_ms (TelemetryMissing)."""
        silent_at = view.clock_ms + cfg.telemetry_gap_ms + 1
        # Only once the newest event anywhere is the allowed lateness past that point: the
        # cluster's events may be read that far behind another cluster's.
        view.book.update(
            alerts,
            "TelemetryMissing",
            cluster,
            self.global_ms - cfg.lateness_ms >= silent_at,
            silent_at,
            (cluster, None, None, None),
            texts.open_text(
                "TelemetryMissing",
                "cluster",
                cluster=cluster,
                since=fmt_clock(view.clock_ms),
                gap=f"{cfg.telemetry_gap_ms / 1000:g} s",
            ),
            texts.close_text("TelemetryMissing", "cluster", cluster=cluster),
        )

    def _evict(self, key: PartitionKey, at_ms: int, alerts: Alerts, reason: str) -> None:
        """Drop a partition from the state (bounded state: a deleted topic does not stay
        forever): its open alerts resolve at `at_ms` with `reason`."""
        watch = self.partitions.pop(key)
        self.replay.forget(key)
        watch.book.resolve_all(alerts, at_ms, reason)

    def next_timeout_ms(self, cfg: MonitorConfig) -> int | None:
        """Event time at which this bucket has something to say even if no event arrives."""
        owned = [
            v.clock_ms + cfg.telemetry_gap_ms + 1
            for c, v in self.clusters.items()
            if self._owns(c) and not v.book.open
        ]
        return min(owned) if owned else None

    def activity_reports(self) -> Records:
        """What this micro-batch showed of each broker's activity, for the cluster step
        (state/cluster.py): the runs it closed or extended, and how many of this bucket's
        partitions each broker leads and holds a replica of. Cleared once reported."""
        out = []
        for cluster, view in self.clusters.items():
            if not view.activity_out:
                continue
            led: dict[int, int] = {}
            held: dict[int, int] = {}
            partitions: dict[PartitionKey, Any] = self.partitions  # loaded watches and ColdWatches
            for (c, _, _), w in partitions.items():
                if c != cluster:
                    continue
                if w.__class__ is ColdWatch:
                    leader, replicas = w.leader_id, w.replicas
                else:
                    p = w.leader
                    leader, replicas = p.leader, p.replicas
                if leader >= 0:
                    led[leader] = led.get(leader, 0) + 1
                for r in replicas:
                    held[r] = held.get(r, 0) + 1
            brokers: dict[str, dict[str, Any]] = {}
            for b, closed in view.activity_out.items():
                run = view.activity.get(b)
                brokers[str(b)] = {"segments": [list(x) for x in closed] + ([list(run)] if run else [])}
            for b in {*led, *held, *view.activity}:
                brokers.setdefault(str(b), {}).update(led=led.get(b, 0), replicas=held.get(b, 0))
            view.activity_out = {}
            out.append({"cluster": cluster, "bucket": self.bucket_id, "brokers": brokers})
        return out

    # -- status -------------------------------------------------------------------------------
    def statuses(
        self,
        cfg: MonitorConfig,
        partitions: Records,
        replicas: Records,
        force: bool = False,
        points: Records | None = None,
    ) -> None:
        """Append the status of each partition that changed (state/status_records.py)."""
        emit_statuses(self, cfg, partitions, replicas, force, points)
