"""The adapter between Spark's grouped state and the engine's `Bucket`. Nothing else.

One group is one bucket of many partitions, so one Python call per bucket per micro-batch
handles thousands of partitions. Columns become plain Python tuples in bulk (numpy, no
per-row pandas access); the bucket is stored in one binary state column in the versioned
state format (state/codec.py), which refuses a checkpoint written with another bucket count.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat

import numpy as np
import pandas as pd

from replmon.state.bucket import Bucket
from replmon.state.codec import TAG_BYTES, Chunks, decode_chunks, encode_chunks, tag_of
from replmon.state.events import ARRAY_FIELDS, EVENT_FIELDS, FIELDS, PARTITION, TIE_RANK, TOPIC
from replmon.state.monitor import MonitorConfig
from replmon.streaming.contract import COLUMN_FIELDS, bounded_quarantine, describe

log = logging.getLogger(__name__)
OUTPUT_SCHEMA = "kind string, payload string"
STATE_SCHEMA = "blob binary"
# The columns of the stateful step's input (parse.monitor_input): the event fields a fetch or an
# append may carry, the rest packed in `extra` (contract.PACKED_FIELDS, with the `size` and
# `sha256` of a record whose bytes could not be read as text); `reason` (parse.contract_reason)
# is null for a valid event, whose `raw` is null too.
INPUT_COLUMNS = [*COLUMN_FIELDS, "raw", "seq", "reason", "extra"]
# json.dumps(r, separators=...) builds an encoder per call: one, made once, is a quarter faster
# (the output of a batch whose partitions all report a status is hundreds of thousands of rows).
_encode = json.JSONEncoder(separators=(",", ":")).encode
# The integer columns (the other columns are strings, and the packed fields come as JSON).
_INTS = tuple(name for name in COLUMN_FIELDS if FIELDS[name].kind == "int")


def _column(pdf: pd.DataFrame, name: str) -> Iterable:
    """A column as Python values, None for null (ints arrive as float with NaN). Most columns
    of a batch are all null (a fetch has no `isr`, an append no `replica`): those cost one
    check and are a `repeat(None)`, which the event tuples are zipped from three times faster
    than from a list of Nones."""
    col = pdf[name]
    n = len(col)
    if name in _INTS:
        values = col.to_numpy()
        if values.dtype.kind == "f":
            mask = np.isnan(values)
            if mask.all():
                return repeat(None, n)
            if not mask.any():
                return values.astype(np.int64).tolist()
            out = np.where(mask, 0, values).astype(np.int64).astype(object)
            out[mask] = None
            return out.tolist()
        return values.astype(np.int64).tolist()
    values = col.to_numpy(dtype=object)
    mask = pd.isna(values)
    if mask.all():
        return repeat(None, n)
    if mask.any():
        values = values.copy()
        values[mask] = None
    return values.tolist()


def _unpack(extra: pd.Series) -> dict[str, list]:
    """The packed fields (contract.PACKED_FIELDS) of every row, from the `extra` column: a list
    per field that any row has (None where a row lacks it), arrays as tuples. Most rows of a
    batch (fetches, appends) have no `extra` at all."""
    values = extra.to_numpy(dtype=object)
    has = pd.notna(values)
    if not has.any():
        return {}
    n = len(values)
    columns: dict[str, list] = {}
    for i, text in zip(np.flatnonzero(has).tolist(), values[has].tolist(), strict=True):
        for name, value in json.loads(text).items():
            column = columns.get(name)
            if column is None:
                column = columns[name] = [None] * n
            column[i] = tuple(value) if name in ARRAY_FIELDS else value  # no nulls: not packed
    return columns


def events_from_frames(
    frames: Iterable[pd.DataFrame], quarantine: list, ignore: Iterable[str] = ()
) -> list[tuple]:
    """All input rows of one call, as EVENT_FIELDS tuples in event-time order. Rows the parser
    found to break the contract (`reason` set; parse.contract_reason) are appended to
    `quarantine` instead, with their raw text and the reason. The fields in `ignore` are taken
    as absent (a what-if replay that replaces the partitions' own overrides)."""
    nonempty = [f for f in frames if len(f)]
    if not nonempty:
        return []
    pdf = nonempty[0] if len(nonempty) == 1 else pd.concat(nonempty, ignore_index=True)
    packed = _unpack(pdf["extra"])
    reasons = pdf["reason"].to_numpy(dtype=object)
    invalid = pd.notna(reasons)
    if invalid.any():
        bad = np.flatnonzero(invalid).tolist()
        rows = pdf.iloc[bad]
        size, digest = packed.get("size"), packed.get("sha256")
        for i, raw, reason, cluster, ts in zip(
            bad,
            rows["raw"].tolist(),
            reasons[invalid].tolist(),
            _column(rows, "cluster"),
            _column(rows, "ts"),
            strict=True,
        ):
            quarantine.append(
                bounded_quarantine(
                    {
                        "raw": raw,
                        "reason": describe(reason, raw),
                        "stage": "parse",
                        "cluster": cluster,
                        "ts": ts,
                        "size": size and size[i],
                        "sha256": digest and digest[i],
                    }
                )
            )
        kept = np.flatnonzero(~invalid).tolist()
        if not kept:
            return []
        pdf = pdf.iloc[kept]
        packed = {name: [column[i] for i in kept] for name, column in packed.items()}
    n = len(pdf)
    # Ties in event time: in the order of state/events.TYPES (a broker's state, then metadata,
    # fetches, appends and heartbeats); then the source order (Kafka offset).
    rank = pdf["type"].map(TIE_RANK).to_numpy()
    order = np.lexsort((pdf["seq"].to_numpy(), rank, pdf["ts"].to_numpy()))
    ignore = set(ignore)
    columns = [
        repeat(None, n)
        if name in ignore
        else _column(pdf, name)
        if name in COLUMN_FIELDS or name == "raw"
        else packed.get(name) or repeat(None, n)
        for name in EVENT_FIELDS
    ]
    rows = list(zip(*columns, strict=True))
    return [rows[i] for i in order.tolist()]


class Phases:
    """Where one call's time goes (for bench/throughput.py): `lap(name)` charges the time since
    the previous lap to `name`, both wall time and this thread's CPU time (`name_cpu`: on a
    machine shared with other work the wall time includes waiting for a core, the CPU time does
    not); `write` appends the laps as one JSON line. Off: no clock reads."""

    def __init__(self, folder: str | None) -> None:
        self.folder = folder
        self.laps: dict[str, float] = {}
        self._t = time.perf_counter() if folder else 0.0
        self._cpu = time.thread_time() if folder else 0.0

    def lap(self, name: str) -> None:
        if self.folder:
            t, cpu = time.perf_counter(), time.thread_time()
            self.laps[name] = self.laps.get(name, 0.0) + (t - self._t)
            self.laps[name + "_cpu"] = self.laps.get(name + "_cpu", 0.0) + (cpu - self._cpu)
            self._t, self._cpu = t, cpu

    def write(self, **fields) -> None:
        if self.folder:
            path = os.path.join(self.folder, f"phases-{os.getpid()}.jsonl")
            with open(path, "a") as f:
                f.write(
                    json.dumps({**fields, **{k: round(v * 1000, 3) for k, v in self.laps.items()}}) + "\n"
                )


# The buckets this worker process last wrote, with the tag it wrote each under, by bucket id,
# bucket count and settings (one worker serves every query of its Spark session). The state
# store's blob stays the truth: a kept object is used only when the blob handed in is the one
# this process wrote (same tag) for the same bucket count and settings, which saves decoding the
# whole bucket every batch. An entry is taken out while its bucket is being changed, so a call
# that fails leaves none.
# What it buys: a hit loads the state in 0.06 ms instead of decoding it in 55 ms (53-60), and the
# whole call takes 220 ms (206-247) instead of 253 (235-271): bench/bucket_step.py --buckets 8
# --batches 5 (a worker serving 8 buckets of 6,250 partitions), without and with --miss, CPU per
# whole call, median of 3 runs (min-max), 2026-11-25 on the 2-core machine, shared (load ~8).
# Spark does not promise a hit: the two tasks' Python workers swap whenever the tasks finish in
# the other order, and then every load decodes (docs/performance.md: 424 ms of state load per
# 300k-event batch at 100k partitions, where 16 decodes would take about 560 ms).
# Bounded: at most `kept` entries (the most buckets one task has: make_state_func), the oldest
# write dropped first. When the tasks swap, this worker's copies of the other task's buckets are
# stale (the other worker has written them since) and go as this task's buckets are written, so
# a worker never holds more than one task's share (tests/streaming/test_state_cache.py).
#
# Beside each kept bucket, the Chunks of the blob it was written as (state/codec.py, formats 3-4):
# the next save encodes only the partitions the batch touched and joins the other partitions'
# encoded chunks as they are. A bucket decoded (a miss) comes with the Chunks of the blob it was
# read from, so its next save is incremental too, and is decoded lazily (LAZY_LOAD). What they
# buy (bench/bucket_step.py --busy 0.1 [--miss] --batches 36, a fifth of 6,250 partitions
# changing per call, CPU per whole call, median of 3 runs with min-max, main and this code run
# alternately, 2026-11-25, machine shared): 81 ms (80-85) instead of 121 (79-123) when the
# bucket was kept, 168 (168-202) instead of 214 (212-227) on a miss (docs/performance.md).
# tests/streaming/test_incremental_state.py: same outputs and state.
_WRITTEN: dict[tuple, tuple[bytes, Bucket, Chunks | None]] = {}
# The bucket each call loaded, with its Chunks, until the call saves it (by bucket key).
_LOADED: dict[tuple, tuple[Bucket, Chunks | None]] = {}
# Off: every save encodes the whole bucket (bench/bucket_step.py --full-save; the tests' reference).
INCREMENTAL_SAVE = True
# A bucket decoded on a miss leaves its partitions encoded until the batch needs them (state/
# codec.py, decode_chunks(lazy=True); state/bucket.py, ColdWatch). Off: a miss decodes them all
# (bench/bucket_step.py --eager-load; the tests' reference).
LAZY_LOAD = True


def load_bucket(state, cfg: MonitorConfig, bucket_id: int, buckets: int, events: Sequence = ()) -> Bucket:
    """The bucket's state: the one this worker kept when the blob is the one it wrote (a hit),
    else decoded, lazily unless the batch's `events` concern half of its partitions or more."""
    key = (bucket_id, buckets, cfg)
    cached = _WRITTEN.pop(key, None)
    _LOADED.pop(key, None)
    if not state.exists:
        bucket = Bucket(bucket_id, buckets)
        _LOADED[key] = (bucket, None)
        return bucket
    blob = state.get[0]
    if cached is not None and cached[0] == tag_of(blob):
        _LOADED[key] = (cached[1], cached[2])
        return cached[1]
    bucket, chunks = decode_chunks(
        blob,
        bucket_id=bucket_id,
        buckets=buckets,
        cfg=cfg,
        lazy=LAZY_LOAD,
        needed=lambda: len({(ev[TOPIC], ev[PARTITION]) for ev in events}),
    )
    _LOADED[key] = (bucket, chunks)
    return bucket


def save_bucket(state, bucket: Bucket, cfg: MonitorConfig, kept: int | None = None) -> None:
    """Write the bucket with a new tag and keep it; `kept`: the most buckets this worker keeps
    (default: every bucket of the run)."""
    key = (bucket.bucket_id, bucket.buckets, cfg)
    loaded = _LOADED.pop(key, None)
    # the Chunks describe this very bucket object as it was loaded (else: encode it all)
    chunks = loaded[1] if loaded is not None and loaded[0] is bucket and INCREMENTAL_SAVE else None
    tag = os.urandom(TAG_BYTES)
    blob, chunks = encode_chunks(bucket, tag, chunks)
    state.update((blob,))
    _WRITTEN[key] = (tag, bucket, chunks)  # load_bucket popped it: now last
    limit = bucket.buckets if kept is None else kept
    while len(_WRITTEN) > limit:
        del _WRITTEN[next(iter(_WRITTEN))]  # the oldest write


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside; the collector left as it was found, also on an
    error. What was allocated meanwhile is freed by reference counting; the first collection
    after it finds any cycle left."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def quiet_collector():
    """No cyclic garbage collection while a call runs, and the objects that outlive it (the kept
    buckets) excluded from later collections.

    A Python worker keeps the decoded buckets of one task (~50k partitions' objects at scale),
    and a call allocates tens of thousands more: the collector's full passes, triggered by those
    allocations, scanned every kept object again and again. What it buys (bench/bucket_step.py
    --buckets 8 --batches 5, CPU per whole call, its end included, median of 3 runs with
    min-max, 2026-11-25, machine shared): 220 ms (206-247) a call instead of 296 (282-312) with
    the collector as Python runs it; when every call decodes its bucket (--miss), 253 (235-271)
    instead of 627 (496-631), the state load alone 55 instead of 268.

    The engine builds no reference cycles (tests/streaming/test_state_cache.py checks a whole
    simulated incident, and that what the calls freeze does not grow from call to call), so its
    objects are freed by reference counting. At the end of the call what is alive is frozen
    (gc.freeze: left out of later collections, still freed when no longer referenced), with no
    collection first: a young collection there walked every object the call made that is still
    alive (all of a decoded bucket's), about 7% of the Python workers' busy time in a profile of
    bench/realtime.py at 40,000 partitions, to find cycles the engine does not make. Cycles that
    other code in the worker (pyspark's own per-task objects) leaves frozen, garbage at once or
    later, are reclaimed by `full_collection_if_grown`."""
    with collector_paused():
        try:
            yield
        finally:
            gc.freeze()
            if _count_call():
                full_collection_if_grown()


# A full collection of the frozen objects once their number has grown by this factor (and at
# least this many) since the last one: garbage cycles frozen by mistake are reclaimed, at the
# cost of one full pass per such growth, as CPython's own rule for its oldest generation does.
FULL_COLLECTION_GROWTH = 1.25
FULL_COLLECTION_MIN_OBJECTS = 100_000
_frozen_after_full = 0
# Checked every this many calls, not every call: counting the frozen objects walks all of them
# (gc.get_freeze_count). Checked every call, a worker with 560k frozen objects spent about 50 ms
# of CPU a call at the call's end (bench/bucket_step.py --buckets 8: the whole call less its
# phases, about 65 ms checking every call, 7-13 ms checking every 32nd).
FULL_COLLECTION_CHECK_EVERY = 32
_calls = 0


def _count_call() -> bool:
    """True every FULL_COLLECTION_CHECK_EVERY calls."""
    global _calls
    _calls += 1
    return _calls % FULL_COLLECTION_CHECK_EVERY == 0


def full_collection_if_grown() -> bool:
    """Unfreeze, collect everything and freeze again, if the frozen objects have grown enough."""
    global _frozen_after_full
    frozen = gc.get_freeze_count()
    if frozen < max(FULL_COLLECTION_MIN_OBJECTS, FULL_COLLECTION_GROWTH * _frozen_after_full):
        return False
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _frozen_after_full = gc.get_freeze_count()
    return True


_warned_resolutions: set[tuple[str, int]] = set()  # (cluster, stated) this worker has warned of


def warn_stated_resolution(bucket: Bucket, cfg: MonitorConfig) -> None:
    """Once per worker process, cluster and value: a cluster's source states a compaction
    resolution other than the configured alerts.compaction_resolution_ms, which then applies
    only to sources that state none."""
    if not cfg.compaction_resolution_ms:
        return
    for cluster, view in bucket.clusters.items():
        stated = view.compaction_resolution_ms
        if stated is None or stated == cfg.compaction_resolution_ms:
            continue
        if (cluster, stated) not in _warned_resolutions:
            _warned_resolutions.add((cluster, stated))
            log.warning(
                "cluster %s: its collector states a compaction resolution of %d ms on its "
                "heartbeats; that is used for it, not alerts.compaction_resolution_ms = %d ms (which "
                "applies only to sources that state none: docs/events.md, heartbeat)",
                cluster,
                stated,
                cfg.compaction_resolution_ms,
            )


def make_state_func(
    cfg: MonitorConfig,
    buckets: int,
    profile_dir: str | None = None,
    keys: list[int] | None = None,
    kept: int | None = None,
):
    """The function handed to applyInPandasWithState (closes over plain config only). `keys`:
    the grouping key of each bucket (parse.monitor_input), None when the key is the bucket.
    `kept`: the most buckets a Python worker keeps decoded (save_bucket), None for all."""
    bucket_of_key = {int(k): b for b, k in enumerate(keys)} if keys is not None else None

    def func(key, frames, state) -> Iterator[pd.DataFrame]:
        with quiet_collector():
            bucket_id = int(key[0]) if bucket_of_key is None else bucket_of_key[int(key[0])]
            out = bucket_step(bucket_id, frames, state, cfg, buckets, Phases(profile_dir), kept)
        if out is not None:
            yield out

    return func


def bucket_step(
    bucket_id: int, frames, state, cfg: MonitorConfig, buckets: int, phases: Phases, kept: int | None
) -> pd.DataFrame | None:
    """One call for one bucket: its input events (none when the call is its timeout) through the
    engine, its state saved with its next timeout, and its outputs as (kind, payload) rows."""
    quarantine: list = []
    watermark = state.getCurrentWatermarkMs()
    events: list = []
    if not state.hasTimedOut:
        frames = [f for f in frames if len(f)]
        phases.lap("input")
        events = events_from_frames(frames, quarantine)
        phases.lap("quarantine_and_sort")
    bucket = load_bucket(state, cfg, bucket_id, buckets, events)
    phases.lap("state_load")
    outputs = engine_step(bucket, events, cfg, quarantine, watermark)
    phases.lap("engine")
    timeout = bucket.next_timeout_ms(cfg)
    save_bucket(state, bucket, cfg, kept)
    if timeout is not None:
        state.setTimeoutTimestamp(max(timeout, watermark + 1, 1))
    phases.lap("state_save")
    out = output_rows(outputs)
    if out is not None:
        phases.lap("output")
    phases.write(
        bucket=bucket_id,
        events=len(events),
        partitions=len(bucket.partitions),
        outputs=0 if out is None else len(out),
    )
    return out


def engine_step(
    bucket: Bucket, events: list, cfg: MonitorConfig, quarantine: list, watermark: int
) -> list[tuple[str, list]]:
    """The engine's outputs of one call, by kind in the order they are emitted: the events
    processed, the bucket advanced to the watermark, its statuses taken. `quarantine` holds the
    parser's rejects already; the engine's own are added (bounded)."""
    alerts: list = []
    stage = len(quarantine)
    bucket.process(events, cfg, alerts, quarantine)
    warn_stated_resolution(bucket, cfg)
    quarantine[stage:] = [bounded_quarantine(q) for q in quarantine[stage:]]
    bucket.advance(cfg, alerts, watermark_ms=watermark if watermark > 0 else None)
    partitions: list = []
    replicas: list = []
    points: list = []
    bucket.statuses(cfg, partitions, replicas, points=points)
    return [
        ("alerts", alerts),
        ("partition_status", partitions),
        ("replica_status", replicas),
        ("series_point", points),
        ("quarantine", quarantine),
        ("activity", bucket.activity_reports()),
    ]


def output_rows(outputs: list[tuple[str, list]]) -> pd.DataFrame | None:
    """The outputs as OUTPUT_SCHEMA rows (kind, JSON payload), None when there are none."""
    kinds: list[str] = []
    for kind, records in outputs:
        kinds += [kind] * len(records)
    if not kinds:
        return None
    payload = [_encode(r) for _, records in outputs for r in records]
    return pd.DataFrame({"kind": kinds, "payload": payload})
