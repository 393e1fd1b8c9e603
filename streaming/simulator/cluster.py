"""The simulated cluster's specification and its per-partition state (pure data, no clock).

`ClusterSpec`/`TopicSpec` say what to simulate; `PartitionSim` holds what every replica of one
partition has in its log (LEO, the epoch of its last record, its HW) and what its fetcher is doing.
The leader's own view of its followers lives in the rules engine (`truth.PartitionTruth`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .faults import Fault
from .truth import PartitionTruth


@dataclass(frozen=True, kw_only=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int = 3
    produce_rate: float = 500.0  # messages/s per partition
    batch_interval_ms: int = 100  # one produce batch, hence one append event, per interval (±20 %)


@dataclass(frozen=True, kw_only=True)
class ClusterSpec:
    name: str
    topics: tuple[TopicSpec, ...]
    duration_ms: int
    brokers: tuple[int, ...] = (1, 2, 3)  # brokers the topics are assigned over at the start
    spare_brokers: tuple[int, ...] = ()  # registered but empty (targets of reassignments)
    faults: tuple[Fault, ...] = ()
    replica_lag_time_max_ms: int = 10000  # L
    min_insync_replicas: int = 2
    replica_fetch_wait_max_ms: int = 500  # how long a caught-up follower's fetch is parked
    broker_session_timeout_ms: int = 9000  # a silent broker is fenced after this
    fetch_max_records: int = 5000  # per partition per fetch (replica.fetch.max.bytes / record size)
    follower_throughput: float = 50000.0  # messages/s a healthy follower appends
    rtt_ms: tuple[int, int] = (1, 5)  # response + next request, uniform
    metadata_delay_ms: tuple[int, int] = (20, 200)  # controller decision to the cluster reporting it
    heartbeat_interval_ms: int = 1000
    producer_acks_all: bool = True  # appends fail (NotEnoughReplicas) while under min ISR
    rule_set: str = "current"  # out-of-sync rule of the leaders (state.legacy: e.g. "v0_8")

    def __post_init__(self) -> None:
        if self.replica_fetch_wait_max_ms > self.replica_lag_time_max_ms:
            raise ValueError(
                "replica_fetch_wait_max_ms must be <= replica_lag_time_max_ms (as KafkaConfig requires)"
            )
        for topic in self.topics:
            if topic.replication_factor > len(self.brokers):
                raise ValueError(
                    f"topic {topic.name}: replication factor {topic.replication_factor} "
                    f"exceeds the {len(self.brokers)} brokers"
                )


def assignment(
    topic_index: int, partition: int, brokers: tuple[int, ...], replication_factor: int
) -> tuple[int, ...]:
    """Round-robin replica placement; the first replica is the preferred (and initial) leader."""
    first = (topic_index + partition) % len(brokers)
    return tuple(brokers[(first + i) % len(brokers)] for i in range(replication_factor))


@dataclass(slots=True)
class Fetcher:
    """One follower's fetcher for one partition. `gen` invalidates scheduled steps when it restarts."""

    gen: int = 0
    running: bool = False
    paused: bool = False
    throughput: float | None = None  # messages/s while throttled (slow or bootstrapping); None: healthy


@dataclass(slots=True)
class PartitionSim:
    topic: TopicSpec
    partition: int
    replicas: tuple[int, ...]
    leader: int
    truth: PartitionTruth
    leader_epoch: int = 0
    adding: tuple[int, ...] = ()
    leo: dict[int, int] = field(default_factory=dict)  # each replica's log end offset
    last_epoch: dict[int, int] = field(default_factory=dict)  # epoch of each replica's last record (-1: none)
    follower_hw: dict[int, int] = field(default_factory=dict)  # each replica's HW (min(response HW, own LEO))
    epoch_cache: list[tuple[int, int]] = field(default_factory=list)  # current leader's (epoch, start offset)
    fetchers: dict[int, Fetcher] = field(default_factory=dict)
    parked: dict[int, tuple[int, int, int]] = field(
        default_factory=dict
    )  # replica -> (gen, fetch offset, request)
    reassignment: tuple[int, int | None] | None = None  # (adding, removing) while one runs
    metadata_ms: int = 0  # time of the last metadata emission scheduled (keeps them in order)

    @property
    def name(self) -> str:
        return self.topic.name

    def add_replica_log(self, replica: int, leo: int = 0) -> None:
        self.leo[replica] = leo
        self.last_epoch[replica] = -1 if leo == 0 else self.epoch_at(leo - 1)
        self.follower_hw[replica] = 0
        self.fetchers.setdefault(replica, Fetcher())

    def epoch_at(self, offset: int) -> int:
        """The leader epoch of the record at `offset` in the leader's log."""
        epoch = -1
        for e, start in self.epoch_cache:
            if start > offset:
                break
            epoch = e
        return epoch

    def end_offset_for(self, epoch: int) -> int:
        """Kafka's lastOffsetForLeaderEpoch: where `epoch` ends in the leader's log."""
        for e, start in self.epoch_cache:
            if e > epoch:
                return start
        return self.leo[self.leader]

    def start_epoch(self, epoch: int) -> None:
        """The leader (already set) starts `epoch` at its LEO; records it alone had are not in the cache."""
        start = self.leo[self.leader]
        self.epoch_cache = [(e, s) for e, s in self.epoch_cache if s < start] + [(epoch, start)]
        self.leader_epoch = epoch

    def receive(self, replica: int, records: int, response_hw: int) -> None:
        """The follower appends `records` and takes the response HW (docs/kafka-rules.md §5.2)."""
        if records:
            self.leo[replica] += records
            self.last_epoch[replica] = self.epoch_at(self.leo[replica] - 1)
        self.follower_hw[replica] = min(response_hw, self.leo[replica])

    def truncate(self, replica: int, offset: int) -> None:
        """Truncate-on-fetch after a diverging-epoch answer (docs/kafka-rules.md §6.3)."""
        self.leo[replica] = offset
        self.last_epoch[replica] = self.epoch_at(offset - 1) if offset else -1
        self.follower_hw[replica] = min(self.follower_hw[replica], offset)
