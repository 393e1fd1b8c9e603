"""Scheduled faults. Each says *when* (ms after the simulation start) and *what*; the model does it.

A fault installs itself on the simulation through a few operations (`ClusterOps`), so this module
knows nothing of how the model keeps its state. `describe` is the fault's truth record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol


class ClusterOps(Protocol):
    """What a fault may do to the simulated cluster (implemented by `model.Simulation`)."""

    def at_offset(self, offset_ms: int, action: Callable[..., None], *args: Any) -> None: ...
    def pause_fetcher(self, topic: str, partition: int, replica: int) -> None: ...
    def resume_fetcher(self, topic: str, partition: int, replica: int) -> None: ...
    def throttle_fetcher(
        self, topic: str, partition: int, replica: int, throughput: float | None
    ) -> None: ...
    def reassign(
        self, topic: str, partition: int, add: int, remove: int | None, throughput: float
    ) -> None: ...
    def crash_broker(self, broker: int, unreplicated_batch: bool) -> None: ...
    def restart_broker(self, broker: int) -> None: ...
    def burst(self, topic: str, partition: int, messages: int, over_ms: int) -> None: ...


@dataclass(frozen=True, kw_only=True)
class Fault:
    start_ms: int  # ms after the simulation start

    name = "fault"

    def install(self, sim: ClusterOps) -> None:
        raise NotImplementedError

    def end_ms(self) -> int | None:
        return None

    def describe(self, cluster: str, origin_ms: int) -> dict[str, Any]:
        """The truth record: absolute start/end times and the fault's parameters."""
        params = {k: v for k, v in asdict(self).items() if k not in ("start_ms", "duration_ms")}
        end = self.end_ms()
        return {
            "kind": "fault",
            "cluster": cluster,
            "fault": self.name,
            **params,
            "start_ms": origin_ms + self.start_ms,
            "end_ms": None if end is None else origin_ms + end,
        }


@dataclass(frozen=True, kw_only=True)
class PausedFollower(Fault):
    """A follower's fetcher for one partition stalls (GC pause, SIGSTOP of the fetcher thread, a stuck
    disk): no fetches for the window, then it resumes from its LEO. The broker keeps heartbeating the
    controller, so it is not fenced: only the leader's isr-expiration removes it."""

    topic: str
    partition: int
    replica: int
    duration_ms: int
    name = "paused_follower"

    def install(self, sim: ClusterOps) -> None:
        sim.at_offset(self.start_ms, sim.pause_fetcher, self.topic, self.partition, self.replica)
        sim.at_offset(
            self.start_ms + self.duration_ms, sim.resume_fetcher, self.topic, self.partition, self.replica
        )

    def end_ms(self) -> int:
        return self.start_ms + self.duration_ms


@dataclass(frozen=True, kw_only=True)
class SlowFollower(Fault):
    """A follower keeps fetching but appends only `throughput` messages/s (below the produce rate):
    it never reaches the leader LEO, so its lastCaughtUpTime stops moving."""

    topic: str
    partition: int
    replica: int
    duration_ms: int
    throughput: float = 100.0
    name = "slow_follower"

    def install(self, sim: ClusterOps) -> None:
        sim.at_offset(
            self.start_ms, sim.throttle_fetcher, self.topic, self.partition, self.replica, self.throughput
        )
        sim.at_offset(
            self.start_ms + self.duration_ms,
            sim.throttle_fetcher,
            self.topic,
            self.partition,
            self.replica,
            None,
        )

    def end_ms(self) -> int:
        return self.start_ms + self.duration_ms


@dataclass(frozen=True, kw_only=True)
class BootstrapReplica(Fault):
    """A reassignment adds `replica` (an empty log) to the partition, optionally moving it off `remove`.
    The new replica catches up at `throughput` messages/s, joins the ISR once its LEO reaches the HW,
    and then the controller completes the reassignment."""

    topic: str
    partition: int
    replica: int
    remove: int | None = None
    throughput: float = 2000.0
    name = "bootstrap_replica"

    def install(self, sim: ClusterOps) -> None:
        sim.at_offset(
            self.start_ms,
            sim.reassign,
            self.topic,
            self.partition,
            self.replica,
            self.remove,
            self.throughput,
        )


@dataclass(frozen=True, kw_only=True)
class BrokerCrash(Fault):
    """A broker dies: its fetchers stop and the partitions it leads go leaderless. After
    broker.session.timeout.ms the controller fences it, removes it from every ISR and elects new
    leaders. `restart_after_ms` later (if given) it comes back with a new broker epoch, truncates
    what it alone had (a diverging-epoch answer), catches up and rejoins."""

    broker: int
    restart_after_ms: int | None = None
    unreplicated_batch: bool = True  # it dies right after appending a batch no follower has fetched
    name = "broker_crash"

    def install(self, sim: ClusterOps) -> None:
        sim.at_offset(self.start_ms, sim.crash_broker, self.broker, self.unreplicated_batch)
        if self.restart_after_ms is not None:
            sim.at_offset(self.start_ms + self.restart_after_ms, sim.restart_broker, self.broker)

    def end_ms(self) -> int | None:
        return None if self.restart_after_ms is None else self.start_ms + self.restart_after_ms


@dataclass(frozen=True, kw_only=True)
class BurstyProducer(Fault):
    """Every `every_ms` during the window the producer writes `burst_messages` extra messages within
    `burst_ms`. Bursts far above 0.8's replica.lag.max.messages (4000) must cause no ISR churn under
    the time rule: healthy followers fetch them within a second or two."""

    topic: str
    partition: int
    duration_ms: int
    every_ms: int = 15000
    burst_messages: int = 40000
    burst_ms: int = 1000
    name = "bursty_producer"

    def install(self, sim: ClusterOps) -> None:
        for offset in range(self.start_ms, self.start_ms + self.duration_ms, self.every_ms):
            sim.at_offset(offset, sim.burst, self.topic, self.partition, self.burst_messages, self.burst_ms)

    def end_ms(self) -> int:
        return self.start_ms + self.duration_ms
