"""Named scenarios: a cluster, its load and its scheduled faults. Times are ms after the start.

`get(name)` returns the `ClusterSpec`; `scale.scale(partitions=N, seconds=S)` is the benchmark
generator (steady state, no truth engine, hundreds of thousands of events per second).
"""

from __future__ import annotations

from collections.abc import Callable

from .cluster import ClusterSpec, TopicSpec
from .faults import BootstrapReplica, BrokerCrash, BurstyProducer, PausedFollower, SlowFollower

CLUSTER = "sim"


def demo() -> ClusterSpec:
    """3 brokers (plus an empty 4th), 2 topics x 4 partitions, RF 3, L = 10 s, ~3 minutes, every fault once.

    Assignment is round robin, so orders-p leads on broker (p % 3) + 1 and payments-p on ((p + 1) % 3) + 1.
    """
    return ClusterSpec(
        name=CLUSTER,
        topics=(
            TopicSpec(name="orders", partitions=4, produce_rate=500.0),
            TopicSpec(name="payments", partitions=4, produce_rate=300.0),
        ),
        duration_ms=180_000,
        brokers=(1, 2, 3),
        spare_brokers=(4,),
        faults=(
            # orders-0 (leader 1): broker 2's fetcher stalls for 20 s > 1.5 L: out of sync, removed, rejoins.
            PausedFollower(topic="orders", partition=0, replica=2, start_ms=20_000, duration_ms=20_000),
            # orders-1 (leader 2): broker 3 appends 150 msg/s of the 500 produced for 45 s.
            SlowFollower(
                topic="orders", partition=1, replica=3, start_ms=30_000, duration_ms=45_000, throughput=150.0
            ),
            # payments-1 (leader 3): 40,000-message bursts in 0.5 s (10x 0.8's 4000 limit) every 15 s:
            # no ISR churn.
            BurstyProducer(
                topic="payments",
                partition=1,
                start_ms=10_000,
                duration_ms=80_000,
                every_ms=15_000,
                burst_messages=40_000,
                burst_ms=500,
            ),
            # payments-2 (leader 1, replicas 1,2,3): moved from broker 2 to the empty broker 4, which copies
            # ~18,000 messages at 2,000 msg/s, joins the ISR, then the reassignment completes.
            BootstrapReplica(
                topic="payments", partition=2, replica=4, remove=2, start_ms=60_000, throughput=2_000.0
            ),
            # broker 3 dies at 100 s, is fenced ~9 s later (new leaders for what it led), restarts at 130 s.
            BrokerCrash(broker=3, start_ms=100_000, restart_after_ms=30_000),
        ),
    )


def paused_and_slow() -> ClusterSpec:
    """1 topic x 2 partitions, RF 3, ~90 s: one paused and one slow follower (end-to-end tests)."""
    return ClusterSpec(
        name=CLUSTER,
        topics=(TopicSpec(name="orders", partitions=2, produce_rate=500.0),),
        duration_ms=90_000,
        faults=(
            PausedFollower(topic="orders", partition=0, replica=2, start_ms=20_000, duration_ms=20_000),
            SlowFollower(
                topic="orders", partition=1, replica=3, start_ms=25_000, duration_ms=35_000, throughput=150.0
            ),
        ),
    )


def bursty() -> ClusterSpec:
    """1 topic x 2 partitions, ~90 s, 100,000-message bursts every 7 s on both partitions; no fault.

    A burst lags the followers by tens of thousands of messages (0.8's 4000-message rule would
    have removed them) but for only a second or two: no ISR change at all under the time rule."""
    return ClusterSpec(
        name=CLUSTER,
        topics=(TopicSpec(name="clicks", partitions=2, produce_rate=200.0),),
        duration_ms=90_000,
        faults=tuple(
            BurstyProducer(
                topic="clicks",
                partition=p,
                start_ms=5_000 + 2_500 * p,
                duration_ms=80_000,
                every_ms=7_000,
                burst_messages=100_000,
                burst_ms=1_000,
            )
            for p in range(2)
        ),
    )


def steady() -> ClusterSpec:
    """2 topics x 3 partitions, ~60 s, no faults: every follower stays caught up."""
    return ClusterSpec(
        name=CLUSTER,
        topics=(
            TopicSpec(name="orders", partitions=3),
            TopicSpec(name="payments", partitions=3, produce_rate=200.0),
        ),
        duration_ms=60_000,
    )


SCENARIOS: dict[str, Callable[[], ClusterSpec]] = {
    "demo": demo,
    "paused_and_slow": paused_and_slow,
    "bursty": bursty,
    "steady": steady,
}


def get(name: str) -> ClusterSpec:
    try:
        return SCENARIOS[name]()
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join([*SCENARIOS, 'scale'])}") from None
