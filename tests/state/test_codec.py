"""The state format (state/codec.py): explicit fields, a version, the bucket count.

The round trip is checked by behaviour: a bucket that goes through encode/decode after every
slice of event time must say exactly what a bucket that never left memory says, on every
simulator scenario. Format 0 (the pickle written before the format existed) is the real blob
in tests/state/data/, written by the code on main before this module; so is a format 1 blob.
"""

from __future__ import annotations

import json
import pickle
import zlib
from pathlib import Path

import pytest

from replmon.state import codec, monitor
from replmon.state.bucket import Bucket
from replmon.state.codec import StateFormatError, decode, encode
from replmon.state.monitor import MonitorConfig, PartitionWatch
from replmon.state.partition import PartitionLeader
from replmon.state.replica import ReplicaState
from replmon.streaming.settings import monitor_config
from replmon.streaming.simulator import scenarios
from replmon.streaming.simulator.model import simulate
from tests.state.helpers import T, make
from tests.state.test_monitor_vs_truth import TYPE_RANK, as_tuple

DATA = Path(__file__).parent / "data"


def state_of(bucket: Bucket) -> dict:
    """What the format stores of a bucket, as plain values (equal values, equal state)."""
    return codec.plain_values(bucket)


def feed(events, cfg, *, roundtrip: bool, slice_ms: int = 1000, bucket=None):
    """Events in slices of event time (as micro-batches); with `roundtrip`, the bucket is
    encoded and decoded between slices, as the stateful step does between batches."""
    bucket = bucket or Bucket(0, 1)
    alerts, quarantine, partitions, replicas = [], [], [], []
    order = sorted(events, key=lambda e: (e["ts"], TYPE_RANK[e["type"]]))
    chunks: dict[int, list] = {}
    for e in order:
        chunks.setdefault(e["ts"] // slice_ms, []).append(as_tuple(e))
    for _, chunk in sorted(chunks.items()):
        bucket.process(chunk, cfg, alerts, quarantine)
        bucket.advance(cfg, alerts)
        bucket.statuses(cfg, partitions, replicas)
        if roundtrip:
            bucket = decode(encode(bucket), bucket_id=0, buckets=1, cfg=cfg)
    return bucket, (alerts, quarantine, partitions, replicas)


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_a_bucket_decoded_between_every_batch_says_what_one_kept_in_memory_says(name):
    spec = scenarios.get(name)
    events, _ = simulate(spec, seed=1)
    cfg = monitor_config(replica_lag_time_max_ms=spec.replica_lag_time_max_ms)
    kept, expected = feed(events, cfg, roundtrip=False)
    decoded, got = feed(events, cfg, roundtrip=True)
    assert expected[2] and expected[3], "the scenario reports statuses"
    assert got == expected
    assert state_of(decoded) == state_of(kept)


@pytest.mark.parametrize(
    "cls, fields",
    [
        (PartitionWatch, codec.WATCH_FIELDS),
        (PartitionLeader, codec.LEADER_FIELDS),
        (ReplicaState, codec.REPLICA_FIELDS),
    ],
)
def test_every_slot_is_stored_or_declared_derived(cls, fields):
    # A slot added to an engine class without a place in the format would be lost at every
    # batch: this fails first. Add it to the field list (and DEFAULTS for older blobs).
    derived = set(codec.DERIVED.get(cls.__name__, ()))
    if cls is PartitionLeader:  # its ISR state is one value, stored as several fields
        fields = (*(f for f in fields if f not in codec.ISR_STATE_FIELDS), "isr_state")
    assert set(cls.__slots__) == set(fields) | derived


@pytest.mark.parametrize(
    "cls, fields",
    [
        (PartitionWatch, codec.WATCH_FIELDS),
        (PartitionLeader, tuple(f for f in codec.LEADER_FIELDS if f not in codec.ISR_STATE_FIELDS)),
        (ReplicaState, codec.REPLICA_FIELDS),
    ],
)
def test_the_generated_constructor_builds_what_a_setattr_per_field_builds(cls, fields):
    # codec._builder generates its constructor's source (a speed trick): it must set each field
    # to its own value (a value per field, so a swapped pair shows), leave every other slot unset,
    # and refuse a row of another length, as the plain version does.
    row = tuple(object() for _ in fields)
    built = codec._builder(cls, fields)(row)
    plain = object.__new__(cls)
    for name, value in zip(fields, row, strict=True):
        setattr(plain, name, value)
    unset = object()
    assert type(built) is cls
    assert [getattr(built, s, unset) for s in cls.__slots__] == [
        getattr(plain, s, unset) for s in cls.__slots__
    ]
    with pytest.raises(ValueError):
        codec._builder(cls, fields)(row[:-1])
    with pytest.raises(ValueError):
        codec._builder(cls, ("leo", "x = 1; y"))


def _committed():
    return make(replicas=(1, 2, 3), isr=(1, 3, 2), mode="manual")


def _expand_not_retried():
    p = make(replicas=(1, 2, 3), isr=(1, 2), leo=100, hw=100, mode="manual")
    p.fetch(T, 3, 100)
    p.alter_partition_response(T + 1, "error", "FENCED_LEADER_EPOCH")
    return p


def _shrink():
    p = make(replicas=(1, 2, 3), isr=(1, 2, 3), leo=100, hw=0, mode="manual")
    p.fetch(T, 2, 100)
    p.isr_expiration(T + 30001)
    return p


@pytest.mark.parametrize(
    "make_leader, stored",
    [
        # (isr, maximal_isr, pending, pending_ids, pending_retry), as the format has always stored them
        pytest.param(_committed, ((1, 2, 3), (1, 2, 3), None, (), False), id="committed"),
        pytest.param(
            _expand_not_retried,
            ((1, 2), (1, 2, 3), "expand", (3,), False),
            id="expand in flight, not retried: the maximal ISR has the new replica",
        ),
        pytest.param(_shrink, ((1, 2, 3), (1, 2, 3), "shrink", (3,), True), id="shrink in flight, retried"),
    ],
)
def test_the_isr_state_is_stored_as_its_fields_and_rebuilt_from_them(make_leader, stored):
    p = make_leader()
    row = codec._leader_values(p)
    assert tuple(row[codec.LEADER_FIELDS.index(f)] for f in codec.ISR_STATE_FIELDS) == stored
    built = codec._leader_builder(codec.LEADER_FIELDS)(row)
    assert built.isr_state == p.isr_state and type(built.isr_state) is type(p.isr_state)
    assert codec._leader_values(built) == row
    # the maximal ISR of a committed or shrinking state is the ISR itself: one tuple in the blob
    assert (built.maximal_isr is built.isr) is (stored[2] != "expand")


def _bucket_with_alerts(buckets: int = 1) -> tuple[Bucket, MonitorConfig]:
    spec = scenarios.get("paused_and_slow")
    events, _ = simulate(spec, seed=0)
    cfg = monitor_config(replica_lag_time_max_ms=spec.replica_lag_time_max_ms)
    bucket, _ = feed(events[:2600], cfg, roundtrip=False, bucket=Bucket(0, buckets))
    return bucket, cfg


def test_open_alerts_and_cluster_views_survive_the_round_trip():
    bucket, cfg = _bucket_with_alerts()
    assert any(w.book.open for w in bucket.partitions.values())
    back = decode(encode(bucket), bucket_id=0, buckets=1, cfg=cfg)
    assert {k: w.book.open for k, w in back.partitions.items()} == {
        k: w.book.open for k, w in bucket.partitions.items()
    }
    assert {c: (v.clock_ms, v.brokers) for c, v in back.clusters.items()} == {
        c: (v.clock_ms, v.brokers) for c, v in bucket.clusters.items()
    }


def test_the_partition_config_is_rebuilt_from_the_settings_and_the_partitions_overrides():
    # metadata overrides (min_insync_replicas 2, replica_lag_time_max_ms 10000) are kept; the
    # rest follows the run's settings, so a changed default applies to restored partitions.
    bucket, _cfg = _bucket_with_alerts()
    other = monitor_config(replica_lag_time_max_ms=99_000, rule_set="v0_8")
    back = decode(encode(bucket), bucket_id=0, buckets=1, cfg=other)
    config = next(iter(back.partitions.values())).leader.config
    assert (config.replica_lag_time_max_ms, config.min_insync_replicas, config.rule_set) == (10000, 2, "v0_8")


def test_state_per_replica_is_at_most_200_bytes():
    # The demo's 8 partitions, with open alerts: a blob's fixed part (the field names, format
    # 3's index names among them) is not what the bound is about, and on the 2 partitions (6
    # replicas) of _bucket_with_alerts it is most of the blob's 1.2 KB.
    spec = scenarios.get("demo")
    events, _ = simulate(spec, seed=0)
    cfg = monitor_config(replica_lag_time_max_ms=spec.replica_lag_time_max_ms)
    bucket, _ = feed(events[: len(events) // 3], cfg, roundtrip=False)
    assert any(w.book.open for w in bucket.partitions.values())
    replicas = sum(len(w.leader.replicas) for w in bucket.partitions.values())
    assert replicas >= 24
    assert len(encode(bucket)) / replicas <= 200


def test_a_checkpoint_written_with_another_bucket_count_is_refused_with_what_to_do():
    bucket, cfg = _bucket_with_alerts(buckets=4)
    with pytest.raises(StateFormatError) as err:
        decode(encode(bucket), bucket_id=0, buckets=8, cfg=cfg)
    text = str(err.value)
    assert "stream.buckets = 4" in text and "stream.buckets = 8" in text
    assert "Set stream.buckets = 4 again" in text and "spark.checkpoint_dir" in text


def test_the_tag_is_read_back_without_decoding():
    blob = encode(Bucket(0, 1), tag=b"12345678")
    assert codec.tag_of(blob) == b"12345678"
    assert codec.tag_of((DATA / "bucket_format0.pickle").read_bytes()) is None


def test_an_unknown_format_version_is_refused_with_what_to_do():
    blob = encode(Bucket(0, 1))
    newer = codec.MAGIC + (codec.FORMAT_VERSION + 1).to_bytes(2, "big") + blob[len(codec.MAGIC) + 2 :]
    with pytest.raises(
        StateFormatError,
        match=r"format 5, and this replmon reads formats 0 to 4.*"
        r"spark\.checkpoint_dir",
    ):
        decode(newer, bucket_id=0, buckets=1, cfg=monitor_config())


@pytest.mark.parametrize(
    "blob, why",
    [
        (codec.MAGIC + b"\x00\x01" + bytes(8) + b"not zlib", "damaged"),
        (
            codec.MAGIC + b"\x00\x01" + bytes(8) + zlib.compress(pickle.dumps(ReplicaState())),
            r"damaged: the state names a class \(replmon.state.replica.ReplicaState\)",
        ),
        (b'{"json": true}', "not a replmon state"),
    ],
)
def test_a_blob_that_is_not_a_state_is_refused(blob, why):
    with pytest.raises(StateFormatError, match=why):
        decode(blob, bucket_id=0, buckets=1, cfg=monitor_config())


def test_a_stored_field_this_code_does_not_know_is_ignored(monkeypatch):
    bucket, cfg = _bucket_with_alerts()
    monkeypatch.setattr(codec, "WATCH_FIELDS", (*codec.WATCH_FIELDS, "added_later"))
    monkeypatch.setattr(PartitionWatch, "added_later", 7, raising=False)
    newer = encode(bucket)
    monkeypatch.undo()
    assert state_of(decode(newer, bucket_id=0, buckets=1, cfg=cfg)) == state_of(bucket)


def test_a_field_an_older_blob_lacks_takes_its_default_or_is_refused(monkeypatch):
    bucket, cfg = _bucket_with_alerts()
    monkeypatch.setattr(codec, "WATCH_FIELDS", tuple(f for f in codec.WATCH_FIELDS if f != "leo_seen"))
    older = encode(bucket)
    monkeypatch.undo()
    with pytest.raises(StateFormatError, match=r"lacks the field\(s\) \['leo_seen'\]"):
        decode(older, bucket_id=0, buckets=1, cfg=cfg)
    monkeypatch.setattr(codec, "DEFAULTS", {"leo_seen": -5})
    back = decode(older, bucket_id=0, buckets=1, cfg=cfg)
    assert {w.leo_seen for w in back.partitions.values()} == {-5}


# ---- format 1: a tuple per partition (before the columns of format 2) ---------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_format_blob_is_read_as_the_state_it_was_written_from_and_goes_on_alike(
    version, monkeypatch
):
    """bucket_format1.bin and bucket_format2.bin: the same 2,600 events as the format 0 blob,
    encoded by format 1, and by format 2 (one compressed pickle of the partitions by column),
    before format 3 split the partitions into separately compressed chunks
    (tests/state/data/README.md). Read now, each is the state today's code builds from those
    events (compared in today's format), and it goes on to resolve the same episodes."""
    spec = scenarios.get("paused_and_slow")
    events, _ = simulate(spec, seed=0)
    cfg = monitor_config(replica_lag_time_max_ms=10000, min_insync_replicas=2)
    blob = (DATA / f"bucket_format{version}.bin").read_bytes()
    assert blob[len(codec.MAGIC) : len(codec.MAGIC) + 2] == bytes([0, version])
    assert codec.tag_of(blob) == f"format-{version}".encode()
    restored = decode(blob, bucket_id=0, buckets=1, cfg=cfg)
    with monkeypatch.context() as m:  # the blobs hold the schedule of every isr-expiration run
        m.setattr(monitor, "SKIP_IDLE_RUNS", False)
        rebuilt, _ = feed(events[:2600], cfg, roundtrip=False)
    for w in rebuilt.partitions.values():  # added after formats 1 and 2: the default when read
        assert codec.DEFAULTS["status_sent"] is None
        w.status_sent = None
    expected = state_of(rebuilt)
    if version == 1:  # the brokers' activity runs (for state/cluster.py) came after format 1
        expected = {**expected, "activity": {}}
    assert state_of(restored) == expected
    open_now = {a.alert_id: key for w in restored.partitions.values() for key, a in w.book.open.items()}
    assert open_now == FORMAT0_OPEN
    _, (alerts, quarantine, _, _) = feed(events[2600:], cfg, roundtrip=True, bucket=restored)
    resolved = {a["alert_id"]: a["ts"] for a in alerts if a["status"] == "resolved"}
    assert {aid: resolved.get(aid) for aid in FORMAT0_OPEN} == dict.fromkeys(
        FORMAT0_OPEN, FORMAT0_RESOLVED_AT
    )
    assert quarantine == []


def test_format4_stores_the_partitions_by_column_in_chunks_each_with_its_index():
    bucket, _ = _bucket_with_alerts()
    n = len(bucket.partitions)

    def doc_of(blob: bytes) -> tuple:
        meta, chunks, indexes = pickle.loads(blob[len(codec.MAGIC) + 2 + codec.TAG_BYTES :])
        return pickle.loads(zlib.decompress(meta)), chunks, indexes

    # most partitions changed since the last write: marked, so that the next decode is whole
    assert len(bucket.touched) == n
    whole, _, _ = doc_of(encode(bucket))
    assert whole["partitions"]["most"] is True
    bucket.touched.clear()
    doc, chunks, indexes = doc_of(encode(bucket))
    assert doc["format"] == 4 and len(chunks) == len(indexes) == 1  # written whole: one chunk
    assert doc["partitions"]["most"] is False and doc["partitions"]["orphans"] == []
    assert doc["partitions"]["time_ms"] == [w.time_ms for w in bucket.partitions.values()]
    index = dict(zip(doc["fields"]["index"], pickle.loads(zlib.decompress(indexes[0])), strict=True))
    assert list(index) == [*(f for f in codec.INDEX_FIELDS if f != "time_ms"), "seq"]
    keys = zip(index["cluster"], index["topic"], index["partition"], strict=True)
    assert list(keys) == list(bucket.partitions)
    assert list(index["seq"]) == list(range(n))
    assert list(index["deadline_ms"]) == [w.deadline_ms for w in bucket.partitions.values()]
    assert list(index["replicas"]) == [w.leader.replicas for w in bucket.partitions.values()]
    part = pickle.loads(zlib.decompress(chunks[0]))
    assert part["count"] == n
    assert [len(c) for c in part["watch"]] == [n] * len(codec.WATCH_FIELDS)
    counts, ids, replica_columns = part["followers"]
    assert sum(counts) == len(ids) and {len(c) for c in replica_columns} == {len(ids)}


def test_a_format3_blob_is_read_as_the_state_it_was_written_from_and_goes_on_alike():
    """bucket_format3.bin: 19 micro-batches of the incremental state test's random events (seed
    0), each saved incrementally by the format 3 encoder in chunks of 8 rows (7 chunks, 11 dead
    rows, with the index of every partition; tests/state/data/README.md). Read now, it is the
    state today's code builds from those batches, and both go on to say the same."""
    from tests.streaming.test_incremental_state import CFG, batches, random_events

    calls = batches(random_events(0), 0)
    blob = (DATA / "bucket_format3.bin").read_bytes()
    assert blob[len(codec.MAGIC) : len(codec.MAGIC) + 2] == bytes([0, 3])
    meta, stored = pickle.loads(blob[len(codec.MAGIC) + 2 + codec.TAG_BYTES :])
    where = pickle.loads(zlib.decompress(meta))["partitions"]
    assert len(stored) == 7 and where["index"] is not None and sum(where["rows"]) > len(where["row"])
    restored, chunks = codec.decode_chunks(blob, bucket_id=0, buckets=1, cfg=CFG, lazy=True)
    assert chunks is None  # not kept: the next save writes format 4 whole
    rebuilt = Bucket(0, 1)
    for events in calls[:19]:
        rebuilt.process(events, CFG, [], [])
        rebuilt.advance(CFG, [])
        rebuilt.statuses(CFG, [], [])
    assert state_of(restored) == state_of(rebuilt)
    said = []
    for bucket in (restored, rebuilt):
        out: tuple = ([], [], [], [])
        for events in calls[19:]:
            bucket.process(events, CFG, out[0], out[1])
            bucket.advance(CFG, out[0])
            bucket.statuses(CFG, out[2], out[3])
            bucket = decode(encode(bucket), bucket_id=0, buckets=1, cfg=CFG)
        said.append(out)
    assert said[0] == said[1] and said[0][0] and said[0][2]


def test_a_bucket_without_partitions_round_trips_even_with_another_field_list(monkeypatch):
    # No partitions: the columns are empty but there is still one per field, so a blob whose
    # field list differs from this code's is remapped, not misaligned.
    monkeypatch.setattr(codec, "WATCH_FIELDS", (*codec.WATCH_FIELDS, "added_later"))
    blob = encode(Bucket(0, 1))
    monkeypatch.undo()
    assert decode(blob, bucket_id=0, buckets=1, cfg=monitor_config()).partitions == {}


# ---- format 0: the pickle written before the state had a format ------------------------------

# The episodes the format-0 run had open when it wrote the blob (its alert output), and when
# that same old code, continuing over the rest of the scenario, resolved them.
FORMAT0_OPEN = {
    "bedf6d0cc1f1c58ae294": ("ReplicaOutOfSync", "sim/orders-1/3"),
    "90a46a6c25c3d7ddb18f": ("UnderReplicated", "sim/orders-1"),
    "c639ecfc43b779649a73": ("AtMinIsr", "sim/orders-1"),
}
FORMAT0_RESOLVED_AT = 1767225660265


def test_a_format0_blob_is_migrated_with_its_open_episodes_which_then_resolve_as_before():
    """bucket_format0.pickle: the first 2,600 events of paused_and_slow (seed 0) processed by
    the code before issue 13 (tests/state/data/README.md). Migrated, it keeps the episodes the
    old code had open, and going on over the rest of the scenario resolves them at the event
    time the old code did (replica 3 caught up again)."""
    spec = scenarios.get("paused_and_slow")
    events, _ = simulate(spec, seed=0)
    cfg = monitor_config(replica_lag_time_max_ms=10000, min_insync_replicas=2)
    migrated = decode((DATA / "bucket_format0.pickle").read_bytes(), bucket_id=0, buckets=1, cfg=cfg)
    open_now = {a.alert_id: key for w in migrated.partitions.values() for key, a in w.book.open.items()}
    assert open_now == FORMAT0_OPEN
    assert sorted(k[1:] for k in migrated.partitions) == [("orders", 0), ("orders", 1)]
    _, (alerts, quarantine, _, _) = feed(events[2600:], cfg, roundtrip=True, bucket=migrated)
    resolved = {a["alert_id"]: a["ts"] for a in alerts if a["status"] == "resolved"}
    assert {aid: resolved.get(aid) for aid in FORMAT0_OPEN} == dict.fromkeys(
        FORMAT0_OPEN, FORMAT0_RESOLVED_AT
    )
    assert quarantine == []


def test_a_format0_blob_written_with_another_bucket_count_is_refused():
    blob = (DATA / "bucket_format0.pickle").read_bytes()
    with pytest.raises(StateFormatError, match=r"stream\.buckets = 1, and this run has stream\.buckets = 64"):
        decode(blob, bucket_id=0, buckets=64, cfg=monitor_config())


def test_a_format0_blob_may_name_only_engine_classes():
    evil = pickle.dumps(json.JSONEncoder())
    with pytest.raises(StateFormatError, match="format 0"):
        decode(evil, bucket_id=0, buckets=1, cfg=monitor_config())


def test_a_refusal_raised_in_a_worker_is_found_by_its_marker_in_the_text_spark_carries():
    # Raised in a Spark worker, the error reaches the driver only as text: Spark's error with the
    # worker's traceback inside (below, abridged from pyspark 4.3's). The CLI finds the reason by
    # the error's marker, whatever surrounds it, and nothing in an error without one.
    import traceback

    try:
        decode(encode(Bucket(0, 1)), bucket_id=0, buckets=64, cfg=monitor_config())
    except StateFormatError:
        worker = traceback.format_exc()
    spark_error = (
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted due to "
        "stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0 "
        f"(TID 5) (localhost executor driver): org.apache.spark.api.python.PythonException: {worker}\n"
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(...)\n"
    )
    reason = codec.refusal_in(spark_error)
    assert reason is not None
    assert reason.startswith(
        "the checkpoint was written with stream.buckets = 1, and this run has stream.buckets = 64"
    )
    assert reason.endswith("from where monitoring should begin.")
    assert codec.refusal_in(spark_error.replace(StateFormatError.MARKER, "")) is None


@pytest.mark.parametrize("asked", ["one", "most"])
def test_a_chunk_builds_the_row_asked_for_as_building_them_all_does(asked):
    # A lazily decoded chunk builds a row alone until a batch has asked for ALL_ROWS_AFTER of
    # its rows, then all of them at once: either way, each row is the one the whole decode
    # builds (followers and open alerts included).
    bucket, _ = _bucket_with_alerts()
    watches = list(bucket.partitions.values()) * 40  # a chunk of some size (rows may repeat)
    assert any(w.book.open for w in watches)
    part = codec._partition_columns(watches)
    expected = list(codec._rows_from_columns(part, codec._fields()))
    chunk = codec._ChunkColumns(part, codec._fields())
    order = [len(expected) - 1] if asked == "one" else list(reversed(range(len(expected))))
    assert [chunk.row(i) for i in order] == [expected[i] for i in order]
    assert (chunk.rows is None) == (asked == "one")
