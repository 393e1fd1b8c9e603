"""A fast steady-state generator for benchmarks: many partitions, no faults, no truth engine.

Every partition receives one produce batch per 100 ms round; each of its two followers is parked
at the LEO, so the append completes its fetch and its next fetch arrives 1-5 ms later with
`fetch_offset == leader_leo` (the new LEO) and `leader_hw` = the LEO before the append (RULES
§5.2: a follower learns of the HW it moved one fetch later). This is exactly what the event model
produces for a healthy cluster, computed with numpy a round at a time: every follower stays caught
up, so the expected truth is empty. Events are yielded as JSON lines, in ts order.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .model import DEFAULT_START_MS, FIRST_BROKER_EPOCH

ROUND_MS = 100
BROKERS = (1, 2, 3)
REPLICATION_FACTOR = 3
LAG_MAX_MS = 30000
MIN_ISR = 2


def scale(
    partitions: int,
    seconds: int,
    *,
    seed: int = 0,
    start_ms: int = DEFAULT_START_MS,
    cluster: str = "sim",
    topic: str = "bench",
    topics: int = 1,
    produce_rate: float = 500.0,
) -> Iterator[str]:
    """Yield the JSON lines of `partitions` partitions (RF 3 over 3 brokers) for `seconds` of event time.

    With topics > 1 the partitions are spread over topics `<topic>-0` ... About 30 events per
    partition-second (10 appends, 20 fetches) plus a heartbeat per second.
    """
    if partitions < 1 or seconds < 1:
        raise ValueError("scale needs partitions >= 1 and seconds >= 1")
    rng = np.random.default_rng(seed)
    epochs = {b: FIRST_BROKER_EPOCH + 2 * i for i, b in enumerate(BROKERS)}
    replicas = [
        tuple(BROKERS[(p + i) % len(BROKERS)] for i in range(REPLICATION_FACTOR)) for p in range(partitions)
    ]
    per_topic = -(-partitions // topics)
    names = [
        (topic if topics == 1 else f"{topic}-{p // per_topic}", p % per_topic) for p in range(partitions)
    ]
    for b, epoch in epochs.items():
        yield (
            f'{{"type":"broker","ts":{start_ms},"cluster":"{cluster}","broker":{b},"state":"running",'
            f'"broker_epoch":{epoch}}}'
        )
    for (name, number), reps in zip(names, replicas, strict=True):
        isr = ",".join(map(str, sorted(reps)))
        yield (
            f'{{"type":"metadata","ts":{start_ms},"cluster":"{cluster}","topic":"{name}","partition":{number},'
            f'"leader":{reps[0]},"leader_epoch":0,"replicas":[{",".join(map(str, reps))}],"isr":[{isr}],'
            f'"leader_leo":0,"hw":0,"min_insync_replicas":{MIN_ISR},"replica_lag_time_max_ms":{LAG_MAX_MS}}}'
        )

    # Static parts of each line, per partition (append) and per partition x follower (fetch).
    heads = [f'"cluster":"{cluster}","topic":"{name}","partition":{number}' for name, number in names]
    append_static = heads
    fetch_static = [
        f'{heads[p]},"replica":{r},"leader_epoch":0,"broker_epoch":{epochs[r]},"log_start_offset":0'
        for p in range(partitions)
        for r in replicas[p][1:]
    ]
    follower_row = np.repeat(np.arange(partitions), REPLICATION_FACTOR - 1)
    statics = append_static + fetch_static
    row_partition = list(range(partitions)) + follower_row.tolist()  # line index -> its partition
    heartbeat = f'{{"type":"heartbeat","ts":%d,"cluster":"{cluster}"}}'

    phase = rng.integers(0, ROUND_MS - 15, partitions)  # each partition's produce phase in a round
    mean_batch = produce_rate * ROUND_MS / 1000
    leo = np.zeros(partitions, np.int64)
    for k in range(seconds * 1000 // ROUND_MS):
        w = start_ms + k * ROUND_MS
        if k % (1000 // ROUND_MS) == 0:
            yield heartbeat % w
        hw = leo  # the HW before this round's append
        leo = leo + rng.integers(int(mean_batch * 0.5), int(mean_batch * 1.5) + 1, partitions)
        t_append = w + phase + rng.integers(0, 10, partitions)
        t_fetch = t_append[follower_row] + rng.integers(1, 6, follower_row.size)
        ts = np.r_[t_append, t_fetch]
        order = np.argsort(ts, kind="stable").tolist()
        ts_l, leo_l, hw_l = ts.tolist(), leo.tolist(), hw.tolist()
        for i in order:
            if i >= partitions:
                p = row_partition[i]
                yield (
                    f'{{"type":"fetch","ts":{ts_l[i]},{statics[i]},"fetch_offset":{leo_l[p]},'
                    f'"leader_leo":{leo_l[p]},"leader_hw":{hw_l[p]}}}'
                )
            else:
                yield f'{{"type":"append","ts":{ts_l[i]},{statics[i]},"leader_leo":{leo_l[i]}}}'
