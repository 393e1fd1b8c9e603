"""Lossless compaction (streaming/collect/compact.py): the rule as a table, and the differential
test: the engine (state.bucket.Bucket, fed as the streaming adapter feeds it) on the same events
compacted and uncompacted gives the same alerts and the same replica statuses, except the fields
docs/real-cluster.md lists as approximate; on the simulator's scenarios, on random simulated
clusters with faults, and on a real 3-broker capture with a paused broker."""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
import re
from pathlib import Path

import pytest

from replmon.state.bucket import Bucket
from replmon.state.cluster import ClusterStep, cluster_config
from replmon.streaming.collect.collector import stated_resolution_ms, stated_scheme
from replmon.streaming.collect.compact import Compactor, published, resolution_ms
from replmon.streaming.collect.reorder import ReorderBuffer
from replmon.streaming.settings import monitor_config
from replmon.streaming.simulator import scenarios
from replmon.streaming.simulator.cluster import ClusterSpec, TopicSpec
from replmon.streaming.simulator.faults import BrokerCrash, BurstyProducer, PausedFollower, SlowFollower
from replmon.streaming.simulator.model import simulate
from tests.collect.reference_compact import ReferenceCompactor, judged, superseded
from tests.state.test_monitor_vs_truth import TYPE_RANK, as_tuple
from tests.state.test_status_points import per_second

DATA = Path(__file__).parent / "data"
# docs/real-cluster.md "Compaction": what may differ. The leader LEO the monitor knows between
# sent events is up to one resolution old, and so is every figure computed from it.
APPROXIMATE_STATUS = ("leader_leo", "lag_messages", "holds_hw")
# The HW's moves within a run are seen up to a resolution (plus one fetch) late or early: when a
# HighWatermarkStalled starts and ends (and so its id), and the HW and holders its texts name.
APPROXIMATE_TIMES = ("HighWatermarkStalled",)
# The cluster step paces an outage's count updates (`updated` records, at most one a second) by
# the buckets' clocks, which move with the events: their times and the counts between differ;
# the firing and resolving records (with the final counts) do not.
APPROXIMATE_RECORDS = ("updated",)
MESSAGES_BEHIND = re.compile(r"\d+ messages behind|leader LEO is \d+")


# ---- the collector's release, and the engine ----------------------------------------------------


def collect(events: list[dict], compactor: Compactor | None) -> list[dict]:
    """What replmon collect sends, at its default hold and step (collect/cli.py)."""
    return published(events, compactor, hold_ms=1500, step_ms=200)


def fold(events: list[dict], lag_ms: int, slice_ms: int = 1000, **changes) -> tuple[list, list, list]:
    """Alerts, final replica statuses and quarantine of one Bucket fed in micro-batches of
    `slice_ms` of event time (as tests/state/test_monitor_vs_truth.py run_monitor does), its
    alerts and broker activity through the cluster step after each (as the bridge runs it:
    BrokerUnavailable, claims, grouping, notify). `changes`: engine settings (monitor_config)."""
    cfg = monitor_config(replica_lag_time_max_ms=lag_ms, **changes)
    bucket, step, alerts, quarantine = Bucket(0, 1), ClusterStep(cluster_config(cfg)), [], []

    def batch(chunk: list) -> None:
        got: list = []
        bucket.process(chunk, cfg, got, quarantine)
        bucket.advance(cfg, got)
        alerts.extend(step.step(got, bucket.activity_reports()))

    chunk: list = []
    end = None
    for e in sorted(events, key=lambda e: (e["ts"], TYPE_RANK[e["type"]])):
        if end is not None and e["ts"] >= end:
            batch(chunk)
            chunk = []
        if end is None or e["ts"] >= end:
            end = (e["ts"] // slice_ms + 1) * slice_ms
        chunk.append(as_tuple(e))
    batch(chunk)
    alerts.extend(step.step([], [], flush=True))
    for watch in bucket.partitions.values():
        watch.dirty = True
    rows: list = []
    bucket.statuses(cfg, [], rows, force=True)
    return alerts, rows, quarantine


def as_collected(compactor: Compactor) -> dict:
    """What `replmon collect` with this compactor states on its heartbeats."""
    return {"stated": stated_resolution_ms(compactor, None), "scheme": stated_scheme(compactor)}


def differences(
    events: list[dict],
    lag_ms: int,
    compactor: Compactor,
    stated: int | None = None,
    scheme: str = "fixed",
    **changes,
) -> list[str]:
    """What the engine decides differently on the compacted events, beyond the approximate fields.
    `stated`, `scheme`: the resolution and scheme the compacted events' heartbeats state, as
    `replmon collect`'s do (`as_collected`)."""
    full = fold(collect(events, None), lag_ms, **changes)
    compacted = collect(events, compactor)
    if stated is not None:
        said = {"compaction_resolution_ms": stated, "compaction_scheme": scheme}
        compacted = [{**e, **said} if e["type"] == "heartbeat" else e for e in compacted]
    compacted = fold(compacted, lag_ms, **changes)

    def alert_rows(alerts):
        rows = [
            {**a, "reason": MESSAGES_BEHIND.sub("N", a.get("reason") or "")}
            for a in alerts
            if a["name"] not in APPROXIMATE_TIMES and a["status"] not in APPROXIMATE_RECORDS
        ]
        return sorted(json.dumps(a, sort_keys=True, default=str) for a in rows)

    def timed(alerts):
        """(name, subject, status, cause) -> the times, of the alerts whose times are approximate."""
        out: dict = {}
        for a in alerts:
            if a["name"] in APPROXIMATE_TIMES:
                out.setdefault((a["name"], a["subject"], a["status"], a.get("cause")), []).append(a["ts"])
        return out

    def status_rows(rows):
        return sorted(
            json.dumps({k: v for k, v in r.items() if k not in APPROXIMATE_STATUS}, sort_keys=True)
            for r in rows
        )

    out = []
    for what, a, b in (
        ("alert", alert_rows(full[0]), alert_rows(compacted[0])),
        ("status", status_rows(full[1]), status_rows(compacted[1])),
        ("quarantine", sorted(q["reason"] for q in full[2]), sorted(q["reason"] for q in compacted[2])),
    ):
        out += [f"{what} only uncompacted: {x}" for x in sorted(set(a) - set(b))]
        out += [f"{what} only compacted: {x}" for x in sorted(set(b) - set(a))]
        if not set(a) ^ set(b) and len(a) != len(b):
            out.append(f"{what}: {len(a)} uncompacted, {len(b)} compacted")
    ta_, tb_ = timed(full[0]), timed(compacted[0])
    tolerance = 2 * resolution_ms(lag_ms, compactor.requested_ms)
    for key in sorted(set(ta_) | set(tb_)):
        ta, tb = sorted(ta_.get(key, [])), sorted(tb_.get(key, []))
        if len(ta) != len(tb) or any(abs(x - y) > tolerance for x, y in zip(ta, tb, strict=True)):
            out.append(f"alert times {key}: {ta} uncompacted, {tb} compacted")
    return out


def random_cluster(seed: int) -> ClusterSpec:
    """A small RF 3 cluster with random load, L and faults."""
    rng = random.Random(seed)
    lag_ms = rng.choice((6000, 10000, 15000))
    topics = tuple(
        TopicSpec(
            name=f"t{i}", partitions=rng.randint(1, 3), produce_rate=rng.choice((0.0, 20.0, 300.0, 1500.0))
        )
        for i in range(rng.randint(1, 2))
    )
    duration = 75_000
    faults: list = []
    for _ in range(rng.randint(1, 3)):
        t = rng.choice(topics)
        p, r = rng.randrange(t.partitions), rng.choice((1, 2, 3))
        start = rng.randrange(5_000, 45_000)
        kind = rng.choice(("pause", "slow", "burst", "crash"))
        if kind == "pause":
            faults.append(
                PausedFollower(
                    topic=t.name,
                    partition=p,
                    replica=r,
                    start_ms=start,
                    duration_ms=rng.choice((2_000, lag_ms // 2, 2 * lag_ms)),
                )
            )
        elif kind == "slow":
            faults.append(
                SlowFollower(
                    topic=t.name,
                    partition=p,
                    replica=r,
                    start_ms=start,
                    duration_ms=20_000,
                    throughput=0.3 * max(t.produce_rate, 1.0),
                )
            )
        elif kind == "burst":
            faults.append(
                BurstyProducer(
                    topic=t.name,
                    partition=p,
                    start_ms=start,
                    duration_ms=30_000,
                    every_ms=9_000,
                    burst_messages=30_000,
                    burst_ms=500,
                )
            )
        elif not any(isinstance(f, BrokerCrash) for f in faults):
            faults.append(BrokerCrash(broker=r, start_ms=start, restart_after_ms=rng.choice((None, 20_000))))
    return ClusterSpec(
        name="sim", topics=topics, duration_ms=duration, faults=tuple(faults), replica_lag_time_max_ms=lag_ms
    )


# ---- the rule -----------------------------------------------------------------------------------


def fetch(ts, replica, offset, leo=None, **extra) -> dict:
    ev = {"type": "fetch", "ts": ts, "cluster": "c", "topic": "t", "partition": 0, "replica": replica}
    return {
        **ev,
        "fetch_offset": offset,
        "leader_leo": offset if leo is None else leo,
        "leader_epoch": 1,
        **extra,
    }


def append(ts, leo) -> dict:
    return {"type": "append", "ts": ts, "cluster": "c", "topic": "t", "partition": 0, "leader_leo": leo}


METADATA = {
    "type": "metadata", "ts": 0, "cluster": "c", "topic": "t", "partition": 0, "leader": 1,
    "leader_epoch": 1, "replicas": [1, 2, 3], "isr": [1, 2, 3], "replica_lag_time_max_ms": 8000,
}  # fmt: skip


@pytest.mark.parametrize(
    ("case", "released", "held", "sent"),
    [
        # 1. A caught-up fetch 300 ms after one sent, a later caught-up one held: it only repeats.
        ("caught-up run", [fetch(1000, 2, 10)], [fetch(1300, 2, 10)], []),
        # 2. Nothing of the replica held after it: it may be the last before the follower goes
        #    silent, and lcu must stay exact.
        ("last of a run", [fetch(1000, 2, 10)], [fetch(1300, 3, 10)], [0]),
        # 3. The next one is behind and gets no credit (below the LEO at this one): lcu stays at
        #    this one's time, so it must be seen.
        ("before behind", [fetch(1000, 2, 10)], [append(1100, 20), fetch(1300, 2, 10, leo=20)], [0]),
        # 4. A behind fetch that gets the previous-fetch credit, then two more: the second
        #    restores lcu (at the first's time) whether this one was seen or not.
        (
            "credited run",
            [fetch(1000, 2, 10, leo=20)],
            [append(1050, 30), fetch(1100, 2, 20, leo=30), fetch(1200, 2, 30)],
            [],
        ),
        # 5. ... but not with one credited fetch after it: lcu after that one would be older.
        (
            "credited, one after",
            [fetch(1000, 2, 10, leo=20)],
            [append(1050, 30), fetch(1100, 2, 20, leo=30)],
            [0],
        ),
        # 6. The later one carries a new broker epoch (a restarted follower): it does not repeat this.
        ("new epoch", [fetch(1000, 2, 10, broker_epoch=5)], [fetch(1300, 2, 10, broker_epoch=6)], [0]),
        # 7. An error is never a "still caught up".
        ("error", [fetch(1000, 2, 10, error="FENCED_LEADER_EPOCH")], [fetch(1300, 2, 10)], [0]),
        # 8. A metadata event in between (an ISR change) is judged against this fetch's state.
        ("metadata between", [fetch(1000, 2, 10)], [{**METADATA, "ts": 1100}, fetch(1300, 2, 10)], [0]),
        # 9. A fetch of a replica outside the ISR in between may join it against the HW this one moved.
        ("outsider between", [fetch(1000, 2, 10)], [fetch(1100, 4, 10), fetch(1300, 2, 10)], [0]),
        # 10. A broker event in between (a fence) changes ISR eligibility everywhere.
        (
            "broker between",
            [fetch(1000, 2, 10)],
            [
                {"type": "broker", "ts": 1100, "cluster": "c", "broker": 3, "state": "fenced"},
                fetch(1300, 2, 10),
            ],
            [0],
        ),
        # 11. The last sent was a resolution (8000 / 8 = 1000 ms) ago or more: send one.
        ("resolution", [fetch(1900, 2, 10)], [fetch(2100, 2, 10)], [0]),
        # 12. Appends fold the same way: the later one tells a higher LEO.
        ("append run", [append(1000, 20)], [append(1100, 30)], []),
        # 13. A caught-up fetch below this append's LEO before the next append would have been
        #     judged behind with it: keep it.
        ("append then low fetch", [append(1000, 20)], [fetch(1050, 3, 15), append(1100, 30)], [0]),
        # 14. Not in the reported ISR: a rejoining follower is judged on every fetch.
        ("outside the ISR", [fetch(1000, 4, 10)], [fetch(1300, 4, 10)], [0]),
        # 15. A fetch whose own leader_leo says caught up, below an earlier append's LEO: the
        #     engine judges it behind (a deposed leader's appends, seen on a real cluster).
        ("behind what was told", [append(950, 20), fetch(1000, 2, 10)], [fetch(1300, 2, 10)], [0, 1]),
        # 16. Under acks=all a produce is logged when its response goes out, after the followers
        #     fetched it: an append telling an older LEO (11) between this fetch, which told 12,
        #     and the next fetch, which tells 12 again. Every fetch is judged against 12 either
        #     way (seen on a real cluster at 100 produce requests a second: compaction kept 18
        #     fetches per follower-second instead of about one).
        (
            "acks=all append between",
            [fetch(1000, 2, 12)],
            [append(1005, 11), fetch(1010, 3, 12), fetch(1300, 2, 12)],
            [],
        ),
        # 17. ... but a fetch read before 12 is told again would be judged against 11 without
        #     this one: replica 3 at 11 caught up, where with it it is not.
        (
            "LEO not told again",
            [fetch(1000, 2, 12)],
            [append(1005, 11), fetch(1010, 3, 11), fetch(1300, 2, 12)],
            [0],
        ),
        # 18. An append of a LEO already told (10, at 900): under acks=all the produce is logged
        #     after the followers fetched it. It changes nothing the engine knows.
        ("acks=all append", [append(1000, 9)], [], []),
        # 19. An append whose LEO the next fetch tells again: every fetch is judged against 20
        #     either way, and the LEO reaches the monitor with the fetch.
        ("append then fetch at its LEO", [append(1000, 20)], [fetch(1050, 2, 20)], []),
    ],
)
def test_what_is_dropped(case, released, held, sent):
    c = Compactor()
    # What went out before, at 900: metadata, and one of each kind (the run has started).
    c.release([METADATA, append(900, 10), fetch(900, 2, 10), fetch(900, 4, 10)], [])
    out = c.release(released, held)
    assert out == [released[i] for i in sent], case


def test_the_resolution_is_at_most_a_quarter_of_l():
    assert resolution_ms(10_000) == 1000  # L/8 = 1250, capped at 1 s
    assert resolution_ms(4_000) == 500  # L/8
    # above L = 10 s, L/10 up to 3 s: 3 s at Kafka's default L of 30 s
    assert [resolution_ms(lag) for lag in (12_000, 20_000, 30_000, 60_000)] == [1200, 2000, 3000, 3000]
    assert resolution_ms(10_000, requested_ms=5_000) == 2500  # L/4
    assert resolution_ms(10_000, requested_ms=200) == 200


def test_the_reference_superseded_looks_past_the_released_events():
    seq = [fetch(1000, 2, 10), fetch(1100, 2, 10), fetch(1200, 2, 10)]
    isr = {("c", "t", 0): frozenset({1, 2, 3})}
    # the last one has no successor
    status, told_at = judged(seq, {}, {}, lambda pk: 1000)
    assert superseded(seq, 3, status, told_at, isr) == {0, 1}


# ---- the indexed Compactor decides as the reference ---------------------------------------------


def random_trace(seed: int) -> list[tuple[int, dict]]:
    """(arrival time, event) of a random two-partition trace: caught-up runs, credited and
    behind fetches, errors, divergences, epoch changes, ISR and L changes, fences; events
    arrive out of order (up to 700 ms late, some after the watermark passed them)."""
    rng = random.Random(seed)
    leo = {0: 100, 1: 100}
    offset: dict = {}
    out: list = [(0, {**METADATA, "partition": p, "replica_lag_time_max_ms": 4000}) for p in (0, 1)]
    chaos = rng.choice((0.2, 1.0))  # mostly steady runs, or not
    for ts in sorted(rng.randrange(1, 30_000) for _ in range(rng.randint(50, 1500))):
        p = rng.choice((0, 1))
        base = {"ts": ts, "cluster": "c", "topic": "t", "partition": p}
        roll = rng.random() / chaos
        if roll < 0.03:
            ev = {
                **base, "type": "metadata", "leader": 1, "leader_epoch": rng.choice((1, 2)),
                "replicas": [1, 2, 3, 4], "isr": sorted(rng.sample((1, 2, 3, 4), rng.randint(1, 4))),
            }  # fmt: skip
            if rng.random() < 0.5:
                ev["replica_lag_time_max_ms"] = rng.choice((1600, 4000, 8000))
        elif roll < 0.04:
            ev = {
                "type": "broker",
                "ts": ts,
                "cluster": "c",
                "broker": rng.choice((1, 2, 3)),
                "state": "fenced",
            }
        elif roll < 0.3:
            leo[p] += rng.choice((0, 1, 5, 50)) if rng.random() < 0.95 else -rng.randint(1, 20)
            ev = {**base, "type": "append", "leader_leo": leo[p]}
        else:
            r = rng.choice((2, 2, 3, 3, 4))
            at = offset.get((p, r), leo[p])
            at = rng.choice((leo[p],) * 6 + (at, max(0, leo[p] - rng.randint(1, 30))))
            ev = {
                **base, "type": "fetch", "replica": r, "fetch_offset": at,
                "leader_leo": rng.choice((leo[p], leo[p], at, max(at, leo[p] - 3))),
                "leader_epoch": 1 if rng.random() < 0.95 else 2,
            }  # fmt: skip
            if rng.random() < 0.05 * chaos:
                ev["broker_epoch"] = rng.choice((5, 6))
            if rng.random() < 0.03 * chaos:
                ev["error"] = "FENCED_LEADER_EPOCH"
            elif rng.random() < 0.02 * chaos:
                ev["diverging_epoch"] = 1
            offset[(p, r)] = at
        late = rng.randrange(0, 700) if rng.random() < 0.9 else rng.randrange(0, 4000)
        out.append((ts + late, ev))
    return sorted(out, key=lambda a: a[0])


def release_both(trace: list[tuple[int, dict]], seed: int) -> tuple[list, list, list]:
    """Each compactor's output, step by step, fed one reorder buffer as the collector feeds
    it: the reference (held as a list), the indexed one on the buffer and on the list."""
    rng = random.Random(seed)
    hold_ms = rng.choice((300, 1500))
    buffer = ReorderBuffer(hold_ms, 10**6, indexed=True)
    lag_ms = rng.choice((1600, 8000, 30_000))
    requested = rng.choice((None, None, 200, 1000))
    ref, indexed, listed = (
        ReferenceCompactor(lag_ms, requested),
        Compactor(lag_ms, requested),
        Compactor(lag_ms, requested),
    )
    outs: tuple[list, list, list] = ([], [], [])
    now, i = 0, 0
    while i < len(trace) or len(buffer):
        now += rng.choice((50, 200, 200, 1000))
        while i < len(trace) and trace[i][0] <= now:
            buffer.add(trace[i][1])
            i += 1
        released = buffer.release(now)
        outs[0].append(ref.release(released, buffer.held()))
        outs[1].append(indexed.release(released, buffer))
        outs[2].append(listed.release(released, buffer.held()))
    assert ref.dropped == indexed.dropped == listed.dropped
    return outs


@pytest.mark.parametrize("seed", range(40))
def test_the_indexed_compactor_decides_as_the_reference_on_random_traces(seed):
    ref, indexed, listed = release_both(random_trace(seed), seed)
    assert indexed == ref
    assert listed == ref


def test_the_random_traces_exercise_the_rule():
    """The equivalence above means something: the traces drop many events and keep many."""
    dropped = kept = 0
    for seed in range(40):
        ref, _, _ = release_both(random_trace(seed), seed)
        sent = sum(len(step) for step in ref)
        dropped += len(random_trace(seed)) - sent
        kept += sent
    assert dropped > 2000 and kept > 2000, (dropped, kept)


@pytest.mark.parametrize("seed", range(3))
def test_the_indexed_compactor_decides_as_the_reference_on_simulated_clusters(seed):
    spec = random_cluster(seed)
    events, _ = simulate(spec, seed=seed)
    lag_ms = spec.replica_lag_time_max_ms
    assert collect(events, Compactor(lag_ms)) == published(events, ReferenceCompactor(lag_ms), 1500, 200)


# ---- the differential test --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["demo", "paused_and_slow", "bursty", "steady"])
def test_scenarios_decide_the_same_compacted(name):
    spec = scenarios.get(name)
    events, _ = simulate(spec, seed=0)
    compactor = Compactor(default_lag_ms=spec.replica_lag_time_max_ms)
    assert differences(events, spec.replica_lag_time_max_ms, compactor, **as_collected(compactor)) == []
    fetches = sum(1 for e in events if e["type"] == "fetch")
    assert compactor.dropped["fetch"] > fetches / 2, "compaction must pay where followers keep up"


@pytest.mark.parametrize("seed", range(8))
def test_random_clusters_decide_the_same_compacted(seed):
    spec = random_cluster(seed)
    events, _ = simulate(spec, seed=seed)
    compactor = Compactor(default_lag_ms=spec.replica_lag_time_max_ms)
    assert differences(events, spec.replica_lag_time_max_ms, compactor, **as_collected(compactor)) == []


def test_a_real_capture_decides_the_same_compacted():
    """Events `replmon collect` made (compaction off) from 3 real Kafka 4.3.1 brokers' request
    logs while broker 3 was paused (SIGSTOP) past L and resumed (docs/real-cluster.md)."""
    with gzip.open(DATA / "capture-pause-3brokers.jsonl.gz", "rt") as f:
        events = [json.loads(line) for line in f]
    lag_ms = next(e["replica_lag_time_max_ms"] for e in events if e.get("replica_lag_time_max_ms"))
    alerts = fold(events, lag_ms)[0]
    assert any(a["name"] == "ReplicaOutOfSync" for a in alerts), "the capture must hold the fault"
    compactor = Compactor(default_lag_ms=lag_ms)
    assert differences(events, lag_ms, compactor, **as_collected(compactor)) == []
    assert compactor.dropped["fetch"] > 0


# ---- a resolution above the cap ----------------------------------------------------------------

IDLE_L_MS = 30_000  # Kafka's default replica.lag.time.max.ms: L/4 is 7.5 s


def idle_cluster() -> ClusterSpec:
    """Three idle partitions on 3 brokers, one follower paused past L, a broker crashed for good."""
    return ClusterSpec(
        name="sim",
        topics=(TopicSpec(name="idle", partitions=3, produce_rate=0.0),),
        duration_ms=120_000,
        replica_lag_time_max_ms=IDLE_L_MS,
        faults=(
            PausedFollower(topic="idle", partition=1, replica=3, start_ms=20_000, duration_ms=40_000),
            BrokerCrash(broker=2, start_ms=80_000, restart_after_ms=None),
        ),
    )


def test_above_the_cap_the_broker_guard_keeps_broker_silence_exact():
    """At L/4 (7.5 s), a caught-up follower of an idle partition sends one fetch per 7.5 s; the
    engine calls a broker silent after alerts.stuck_after_ms (3 s) without a fetch by or to it
    anywhere, so with few partitions per broker the compactor keeps one fetch per broker per
    second (Compactor.broker_every_ms, on by default above the cap)."""
    events, _ = simulate(idle_cluster(), seed=1)
    compactor = Compactor(default_lag_ms=IDLE_L_MS, requested_ms=IDLE_L_MS // 4)
    assert differences(events, IDLE_L_MS, compactor) == []
    fetches = sum(1 for e in events if e["type"] == "fetch")
    assert compactor.dropped["fetch"] > fetches / 2


def test_above_the_cap_without_the_broker_guard_brokers_look_silent():
    events, _ = simulate(idle_cluster(), seed=1)
    compactor = Compactor(default_lag_ms=IDLE_L_MS, requested_ms=IDLE_L_MS // 4, broker_every_ms=10**9)
    found = differences(events, IDLE_L_MS, compactor)
    assert any("BrokerUnavailable" in d and "broker_silent" in d for d in found), found


@pytest.fixture(scope="module")
def demo_with_idle_partitions() -> list[dict]:
    """The demo scenario at Kafka's default L (30 s) with 60 idle partitions beside its faults."""
    base = scenarios.get("demo")
    spec = dataclasses.replace(
        base,
        replica_lag_time_max_ms=IDLE_L_MS,
        topics=(*base.topics, TopicSpec(name="idle", partitions=60, produce_rate=0.0)),
    )
    return simulate(spec, seed=0)[0]


def test_at_a_quarter_of_l_the_engine_counts_silence_past_the_resolution(demo_with_idle_partitions):
    """At L/4 (7.5 s) a busy partition's compacted events are up to 8 s apart: with the
    collector's resolution stated on its heartbeats, the engine's partition silences count from
    stuck_after_ms + 7.5 s + a parked fetch (state/monitor.py quiet_after_ms), and it decides the
    same on compacted and uncompacted events."""
    resolution = IDLE_L_MS // 4
    compactor = Compactor(default_lag_ms=IDLE_L_MS, requested_ms=resolution)
    found = differences(demo_with_idle_partitions, IDLE_L_MS, compactor, stated=resolution)
    assert found == []
    assert compactor.dropped["fetch"] > sum(1 for e in demo_with_idle_partitions if e["type"] == "fetch") / 2


def test_at_a_quarter_of_l_with_no_resolution_stated_or_set_a_leader_looks_silent(demo_with_idle_partitions):
    compactor = Compactor(default_lag_ms=IDLE_L_MS, requested_ms=IDLE_L_MS // 4)
    found = differences(demo_with_idle_partitions, IDLE_L_MS, compactor)
    assert any("IsrExitImminent" in d and "is down: nothing from leader" in d for d in found), found


def test_a_resolve_just_past_group_wait_decides_the_same_compacted():
    """paused_and_slow with 60 idle partitions at L = 30 s, default resolution: a ReplicaOutOfSync
    resolved 0.4 s after group_wait. The cluster step once took a resolve already in hand, from
    after the firing's release, as "over within group_wait", so the notification hung on where
    the batches were cut, and compacted input cuts them elsewhere (state/cluster.py _release)."""
    base = scenarios.get("paused_and_slow")
    spec = dataclasses.replace(
        base,
        replica_lag_time_max_ms=IDLE_L_MS,
        topics=(*base.topics, TopicSpec(name="idle", partitions=60, produce_rate=0.0)),
    )
    events = simulate(spec, seed=0)[0]
    compactor = Compactor(default_lag_ms=IDLE_L_MS)
    assert differences(events, IDLE_L_MS, compactor, **as_collected(compactor)) == []


def test_busy_partitions_that_keep_up_stay_healthy_compacted_to_3_s():
    """Busy partitions, every follower keeping up, compacted to 3 s (`--compact-resolution 3s`):
    each sends its first status and then only series points. Their followers are credited at
    sent fetches only, up to 3 s apart, and the caught-up grace allows for the stated resolution
    as silences do (state/monitor.py caught_up_grace_ms); without it they flipped between
    caught up and slow, a status record each time."""
    spec = ClusterSpec(
        name="sim",
        topics=(
            TopicSpec(name="m", partitions=2, produce_rate=200.0),
            TopicSpec(name="x", partitions=2, produce_rate=1500.0),
        ),
        duration_ms=45_000,
        replica_lag_time_max_ms=IDLE_L_MS,
    )
    events, _ = simulate(spec, seed=1)
    sent = [
        {**e, "compaction_resolution_ms": 3000} if e["type"] == "heartbeat" else e
        for e in collect(events, Compactor(default_lag_ms=IDLE_L_MS, requested_ms=3000))
    ]
    sent.sort(key=lambda e: (e["ts"], TYPE_RANK[e["type"]]))
    cfg = monitor_config(replica_lag_time_max_ms=IDLE_L_MS, status_refresh_ms=3_600_000)
    seconds = (sent[-1]["ts"] - sent[0]["ts"]) // 1000 + 1
    counts = [
        len(statuses) for statuses, _ in per_second([as_tuple(e) for e in sent], cfg, seconds, sent[0]["ts"])
    ]
    assert sum(counts[:5]) == 4 and sum(counts[5:]) == 0, counts


class EveryResolution(Compactor):
    """The rule without its guard: at most one caught-up fetch per resolution, whatever follows."""

    def release(self, released, held):
        out = []
        for ev in released:
            key = (ev.get("topic"), ev.get("partition"), ev.get("replica"))
            if ev["type"] == "fetch" and ev["fetch_offset"] >= ev["leader_leo"] and "error" not in ev:
                last = self._sent.get(key)
                if last is not None and ev["ts"] - last[0] < 1000:
                    continue
                self._sent[key] = (ev["ts"], ())  # type: ignore[assignment]  # a flat map is enough here
            out.append(ev)
        return out


def test_a_compaction_that_loses_the_last_caught_up_fetch_fails_the_differential_test():
    spec = scenarios.get("paused_and_slow")
    events, _ = simulate(spec, seed=0)
    found = differences(events, spec.replica_lag_time_max_ms, EveryResolution())
    assert any(d.startswith("alert only") for d in found), found


# ---- in the collect loop ------------------------------------------------------------------------


def test_the_collect_loop_sends_a_followers_run_once_per_resolution_and_its_last_fetch(tmp_path):
    """Request-log lines through `Collector.step` with a Compactor: a follower parked at the
    leader LEO every 100 ms for 3 s goes out about once a second, and its last fetch goes out."""
    from replmon.streaming.collect.collector import Collector
    from tests.collect.lines import fetch_line
    from tests.collect.test_collector import Clock, NoAdmin, Recorder, write

    t = 1_795_437_650_000
    log = tmp_path / "kafka-request.log"
    # The session opened before the collector ran (warm-up learns it).
    write(log, fetch_line(t, 2, epoch=0, session_id=0, response_session=7, requested=[(0, 10)], responded=[]))

    class Admin(NoAdmin):
        def changes(self, answers, now_ms):
            return [{**METADATA, "ts": now_ms, "topic": "t1", "replica_lag_time_max_ms": 10_000}]

    rec, clock = Recorder(), Clock(t + 100)
    c = Collector(
        "c", {1: str(log)}, Admin(), rec, tmp_path / "state", role="all", hold_ms=1500, heartbeat_ms=10**9,
        metadata_ms=1000, max_held=10**6, compactor=Compactor(), clock=clock,
    )  # fmt: skip
    c.start()
    c.poll_admin()
    reads = []
    for k in range(1, 31):  # parked 90 ms each, read at t + 100 k
        write(log, fetch_line(t + 100 * k + 90, 2, epoch=k, total=90, queue=0, remote=90))
        reads.append(t + 100 * k)
        clock.ms = t + 100 * k + 100
        c.step()
    clock.ms = t + 6000
    c.step()
    sent = [e["ts"] for e in rec.sent if e["type"] == "fetch"]
    assert sent[-1] == reads[-1]  # the last of the run: lcu exact when the follower goes silent
    assert 3 <= len(sent) <= 5, sent  # 3 s at a 1 s resolution (L = 10 s), not 30
    assert c.counts()["compacted fetch events"] == 30 - len(sent)
