"""The stateful adapter keeps the bucket it last wrote, and uses it only for the very blob it
wrote (no Spark: a stand-in for GroupState with the calls the adapter makes)."""

from __future__ import annotations

import gc
import os
import weakref

import pytest

from replmon.state.bucket import Bucket
from replmon.state.codec import TAG_BYTES, StateFormatError, encode
from replmon.streaming import stateful
from replmon.streaming.checkpoint import balanced_keys, buckets_per_task, spark_partition
from replmon.streaming.settings import monitor_config
from tests.streaming.test_adapter_input import _frame

CFG = monitor_config()


class FakeState:
    """The calls the adapter makes on Spark's GroupState."""

    hasTimedOut = False

    def __init__(self, blob: bytes | None = None) -> None:
        self.blob = blob

    def getCurrentWatermarkMs(self) -> int:
        return 0

    def setTimeoutTimestamp(self, ms: int) -> None:
        pass

    @property
    def exists(self) -> bool:
        return self.blob is not None

    @property
    def get(self) -> tuple:
        return (self.blob,)

    def update(self, row: tuple) -> None:
        self.blob = row[0]


def test_the_bucket_written_last_is_reused_for_its_own_blob_only():
    state = FakeState()
    first = stateful.load_bucket(state, CFG, 3, 8)
    first.global_ms = 42
    stateful.save_bucket(state, first, CFG)
    written = state.blob
    assert stateful.load_bucket(state, CFG, 3, 8) is first  # the blob it wrote: reused
    stateful.save_bucket(state, first, CFG)
    # Another blob for the same bucket (a replayed batch hands in the previous version): decoded.
    older = FakeState(written)
    again = stateful.load_bucket(older, CFG, 3, 8)
    assert again is not first and again.global_ms == 42


def test_a_call_that_fails_after_loading_leaves_nothing_to_reuse():
    state = FakeState()
    bucket = stateful.load_bucket(state, CFG, 5, 8)
    stateful.save_bucket(state, bucket, CFG)
    loaded = stateful.load_bucket(state, CFG, 5, 8)
    loaded.global_ms = 99  # changed, then the call fails before save_bucket
    retried = stateful.load_bucket(state, CFG, 5, 8)
    assert retried is not loaded and retried.global_ms == 0


def test_no_state_starts_a_fresh_bucket_and_forgets_a_kept_one():
    state = FakeState()
    stateful.save_bucket(state, Bucket(7, 8), CFG)
    fresh = stateful.load_bucket(FakeState(), CFG, 7, 8)
    assert isinstance(fresh, Bucket) and fresh.partitions == {}
    assert (7, 8, CFG) not in stateful._WRITTEN


def test_a_kept_bucket_is_not_used_for_another_bucket_count_or_other_settings():
    # One worker serves every query of the session: a run restarted on the same checkpoint with
    # another stream.buckets must be refused by the format, not handed the kept object.
    state = FakeState()
    stateful.save_bucket(state, Bucket(0, 2), CFG)
    with pytest.raises(StateFormatError, match=r"stream\.buckets = 2, and this run has stream\.buckets = 3"):
        stateful.load_bucket(state, CFG, 0, 3)
    stateful.save_bucket(state, Bucket(0, 2), CFG)
    other = monitor_config(replica_lag_time_max_ms=5000)
    kept = stateful._WRITTEN[(0, 2, CFG)][1]
    assert stateful.load_bucket(state, other, 0, 2) is not kept


def test_the_engine_makes_no_reference_cycles_so_freezing_what_a_call_keeps_leaks_nothing():
    # stateful.quiet_collector freezes what a call leaves alive, which is only safe if the
    # engine's objects are freed by reference counting: a whole simulated incident (a paused and
    # a slow follower, a bootstrapping replica, a broker crash and election, a bursty producer,
    # alerts firing and resolving, decoded and encoded again midway) leaves no cyclic garbage.
    from replmon.state.codec import decode, encode
    from replmon.streaming.simulator import scenarios
    from replmon.streaming.simulator.model import simulate
    from tests.state.test_monitor_vs_truth import run_monitor

    spec = scenarios.get("demo")
    events, _ = simulate(spec, seed=0)
    gc.collect()
    gc.disable()
    try:
        out = run_monitor(events, spec.replica_lag_time_max_ms)
        assert {a["status"] for a in out.alerts} == {"firing", "resolved"}
        bucket = Bucket(0, 1)
        decode(encode(bucket), bucket_id=0, buckets=1, cfg=CFG)
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_a_call_leaves_the_collector_as_it_found_it_and_its_objects_frozen():
    state = FakeState()
    func = stateful.make_state_func(CFG, 8)
    state.hasTimedOut = False
    state.getCurrentWatermarkMs = lambda: 0
    state.setTimeoutTimestamp = lambda t: None
    frozen = gc.get_freeze_count()
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            assert list(func((1,), iter([]), state)) == []
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
    assert gc.get_freeze_count() > frozen  # what the calls kept is left out of collections


class _Node:
    pass


def test_cyclic_garbage_frozen_while_alive_is_reclaimed_once_the_frozen_objects_grow(monkeypatch):
    # A cycle that other code in the worker still held when a call froze it, dropped afterwards:
    # left out of every collection until the frozen objects have grown by the set factor, then
    # reclaimed by one full pass.
    import weakref

    monkeypatch.setattr(stateful, "FULL_COLLECTION_MIN_OBJECTS", 0)
    monkeypatch.setattr(stateful, "_frozen_after_full", 10**12)  # as if just collected
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    gc.freeze()
    del a, b
    gc.collect()
    assert gone() is not None  # frozen: the collector does not see it
    assert stateful.full_collection_if_grown() is False
    monkeypatch.setattr(stateful, "_frozen_after_full", 0)  # grown since the last pass
    assert stateful.full_collection_if_grown() is True
    assert gone() is None
    # The baseline is the freeze count right after that pass (frozen objects freed since then,
    # by this process's other threads too, can only lower the count: never an exact match).
    assert stateful._frozen_after_full >= gc.get_freeze_count() > 0
    gc.unfreeze()


def _other_worker_writes(state: FakeState, bucket_id: int, buckets: int) -> None:
    """The blob another Python worker writes for this bucket: its own tag."""
    state.update((encode(Bucket(bucket_id, buckets), os.urandom(TAG_BYTES)),))


def test_the_kept_buckets_stay_one_tasks_share_when_spark_swaps_the_tasks_between_workers():
    # 16 buckets keyed as a new checkpoint keys them on 2 shuffle partitions: 8 per task. Each
    # batch this worker runs one task and the other worker the other; they swap every batch.
    # Unbounded, this worker would keep all 16 (and every bucket of every earlier run).
    buckets, partitions = 16, 2
    keys = balanced_keys(buckets, partitions)
    kept = buckets_per_task(keys, partitions)
    assert kept == 8
    tasks = [[b for b in range(buckets) if spark_partition(keys[b], partitions) == p] for p in range(2)]
    states = [FakeState() for _ in range(buckets)]
    stateful._WRITTEN.clear()
    stale = []
    for batch in range(6):
        mine, theirs = tasks[batch % 2], tasks[1 - batch % 2]
        for b in mine:
            bucket = stateful.load_bucket(states[b], CFG, b, buckets)
            stateful.save_bucket(states[b], bucket, CFG, kept)
        for b in theirs:
            _other_worker_writes(states[b], b, buckets)
        assert sorted(k[0] for k in stateful._WRITTEN) == mine
        stale += [weakref.ref(stateful._WRITTEN[(b, buckets, CFG)][1]) for b in mine]
    # the copies dropped are freed: only the last batch's 8 buckets are alive
    assert sum(ref() is not None for ref in stale) == kept


def test_a_worker_that_keeps_its_task_reuses_every_bucket_of_it():
    # The bound is a whole task's share, so a worker that runs the same task every batch never
    # drops a bucket it is about to load (a smaller bound would drop each just before its turn).
    keys = list(range(16))  # key = bucket id, as a checkpoint written before keys were recorded
    kept = buckets_per_task(keys, 2)
    assert kept == 9  # 0..15 land 7 and 9 on 2 partitions
    mine = [b for b in keys if spark_partition(b, 2) == spark_partition(keys[0], 2)]
    if len(mine) != kept:
        mine = [b for b in keys if b not in mine]
    assert len(mine) == kept
    states = {b: FakeState() for b in mine}
    stateful._WRITTEN.clear()
    written = {}
    for batch in range(3):
        for b in mine:
            bucket = stateful.load_bucket(states[b], CFG, b, 16)
            if batch:
                assert bucket is written[b]
            written[b] = bucket
            stateful.save_bucket(states[b], bucket, CFG, kept)


def test_the_state_function_bounds_the_kept_buckets():
    func = stateful.make_state_func(CFG, 8, kept=2)
    stateful._WRITTEN.clear()
    for b in range(8):
        state = FakeState()
        assert list(func((b,), iter([]), state)) == []
        assert len(stateful._WRITTEN) == min(b + 1, 2)
    assert sorted(k[0] for k in stateful._WRITTEN) == [6, 7]


T0 = 1_767_225_600_000


def _traffic(partitions: int, rounds: int) -> list[list[dict]]:
    """Round 0: every partition's metadata (leader 1, followers 2 and 3); then per round and
    partition an append and a fetch by each follower, one of them 5 offsets behind, and a
    heartbeat: a healthy cluster, so the state neither grows nor shrinks."""
    out, seq = [], 0
    for s in range(rounds + 1):
        t, leo, rows = T0 + s * 500, s * 10, []
        for i in range(partitions):
            key = {"cluster": "c", "topic": "t", "partition": i}
            if s == 0:
                meta = {"leader": 1, "leader_epoch": 1, "replicas": [1, 2, 3], "isr": [1, 2, 3]}
                rows.append({"type": "metadata", "ts": T0, **key, **meta, "leader_leo": 0, "hw": 0})
                continue
            rows += [
                {"type": "append", "ts": t, **key, "leader_leo": leo},
                {"type": "fetch", "ts": t + 1, **key, "replica": 2, "fetch_offset": leo, "leader_leo": leo},
                {
                    "type": "fetch",
                    "ts": t + 2,
                    **key,
                    "replica": 3,
                    "fetch_offset": leo - 5,
                    "leader_leo": leo,
                },
            ]
        if s:
            rows.append({"type": "heartbeat", "ts": t, "cluster": "c"})
        for r in rows:
            r["seq"], seq = seq, seq + 1
        out.append(rows)
    return out


@pytest.mark.parametrize("kept_bucket_reused", [True, False], ids=["reused", "decoded"])
def test_what_the_calls_freeze_does_not_grow_from_call_to_call(kept_bucket_reused, monkeypatch):
    # stateful.quiet_collector freezes what every call leaves alive. That stays bounded only while
    # what a call drops (the previous state's objects, a replaced kept bucket) is freed by reference
    # counting although frozen: a reference cycle made per call would stay frozen, and the count
    # would grow by it every call, until full_collection_if_grown's threshold (100k objects).
    # (no full collection in between: it would reclaim such cycles, and hide them)
    monkeypatch.setattr(stateful, "full_collection_if_grown", lambda: False)
    func = stateful.make_state_func(CFG, 4, kept=1)
    state = FakeState()
    stateful._WRITTEN.clear()
    calls = 0
    traffic = _traffic(100, 30)  # alive to the end: its lists are frozen too
    try:
        for rows in traffic:
            if not kept_bucket_reused:
                stateful._WRITTEN.clear()  # as when the other worker ran this bucket last
            list(func((0,), iter([_frame(rows)]), state))
            calls += 1
            if calls == 5:
                warm = gc.get_freeze_count()  # counting walks every frozen object: twice only
        # flat (measured: the same count after every call); a cycle of two objects left per call
        # would add 52
        assert gc.get_freeze_count() - warm < calls - 5
    finally:
        gc.unfreeze()
