"""The truth: what each simulated partition leader decided, computed by the rules engine.

The simulated leader of every partition *is* a `state.partition.PartitionLeader`: the model feeds
it every fetch in arrival order and every append, runs `isr_expiration` on Kafka's schedule and
applies the controller's changes. `PartitionTruth` wraps one partition's engine (a new one per
leader, since each leader broker keeps its own `Partition`) and records:

* `isr_change`: every change of the committed ISR or of the leader (time, old, new, reason);
* `out_of_sync`: per follower, each interval in which Kafka's `isCaughtUp` is false. It starts
  at the first ms with `now - lcu > L` while the follower's LEO differs from the leader LEO
  (`lcu + L + 1`, or the time the LEO equality broke, or the time the follower got its state);
  it ends at the event that makes the follower caught up again, or when it stops being a follower;
* `hw`: the leader HW over time, as (ts, hw) change points.

While a partition has no live leader (between a leader's crash and the election) nothing decides
anything, so its truth is frozen.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from replmon.state.partition import FetchOutcome, PartitionConfig, PartitionLeader

Record = dict[str, Any]

# Why an ISR (or leader) changed.
SHRINK = "shrink"  # the leader's isr-expiration removed out-of-sync followers
EXPAND = "expand"  # a follower fetch reached the HW and the leader added it
FENCED = "fenced"  # the controller removed a fenced broker (KRaft handleBrokerFenced)
ELECTION = "election"  # the controller elected a new leader (higher leader epoch)
REASSIGNMENT = "reassignment"  # the controller completed a reassignment


class PartitionTruth:
    """One partition's leader (the engine) and the record of what it decided."""

    def __init__(self, cluster: str, topic: str, partition: int, config: PartitionConfig) -> None:
        self.cluster, self.topic, self.partition = cluster, topic, partition
        self.config = config
        self.engine: PartitionLeader | None = None
        self.frozen = False
        self.records: list[Record] = []
        self._last_ms = 0  # time of the last state change (episodes are exact between changes)
        self._open: dict[int, int] = {}  # replica -> start of its open out-of-sync episode
        self._episodes: list[Record] = []
        self._hw_points: list[list[int]] = []

    @property
    def live(self) -> PartitionLeader:
        """The engine of the current leader; the model asks only after the first election."""
        if self.engine is None:
            raise RuntimeError(f"{self.topic}-{self.partition}: no leader was made yet")
        return self.engine

    # ---- what the model calls ---------------------------------------------------------------------

    def elect(
        self,
        now_ms: int,
        *,
        leader: int,
        leader_epoch: int,
        replicas: Iterable[int],
        isr: Iterable[int],
        leader_leo: int,
        hw: int,
        leader_epoch_start_offset: int | None = None,
        broker_epochs: dict[int, int],
        fenced: Iterable[int] = (),
        adding_replicas: Iterable[int] = (),
        reason: str | None = ELECTION,
    ) -> None:
        """`makeLeader` on a broker that was not leader: a fresh engine (reason None: the initial state)."""
        self._advance(now_ms)
        old = self._snapshot()
        self.engine = PartitionLeader(
            config=self.config,
            now_ms=now_ms,
            leader=leader,
            leader_epoch=leader_epoch,
            replicas=tuple(replicas),
            isr=tuple(isr),
            leader_leo=leader_leo,
            hw=hw,
            leader_epoch_start_offset=leader_epoch_start_offset,
            broker_epochs=dict(broker_epochs),
            fenced=tuple(fenced),
            adding_replicas=tuple(adding_replicas),
        )
        self.frozen = False
        self._after(now_ms, old, reason)

    def leader_lost(self, now_ms: int) -> None:
        """The leader crashed: nobody decides anything for this partition until the next election."""
        self._advance(now_ms)
        self.frozen = True

    def fetch(self, now_ms: int, replica: int, fetch_offset: int, **kwargs: Any) -> FetchOutcome:
        self._advance(now_ms)
        old = self._snapshot()
        outcome = self.live.fetch(now_ms, replica, fetch_offset, **kwargs)
        self._after(now_ms, old, EXPAND)
        return outcome

    def append(self, now_ms: int, leader_leo: int) -> bool:
        self._advance(now_ms)
        moved = self.live.append(now_ms, leader_leo)
        self._after(now_ms, self._snapshot(), None)
        return moved

    def isr_expiration(self, now_ms: int) -> bool:
        """One run of the leader's isr-expiration task; True if it changed the ISR."""
        self._advance(now_ms)
        old = self._snapshot()
        self.live.isr_expiration(now_ms)
        return self._after(now_ms, old, SHRINK)

    def controller_update(self, now_ms: int, reason: str, **kwargs: Any) -> bool:
        """A metadata delta from the controller while the leader stays; True if the ISR changed."""
        self._advance(now_ms)
        old = self._snapshot()
        self.live.controller_update(now_ms, **kwargs)
        return self._after(now_ms, old, reason)

    def set_broker_state(self, replica: int, **kwargs: Any) -> None:
        if self.engine is not None:
            self.engine.set_broker_state(replica, **kwargs)

    def finish(self, end_ms: int) -> list[Record]:
        """Close the books at end_ms: open episodes end null; returns every record of this partition."""
        self._advance(end_ms + 1)
        ids = {"cluster": self.cluster, "topic": self.topic, "partition": self.partition}
        for replica, start in self._open.items():
            self._episodes.append(
                {"kind": "out_of_sync", **ids, "replica": replica, "start_ms": start, "end_ms": None}
            )
        self._open.clear()
        self._episodes.sort(key=lambda e: (e["start_ms"], e["replica"]))
        engine = self.engine
        final = {
            "kind": "partition",
            **ids,
            "ts": end_ms,
            "leader": engine.leader if engine else -1,
            "leader_epoch": engine.leader_epoch if engine else -1,
            "replicas": list(engine.replicas) if engine else [],
            "isr": list(engine.isr) if engine else [],
            "hw": engine.hw if engine else 0,
            "leader_leo": engine.leader_leo if engine else 0,
        }
        return [*self.records, *self._episodes, {"kind": "hw", **ids, "points": self._hw_points}, final]

    # ---- bookkeeping ------------------------------------------------------------------------------

    def _snapshot(self) -> tuple[int, int, tuple[int, ...]]:
        e = self.engine
        return (-1, -1, ()) if e is None else (e.leader, e.leader_epoch, e.isr)

    def _after(self, now_ms: int, old: tuple[int, int, tuple[int, ...]], reason: str | None) -> bool:
        """After a state change at now_ms: record an ISR/leader change, close episodes, note the HW."""
        self._last_ms = now_ms
        e = self.live
        new = self._snapshot()
        changed = new != old and reason is not None
        if changed:
            self.records.append(
                {
                    "kind": "isr_change",
                    "cluster": self.cluster,
                    "topic": self.topic,
                    "partition": self.partition,
                    "ts": now_ms,
                    "old": list(old[2]),
                    "new": list(new[2]),
                    "reason": reason,
                    "leader": e.leader,
                    "leader_epoch": e.leader_epoch,
                    "old_leader": old[0],
                }
            )
        for replica in list(self._open):
            if replica not in e.followers or e.is_caught_up(replica, now_ms):
                self._close(replica, now_ms)
        if not self._hw_points or self._hw_points[-1][1] != e.hw:
            self._hw_points.append([now_ms, e.hw])
        return changed

    def _advance(self, now_ms: int) -> None:
        """Open the episodes that began in [last change, now_ms): the state was constant meanwhile."""
        e = self.engine
        if e is None or self.frozen:
            return
        lag_max = e.config.replica_lag_time_max_ms
        for replica, state in e.followers.items():
            if replica in self._open:
                continue
            start = max(state.last_caught_up_ms + lag_max + 1, self._last_ms)
            if start < now_ms and not e.is_caught_up(replica, start):
                self._open[replica] = start

    def _close(self, replica: int, now_ms: int) -> None:
        self._episodes.append(
            {
                "kind": "out_of_sync",
                "cluster": self.cluster,
                "topic": self.topic,
                "partition": self.partition,
                "replica": replica,
                "start_ms": self._open.pop(replica),
                "end_ms": now_ms,
            }
        )
