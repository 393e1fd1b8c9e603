"""Many partitions in one unit of state: the streaming job keeps one `Bucket` per group.

Spark's stateful operator costs a Python call per group, so partitions are hashed into a few
buckets and each bucket holds a dict of `PartitionWatch`es. `broker` and `heartbeat` events are
delivered to every bucket (they concern the whole cluster), so each bucket keeps a small view
of every cluster: its clock (newest event time seen from it) and its brokers' states.

Events are plain tuples in the order of `EVENT_FIELDS`; the adapter builds them from columns.
"""
from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field

from replmon.state import alert_rules
from replmon.state.alerts import AlertBook
from replmon.state.monitor import MonitorConfig, PartitionWatch
from replmon.state.partition import PartitionLeader
from replmon.state.root_cause import BROKER_UNAVAILABLE, broker_root, broker_subject, cause_of
from replmon.state.texts import fmt_clock

EVENT_FIELDS = (
    "type", "ts", "cluster", "topic", "partition", "replica", "fetch_offset", "leader_leo",
    "leader_epoch", "broker_epoch", "log_start_offset", "error", "diverging_epoch", "leader",
    "replicas", "isr", "adding_replicas", "hw", "min_insync_replicas",
    "replica_lag_time_max_ms", "broker", "state", "raw",
)
(TYPE, TS, CLUSTER, TOPIC, PARTITION, REPLICA, FETCH_OFFSET, LEADER_LEO, LEADER_EPOCH,
 BROKER_EPOCH, LOG_START, ERROR, DIVERGING, LEADER, REPLICAS, ISR, ADDING, HW, MIN_ISR,
 LAG_MAX, BROKER, STATE, RAW) = range(len(EVENT_FIELDS))

# Fetch rejections that mean the input disagrees with what replmon knows: quarantined.
QUARANTINED_REJECTIONS = {"unassigned_replica", "stale_broker_epoch"}


def owner_bucket(cluster: str, buckets: int) -> int:
    """The one bucket that raises a cluster's own alerts (all buckets see its clock)."""
    return zlib.crc32(cluster.encode()) % buckets


@dataclass(slots=True)
class ClusterView:
    clock_ms: int = 0
    brokers: dict = field(default_factory=dict)  # id -> (state, broker_epoch)
    book: AlertBook = field(default_factory=AlertBook)       # the cluster's own alerts (owner bucket)
    roots: dict = field(default_factory=dict)                # unavailable broker -> BrokerRoot
    root_book: AlertBook = field(default_factory=AlertBook)  # this bucket's share of the root alerts


class Bucket:
    """The state of one group: the partitions hashed to it and a view of every cluster."""

    def __init__(self, bucket_id: int, buckets: int) -> None:
        self.bucket_id = bucket_id
        self.buckets = buckets
        self.partitions: dict[tuple, PartitionWatch] = {}
        self.clusters: dict[str, ClusterView] = {}
        self.global_ms = 0

    # -- events -------------------------------------------------------------------------------
    def process(self, events, cfg: MonitorConfig, alerts: list, quarantine: list) -> None:
        """Apply events (already in event-time order) and record alert transitions."""
        for ev in events:
            ts = ev[TS]
            cluster = ev[CLUSTER]
            view = self.clusters.get(cluster)
            if view is None:
                view = self.clusters[cluster] = ClusterView(clock_ms=ts)
            if ts > view.clock_ms:
                if self._owns(cluster) and view.book.open:
                    view.book.resolve_all(alerts, ts, f"events from cluster {cluster} again")
                view.clock_ms = ts
            if ts > self.global_ms:
                self.global_ms = ts
            kind = ev[TYPE]
            if kind == "heartbeat":
                continue
            if kind == "broker":
                self._broker(ev, view, cfg, alerts)
                continue
            key = (cluster, ev[TOPIC], ev[PARTITION])
            watch = self.partitions.get(key)
            if watch is not None:
                if ts < watch.time_ms:
                    if ts < watch.time_ms - cfg.reorder_tolerance_ms:
                        quarantine.append(_quarantine(ev, f"late: event time {ts} is before the "
                                                          f"partition's processed time {watch.time_ms}"))
                        continue
                    ts = watch.time_ms
                watch.advance_to(ts, alerts, cfg, view.roots)
                watch.last_event_ms = ts
            if kind == "fetch":
                if watch is None:
                    watch = self._start(key, ev, ts, view, cfg, auto=True)
                self._fetch(watch, ev, ts, quarantine)
            elif kind == "append":
                if watch is None:
                    watch = self._start(key, ev, ts, view, cfg, auto=True)
                if ev[LEADER_LEO] > watch.leader.leader_leo:
                    watch.leader.append(ts, ev[LEADER_LEO])
            elif kind == "metadata":
                if not ev[REPLICAS]:   # the cluster no longer lists the partition: deleted
                    if watch is not None:
                        self._evict(key, ts, alerts, f"{watch.name} is gone from the cluster "
                                                     f"metadata (no replicas): no longer monitored")
                    continue
                if watch is None:
                    watch = self._start(key, ev, ts, view, cfg, auto=False)
                else:
                    self._metadata(watch, ev, ts, view, cfg)
                watch.reported_isr = tuple(sorted(ev[ISR]))
                watch.significant = True
                watch.evaluate(ts, alerts, cfg, view.roots)
                continue
            watch.observe(ts, alerts, cfg, view.roots)

    def _owns(self, cluster: str) -> bool:
        return owner_bucket(cluster, self.buckets) == self.bucket_id

    def _start(self, key, ev, ts, view: ClusterView, cfg: MonitorConfig, auto: bool) -> PartitionWatch:
        cluster, topic, partition = key
        if auto:
            leader = PartitionLeader(config=cfg.partition_config(), now_ms=ts, leader=-1,
                                     leader_epoch=-1, replicas=(), isr=(),
                                     leader_leo=max(ev[LEADER_LEO] or 0, 0), hw=0)
        else:
            lag, min_isr = _overrides(ev)
            leo = ev[LEADER_LEO] if ev[LEADER_LEO] is not None else 0
            hw = ev[HW] if ev[HW] is not None else 0
            leader = PartitionLeader(config=cfg.partition_config(lag, min_isr), now_ms=ts,
                                     leader=ev[LEADER], leader_epoch=ev[LEADER_EPOCH],
                                     replicas=tuple(ev[REPLICAS]), isr=tuple(ev[ISR]),
                                     adding_replicas=tuple(ev[ADDING] or ()),
                                     leader_leo=leo, hw=min(hw, leo))
        self._apply_brokers(leader, view)
        watch = PartitionWatch(cluster, topic, partition, leader, ts, auto_assign=auto)
        if not auto:
            watch.lag_override, watch.min_isr_override = _overrides(ev)
        self.partitions[key] = watch
        return watch

    @staticmethod
    def _apply_brokers(leader: PartitionLeader, view: ClusterView) -> None:
        for broker, (state, epoch) in view.brokers.items():
            leader.set_broker_state(broker, fenced=state == "fenced",
                                    shutting_down=state == "shutting_down", broker_epoch=epoch)

    def _fetch(self, watch: PartitionWatch, ev, ts: int, quarantine: list) -> None:
        p = watch.leader
        replica = ev[REPLICA]
        if watch.auto_assign and replica not in p.replicas:
            p.controller_update(ts, isr=p.isr, leader_epoch=p.leader_epoch,
                                replicas=tuple(p.replicas) + (replica,))
        leo = ev[LEADER_LEO]
        if leo is not None and leo > p.leader_leo:
            p.append(ts, leo)
        outcome = p.fetch(ts, replica, ev[FETCH_OFFSET], broker_epoch=ev[BROKER_EPOCH],
                          log_start_offset=ev[LOG_START], error=ev[ERROR],
                          diverging_epoch=ev[DIVERGING])
        if not outcome.accepted and outcome.reject_reason in QUARANTINED_REJECTIONS:
            quarantine.append(_quarantine(ev, f"fetch rejected: {outcome.reject_reason} "
                                              f"(replica {replica}, assignment {list(p.replicas)})"))

    def _metadata(self, watch: PartitionWatch, ev, ts: int, view: ClusterView,
                  cfg: MonitorConfig) -> None:
        p = watch.leader
        lag, min_isr = _overrides(ev)
        if (lag, min_isr) != (watch.lag_override, watch.min_isr_override):
            watch.lag_override, watch.min_isr_override = lag, min_isr
            p.config = cfg.partition_config(lag, min_isr)
        epoch, leader_id = ev[LEADER_EPOCH], ev[LEADER]
        replicas, isr = tuple(ev[REPLICAS]), tuple(ev[ISR])
        adding = tuple(ev[ADDING] or ())
        if epoch < p.leader_epoch:
            return  # an older view of the partition: the leader ignores it too
        if leader_id != p.leader:
            # A different broker leads now: it knows nothing of the followers (RULES §1.4).
            leo = ev[LEADER_LEO] if ev[LEADER_LEO] is not None else p.leader_leo
            hw = ev[HW] if ev[HW] is not None else min(p.hw, leo)
            new = PartitionLeader(config=p.config, now_ms=ts, leader=leader_id,
                                  leader_epoch=epoch, replicas=replicas, isr=isr,
                                  adding_replicas=adding, leader_leo=leo, hw=min(hw, leo))
            self._apply_brokers(new, view)
            watch.leader = new
            watch.auto_assign = False
            return
        if epoch > p.leader_epoch:
            p.controller_update(ts, isr=isr, leader_epoch=epoch, is_new_leader=False,
                                replicas=replicas, adding_replicas=adding,
                                leader_leo=ev[LEADER_LEO], hw=ev[HW])
            watch.auto_assign = False
            return
        # Same epoch: the committed ISR as the cluster reports it. A member that the rules say
        # is out of sync is kept out: the report predates the shrink the leader is about to make.
        keep = tuple(sorted(r for r in isr if r in p.isr or r == p.leader
                            or r not in p.followers or p.is_caught_up(r, ts)))
        if keep != p.isr or replicas != p.replicas or adding != p.adding_replicas:
            p.controller_update(ts, isr=keep, leader_epoch=epoch, replicas=replicas,
                                adding_replicas=adding)
        watch.auto_assign = False

    def _broker(self, ev, view: ClusterView, cfg: MonitorConfig, alerts: list) -> None:
        broker, state, epoch = ev[BROKER], ev[STATE], ev[BROKER_EPOCH]
        view.brokers[broker] = (state, epoch)
        ts = ev[TS]
        watches = [w for (c, _, _), w in self.partitions.items() if c == ev[CLUSTER]]
        for watch in watches:
            watch.advance_to(max(ts, watch.time_ms), alerts, cfg, view.roots)
        self._broker_root(ev[CLUSTER], broker, state, ts, view, watches, alerts)
        for watch in watches:
            t = max(ts, watch.time_ms)
            watch.leader.set_broker_state(broker, fenced=state == "fenced",
                                          shutting_down=state == "shutting_down",
                                          broker_epoch=epoch)
            watch.evaluate(t, alerts, cfg, view.roots)

    @staticmethod
    def _broker_root(cluster: str, broker: int, state: str, ts: int, view: ClusterView,
                     watches: list, alerts: list) -> None:
        """Open or close this bucket's share of the broker's BrokerUnavailable alert. Every
        bucket sees the same broker event, so every bucket derives the same id; the shares are
        folded into one record by root_cause.merge_root_alerts."""
        unavailable = alert_rules.is_broker_unavailable(state=state)
        current = view.roots.get(broker)
        if unavailable and current is None:
            root = view.roots[broker] = broker_root(cluster, broker, state, ts)
            view.root_book.update(alerts, BROKER_UNAVAILABLE, broker_subject(cluster, broker), True,
                                  ts, (cluster, None, None, broker), "", cause=cause_of(state))
            alerts[-1]["counts"] = {"leaders_lost": sum(w.leader.leader == broker for w in watches)}
            assert alerts[-1]["alert_id"] == root.alert_id
        elif not unavailable and current is not None:
            del view.roots[broker]
            view.root_book.update(alerts, BROKER_UNAVAILABLE, broker_subject(cluster, broker), False,
                                  ts, (cluster, None, None, broker), "")

    # -- time without events ------------------------------------------------------------------
    def advance(self, cfg: MonitorConfig, alerts: list, watermark_ms: int | None = None) -> None:
        """Move every partition up to its cluster's clock less the allowed lateness, and check
        each owned cluster for silence against the newest event time seen anywhere."""
        if watermark_ms is not None and watermark_ms > self.global_ms:
            self.global_ms = watermark_ms
        idle: list = []
        for key, watch in self.partitions.items():
            target = self.clusters[key[0]].clock_ms - cfg.lateness_ms
            if target >= watch.last_event_ms + cfg.evict_after_ms:
                idle.append(key)
            elif target > watch.time_ms:
                watch.advance_to(target, alerts, cfg, self.clusters[key[0]].roots)
        for key in idle:
            watch = self.partitions[key]
            at = watch.last_event_ms + cfg.evict_after_ms
            watch.advance_to(at, alerts, cfg, self.clusters[key[0]].roots)
            self._evict(key, at, alerts,
                        f"{watch.name} is no longer reported: no event since "
                        f"{fmt_clock(watch.last_event_ms)} (stream.evict_after_ms "
                        f"{cfg.evict_after_ms / 1000:g} s): no longer monitored")
        for cluster, view in self.clusters.items():
            if not self._owns(cluster):
                continue
            silent_at = view.clock_ms + cfg.telemetry_gap_ms + 1
            view.book.update(alerts, "TelemetryMissing", cluster, self.global_ms >= silent_at,
                             silent_at, (cluster, None, None, None),
                             f"no events from cluster {cluster} since {fmt_clock(view.clock_ms)} "
                             f"(more than {cfg.telemetry_gap_ms / 1000:g} s)")

    def _evict(self, key: tuple, at_ms: int, alerts: list, reason: str) -> None:
        """Drop a partition from the state (bounded state: a deleted topic does not stay
        forever): its open alerts resolve at `at_ms` with `reason`."""
        watch = self.partitions.pop(key)
        watch.book.resolve_all(alerts, at_ms, reason)

    def next_timeout_ms(self, cfg: MonitorConfig) -> int | None:
        """Event time at which this bucket has something to say even if no event arrives."""
        owned = [v.clock_ms + cfg.telemetry_gap_ms + 1 for c, v in self.clusters.items()
                 if self._owns(c) and not v.book.open]
        return min(owned) if owned else None

    # -- status -------------------------------------------------------------------------------
    def statuses(self, cfg: MonitorConfig, partitions: list, replicas: list,
                 force: bool = False) -> None:
        """Append the status of each partition that changed, at most once per status interval
        unless something significant (ISR, alerts, metadata) changed."""
        for watch in self.partitions.values():
            if not watch.dirty:
                continue
            if not (force or watch.significant
                    or watch.time_ms - watch.last_status_ms >= cfg.status_interval_ms):
                continue
            partitions.append(watch.partition_status())
            replicas.extend(watch.replica_statuses(cfg))
            watch.dirty = watch.significant = False
            watch.last_status_ms = watch.time_ms


def _overrides(ev) -> tuple:
    return ev[LAG_MAX], ev[MIN_ISR]


def _quarantine(ev, reason: str) -> dict:
    """A quarantine record. Valid events do not carry their raw text into the stateful step
    (it would double what crosses into Python), so it is rebuilt from the parsed fields."""
    raw = ev[RAW]
    if raw is None:
        raw = json.dumps({k: v for k, v in zip(EVENT_FIELDS, ev) if v is not None and k != "raw"},
                         separators=(",", ":"))
    return {"raw": raw, "reason": reason, "stage": "state", "cluster": ev[CLUSTER],
            "ts": ev[TS]}
