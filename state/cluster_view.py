"""What a bucket keeps besides its partitions' state: a view of each cluster (state/bucket.py),
and the placeholder of a partition left encoded by a lazy decode (state/codec.py)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from replmon.state import alert_rules
from replmon.state.alerts import AlertBook
from replmon.state.fetcher import FetcherKey, FetcherRoot
from replmon.state.root_cause import BrokerRoot, broker_root
from replmon.state.sessions import SessionTable

if TYPE_CHECKING:
    from replmon.state.monitor import MonitorConfig


def owner_bucket(cluster: str, buckets: int) -> int:
    """The one bucket that raises a cluster's own alerts (all buckets see its clock)."""
    return zlib.crc32(cluster.encode()) % buckets


@dataclass(slots=True)
class ClusterView:
    clock_ms: int = 0
    brokers: dict[int, tuple[str, int | None]] = field(
        default_factory=dict
    )  # id -> (state, broker_epoch), as of the log's start
    book: AlertBook = field(default_factory=AlertBook)  # the cluster's own alerts (owner bucket)
    roots: dict[int, BrokerRoot] = field(default_factory=dict)  # unavailable broker -> BrokerRoot
    root_book: AlertBook = field(default_factory=AlertBook)  # this bucket's share of the root alerts
    fetcher_roots: dict[FetcherKey, FetcherRoot] = field(
        default_factory=dict
    )  # fetcher key -> FetcherRoot (state/fetcher.py)
    # broker -> [start, end] of its current run of activity in this bucket (fetches it makes as
    # follower, events of partitions it leads), runs split where it was quiet for longer than
    # alerts.stuck_after_ms; and the runs this micro-batch closed or extended, for the cluster step
    activity: dict[int, list[int]] = field(default_factory=dict)
    activity_out: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    registered_ms: dict[int, int] = field(default_factory=dict)  # broker -> time of its latest broker event
    # Broker events not yet applied by every partition, (ts, broker, state, broker_epoch) in
    # arrival order, and the roots (unavailable brokers) as of the log's start.
    broker_log: list[tuple[int, int, str, int | None]] = field(default_factory=list)
    base_roots: dict[int, BrokerRoot] = field(default_factory=dict)
    roots_cache: list[dict[int, BrokerRoot]] = field(
        default_factory=list
    )  # derived: roots after each log entry
    sessions: SessionTable = field(default_factory=SessionTable)  # fetch sessions' reads (state/sessions.py)
    # The compaction resolution and scheme the cluster's source states on its heartbeats
    # (docs/events.md); None: it states none, and alerts.compaction_resolution_ms and
    # alerts.compaction_scheme stand for it
    compaction_resolution_ms: int | None = None
    compaction_scheme: str | None = None
    # derived: (the engine's config, that config with the stated resolution and scheme)
    stated_config: tuple[MonitorConfig, MonitorConfig] | tuple[()] = ()

    def config(self, cfg: MonitorConfig) -> MonitorConfig:
        """The engine's config for this cluster's partitions: `cfg`, with the resolution and the
        scheme its source states in place of the configured ones."""
        stated = self.compaction_resolution_ms
        if stated is None:
            return cfg
        scheme = self.compaction_scheme or "fixed"
        if stated == cfg.compaction_resolution_ms and scheme == cfg.compaction_scheme:
            return cfg
        if not self.stated_config or self.stated_config[0] is not cfg:
            self.stated_config = (
                cfg,
                replace(cfg, compaction_resolution_ms=stated, compaction_scheme=scheme),
            )
        return self.stated_config[1]

    def state_resolution(self, stated: int | None, scheme: str | None = None) -> None:
        """A heartbeat: the resolution and scheme its source states, if it states them (a
        resolution without a scheme: "fixed")."""
        if stated is None:
            return
        scheme = scheme or "fixed"
        if stated != self.compaction_resolution_ms or scheme != (self.compaction_scheme or "fixed"):
            self.compaction_resolution_ms = stated
            self.compaction_scheme = scheme
            self.stated_config = ()

    def active(self, broker: int, ts: int, quiet_ms: int) -> None:
        """`broker` did something at `ts` (state/cluster.py merges these runs over buckets)."""
        if broker < 0:
            return
        run = self.activity.get(broker)
        if run is None:
            self.activity[broker] = [ts, ts]
            self.activity_out.setdefault(broker, [])
        elif ts - run[1] > quiet_ms:
            self.activity_out.setdefault(broker, []).append((run[0], run[1]))
            run[0] = run[1] = ts
        elif ts > run[1]:
            run[1] = ts
            if broker not in self.activity_out:
                self.activity_out[broker] = []

    def settled_ms(self, lateness_ms: int) -> int:
        """Event time up to which every partition of the cluster may be moved without its own
        events: the cluster's clock less the allowed lateness."""
        return self.clock_ms - lateness_ms

    def roots_at(self, cluster: str, pos: int) -> dict[int, BrokerRoot]:
        """The unavailable brokers as a partition that has applied the first `pos` entries of
        the broker log sees them."""
        cache = self.roots_cache
        while len(cache) < pos:
            roots = dict(cache[-1] if cache else self.base_roots)
            ts, broker, state, _ = self.broker_log[len(cache)]
            if alert_rules.is_broker_unavailable(state=state):
                if broker not in roots:
                    roots[broker] = broker_root(cluster, broker, state, ts)
            else:
                roots.pop(broker, None)
            cache.append(roots)
        return cache[pos - 1] if pos else self.base_roots


class ColdWatch:
    """A partition whose state was left encoded when its bucket was loaded (state/codec.py's
    lazy decode): what the bucket needs of it to decide whether a micro-batch must load it. Its
    events, a deadline (the isr-expiration tick, an alert timer) or a status falling due, its
    eviction and the rare bucket-wide steps (a broker event, a stalled fetcher) load it
    (`Bucket.warm`); otherwise only its `time_ms` moves (stored apart, so that is no change)."""

    # (leader_id and replicas: the leader's broker id and the assignment, for activity_reports)
    __slots__ = (
        "cluster",
        "deadline_ms",
        "dirty",
        "last_event_ms",
        "last_status_ms",
        "leader_id",
        "partition",
        "replicas",
        "significant",
        "time_ms",
        "topic",
    )
    cluster: str
    topic: str
    partition: int
    time_ms: int
    deadline_ms: int
    last_event_ms: int
    dirty: bool
    significant: bool
    last_status_ms: int
    leader_id: int
    replicas: tuple[int, ...]


def is_cold(watch: object) -> bool:
    """Whether a bucket's partition is still encoded (a ColdWatch)."""
    return watch.__class__ is ColdWatch
