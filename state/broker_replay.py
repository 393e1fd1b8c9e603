"""Broker events replayed into each partition at the partition's own time.

Broker events are cluster-wide and may be read (from another partition of the metrics topic)
ahead of a partition's own events. A bucket keeps each cluster's broker events not yet applied
by all of its partitions in the cluster view's `broker_log` (with the broker states and the
roots as of the log's start), and each partition takes them, in order, when its own time
reaches them: that skew cannot move its clock ahead and make its valid events late, nor change
what its alerts say. `BrokerReplay` holds how far each partition has applied its cluster's log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from replmon.state import sessions

if TYPE_CHECKING:
    from replmon.state.alerts import Alerts
    from replmon.state.monitor import MonitorConfig, PartitionWatch
    from replmon.state.partition import PartitionLeader


PartitionKey = tuple[str, str, int]  # (cluster, topic, partition)


class BrokerReplay:
    """How far each partition of a bucket has applied its cluster's broker log."""

    __slots__ = ("pos",)

    def __init__(self) -> None:
        # partition key -> how many entries of its cluster's broker log it has applied (absent: 0)
        self.pos: dict[PartitionKey, int] = {}

    def start(self, key: PartitionKey, leader: PartitionLeader, view: Any, ts: int) -> None:
        """A new partition at `ts`: the broker states as of then, the log entries up to `ts`
        applied."""
        pos = 0
        for b_ts, *_ in view.broker_log:
            if b_ts > ts:
                break
            pos += 1
        apply_brokers(leader, view, pos)
        if pos:
            self.pos[key] = pos

    def applied(self, key: PartitionKey) -> int:
        return self.pos.get(key, 0)

    def forget(self, key: PartitionKey) -> None:
        self.pos.pop(key, None)

    def roots(self, key: PartitionKey, view: Any) -> dict[Any, Any]:
        """The roots (unavailable brokers, stalled fetchers) as the partition sees them."""
        if not (view.broker_log or view.fetcher_roots):
            return view.base_roots  # the common case: no broker event pending, nothing stalled
        roots = view.roots_at(key[0], self.pos.get(key, 0))
        if view.fetcher_roots:  # rare: a stalled fetcher
            roots = {**view.fetcher_roots, **roots}
        return roots

    def apply(
        self,
        key: PartitionKey,
        watch: PartitionWatch,
        view: Any,
        before_ms: int,
        cfg: MonitorConfig,
        alerts: Alerts,
    ) -> None:
        """Apply to one partition, in order, the cluster's broker events with a time before
        `before_ms` that it has not applied yet."""
        log = view.broker_log
        i = self.pos.get(key, 0)
        if i >= len(log) or log[i][0] >= before_ms:
            return
        while i < len(log) and log[i][0] < before_ms:
            b_ts, broker, state, epoch = log[i]
            t = max(b_ts, watch.time_ms)
            sessions.advance_watch(view.sessions, watch, t, alerts, cfg, view.roots_at(key[0], i))
            set_broker(watch.leader, broker, state, epoch)
            watch.evaluate(t, alerts, cfg, view.roots_at(key[0], i + 1), view.sessions)
            i += 1
        self.pos[key] = i

    def trim(self, partitions: dict[PartitionKey, Any], clusters: dict[str, Any]) -> None:
        """Fold into each cluster's broker states the log entries every partition has applied."""
        if not any(view.broker_log for view in clusters.values()):
            return  # nothing to fold (the common case: no broker event pending)
        applied: dict[str, int] = {}
        for key in partitions:
            pos = self.pos.get(key, 0)
            applied[key[0]] = min(applied.get(key[0], pos), pos)
        for cluster, view in clusters.items():
            upto = applied.get(cluster, len(view.broker_log))
            if upto <= 0:
                continue
            view.base_roots = view.roots_at(cluster, upto)
            for _, broker, state, epoch in view.broker_log[:upto]:
                view.brokers[broker] = (state, epoch)
            del view.broker_log[:upto]
            view.roots_cache = []
            for key in [k for k in self.pos if k[0] == cluster]:
                pos = self.pos[key] - upto
                if pos > 0:
                    self.pos[key] = pos
                else:
                    del self.pos[key]


def apply_brokers(leader: PartitionLeader, view: Any, pos: int) -> None:
    """The broker states as of the log's start, then the first `pos` entries of the log."""
    for broker, (state, epoch) in view.brokers.items():
        set_broker(leader, broker, state, epoch)
    for _, broker, state, epoch in view.broker_log[:pos]:
        set_broker(leader, broker, state, epoch)


def set_broker(leader: PartitionLeader, broker: int, state: str, epoch: int | None) -> None:
    leader.set_broker_state(
        broker, fenced=state == "fenced", shutting_down=state == "shutting_down", broker_epoch=epoch
    )
