"""The stateful adapter keeps the bucket it last wrote, and uses it only for the very blob it
wrote (no Spark: a stand-in for GroupState with the calls the adapter makes)."""

from __future__ import annotations

import gc

import pytest

from replmon.state.bucket import Bucket
from replmon.state.codec import StateFormatError
from replmon.streaming import stateful
from replmon.streaming.settings import monitor_config

CFG = monitor_config()


class FakeState:
    def __init__(self, blob: bytes | None = None) -> None:
        self.blob = blob

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
