"""The state format: one bucket of the streaming job as explicit, versioned fields.

A checkpoint outlives the code that wrote it, so the state is a format, not an object graph:
named fields of builtin values (ints, strings, tuples, dicts), a format version and the bucket
count it was written with. Renaming a class in `state/` does not break a checkpoint, and a
checkpoint written with another `stream.buckets` (its partitions would hash to other buckets and
silently lose their state) or by an unknown format is refused with a message saying what to do.

    blob = MAGIC + version (2 bytes, big endian) + tag (8 bytes) + zlib(pickle of builtins only)

The tag is whatever the writer passes (the streaming adapter: random bytes per write), so a
process that still holds the bucket it last wrote can tell, without decoding, that a blob is
that very state (`tag_of`).

The container is pickle restricted to builtin types (the loader refuses any class), which is
the fastest builtin-only serialiser in the standard library; the schema is the field lists
below, stored in every blob, so a decoder matches fields by name: a field added later gets its
default when an older blob lacks it, and a stored field this code does not know is ignored.

Format 2 stores the partitions by column (one tuple per field across the bucket's partitions,
the followers' fields likewise), format 1 stored a tuple per partition. Same fields; by column
a bucket pickles about 4x and unpickles about 3x faster and compresses to about a third (the
values of one field look alike), and the state save and load are a large share of a
micro-batch at 100k partitions. Format 1 blobs are still read.

Format 3 split the partitions into chunks, each compressed on its own (a chunk is format 2's
columns of some of the bucket's partitions), so that a process that wrote a bucket's last blob
rewrites only the partitions that changed since (`encode_chunks`, `Chunks`): the others' chunks
are joined in as they are (a memcpy), and the state save costs in proportion to the partitions
a batch touched, not to all of them. The bucket names the changed ones (`Bucket.touched`). A
partition written again lives in the newer chunk; the older copy stays in its chunk, dead, until
that chunk is more than half dead, when its live partitions move to the new chunk and it goes;
so a blob holds at most about twice its partitions.

Format 4 gives each chunk an index of its own, written with the chunk and joined in with it
(format 3 wrote one index of every partition in every write: at 6,250 idle partitions, 10 of the
11 ms of a save in which nothing changed). A chunk's index holds, for each of its rows, what
decides whether a micro-batch needs that partition (its key, deadline, last event and status
times and flags, leader and assignment: CHUNK_INDEX_FIELDS) and its place in the bucket's order
(`seq`), so that a process that did not write the blob can decode it lazily
(`decode_chunks(lazy=True)`): the indexes only, every partition a ColdWatch
(state/cluster_view.py) until the batch needs it, then its row alone is built from its chunk;
the chunks of the partitions never needed are written again as they are. A partition's current
copy is in the newest chunk that has it, unless the partition was evicted since (the document
lists such rows: `orphans`); the current copies sorted by `seq` are the bucket's order. A small
compressed document holds what is not per partition (clusters, broker logs) and, in the
bucket's order, every partition's `time_ms`: the one field that moves for every partition every
batch (the bucket moves idle partitions up to the cluster's settled time), stored apart so that
moving it is no change. A batch that touches most of a bucket saves it whole, marked `most`,
and the next decode of that blob is whole (WHOLE_ABOVE).

    format 4: MAGIC + version + tag
              + pickle((zlib(pickle(doc)), [zlib(pickle(columns)), ...], [zlib(pickle(index)), ...]))

Format 3 blobs are still read (whole; the next save writes format 4).

Format 0 is the unversioned pickle of `Bucket` objects written before this module existed; it
is migrated when its objects still load, else refused with a message (see `decode`).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import io
import itertools
import operator
import pickle
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from replmon.state.alerts import AlertBook
from replmon.state.bucket import Bucket
from replmon.state.cluster_view import ClusterView, ColdWatch
from replmon.state.monitor import MonitorConfig, PartitionWatch
from replmon.state.partition import PartitionConfig, PartitionLeader, isr_state_from_stored
from replmon.state.replica import ReplicaState
from replmon.state.root_cause import (
    BrokerRoot,
    fetcher_roots_from_book,
    roots_from_book,
)
from replmon.state.sessions import SessionTable

FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)  # and format 0, which has no header
MAGIC = b"replmon-state\x00"
COMPRESSION_LEVEL = 1  # level 1: most of the size win for a fraction of the time of level 6

# Each field an object keeps, by name. `config` (derived from the MonitorConfig and the
# partition's overrides) and `name` (topic-partition) are rebuilt, not stored; `book` and
# `followers` are encoded by their own functions. tests/state/test_codec.py fails when a class
# gains a slot that is neither here nor in DERIVED, so a new field cannot be silently dropped.
WATCH_FIELDS = (
    "cluster",
    "topic",
    "partition",
    "time_ms",
    "next_tick_ms",
    "deadline_ms",
    "reported_isr",
    "ever_in_isr",
    "last_isr",
    "exits",
    "hw_seen",
    "hw_last_advanced_ms",
    "hw_waiting_since_ms",
    "last_event_ms",
    "dirty",
    "significant",
    "last_status_ms",
    "auto_assign",
    "lag_override",
    "min_isr_override",
    "leo_seen",
    "status_sent",
)
LEADER_FIELDS = (
    "leader",
    "leader_epoch",
    "replicas",
    "adding_replicas",
    "isr",
    "maximal_isr",
    "pending",
    "pending_ids",
    "pending_retry",
    "hw",
    "leader_leo",
    "leader_epoch_start_offset",
    "leader_log_start_offset",
    "election_ms",
    "fenced",
    "shutting_down",
    "broker_epochs",
    "isr_expands",
    "isr_shrinks",
    "failed_isr_updates",
)
REPLICA_FIELDS = (
    "leo",
    "log_start_offset",
    "last_caught_up_ms",
    "last_fetch_leader_leo",
    "last_fetch_ms",
    "broker_epoch",
    "leo_update_ms",
    "read_to_log_end_ms",
    "session_id",
)
DERIVED = {"PartitionWatch": ("name", "leader", "book"), "PartitionLeader": ("config", "followers")}
# PartitionLeader.isr_state (one immutable value) is stored as these fields, read through the
# leader's read-only properties of the same names; decoding rebuilds it from them
# (partition.isr_state_from_stored: `maximal_isr` is derived, not read).
ISR_STATE_FIELDS = ("isr", "maximal_isr", "pending", "pending_ids", "pending_retry")
# The fields of a ColdWatch (state/cluster_view.py): a partition's key, its time_ms and what
# decides whether a micro-batch needs it, with which a lazy decode (`decode_chunks(lazy=True)`)
# leaves the partition's row encoded until then. Format 3 stored them for every partition in
# every write (its index).
INDEX_FIELDS = (
    "cluster",
    "topic",
    "partition",
    "time_ms",
    "deadline_ms",
    "last_event_ms",
    "dirty",
    "significant",
    "last_status_ms",
    "leader_id",
    "replicas",
)
# Format 4's index, one per chunk beside the chunk's rows, written with the chunk: the ColdWatch
# fields of each row but time_ms (stored apart, for every partition), and the row's place in the
# bucket's order (`seq`: increasing along the order; a decode sorts the current rows by it).
CHUNK_INDEX_FIELDS = (*(f for f in INDEX_FIELDS if f != "time_ms"), "seq")
_COLD_FIELDS = CHUNK_INDEX_FIELDS[:-1]  # a ColdWatch's fields as the index stores them

# Defaults for fields a blob of this format may lack (added after the format was written).
DEFAULTS: dict[str, object] = {"status_sent": None, "session_id": 0}

_WHAT_TO_DO = (
    "To start over, point spark.checkpoint_dir (default <output_dir>/_checkpoint) at a "
    "new folder and replay the input from where monitoring should begin"
)


class StateFormatError(ValueError):
    """A checkpoint this code cannot use; `reason` says why and what to do.

    Raised in a Spark worker, it reaches the driver only as text inside Spark's error (the
    worker's traceback, carried over py4j): its text therefore starts with MARKER, a stable
    token the driver finds with `refusal_in`, whatever the layout of the text around it."""

    MARKER = "[replmon-state-refused]"

    def __init__(self, reason: str) -> None:
        super().__init__(f"{self.MARKER} {reason}")
        self.reason = reason


def refusal_in(text: str) -> str | None:
    """The reason of the StateFormatError whose text is in `text` (a Spark error's message), or
    None when there is none."""
    at = text.find(StateFormatError.MARKER)
    if at < 0:
        return None
    return text[at + len(StateFormatError.MARKER) :].split("\n", 1)[0].strip()


TAG_BYTES = 8
Key = tuple[str, str, int]  # a partition: (cluster, topic, partition)
Doc = dict[str, Any]  # a document of plain values, as pickled (or unpickled: what a blob holds)


def _fields() -> dict[str, tuple[str, ...]]:
    """The field lists a blob stores (looked up when called: tests change them)."""
    return {
        "watch": WATCH_FIELDS,
        "leader": LEADER_FIELDS,
        "replica": REPLICA_FIELDS,
        "index": CHUNK_INDEX_FIELDS,
    }


_HEADER = len(MAGIC) + 2 + TAG_BYTES


def _bucket_doc(bucket: Bucket) -> Doc:
    """What a blob stores of a bucket besides its partitions."""
    return {
        "format": FORMAT_VERSION,
        "buckets": bucket.buckets,
        "bucket": bucket.bucket_id,
        "global_ms": bucket.global_ms,
        "fields": _fields(),
        "clusters": [
            (name, v.clock_ms, v.brokers, v.book.to_rows(), v.root_book.to_rows())
            for name, v in bucket.clusters.items()
        ],
        # Broker events not yet applied by every partition, the roots as of the log's start
        # (state/broker_replay.py), and how far each partition has applied the log. getattr,
        # hasattr: format 0 objects, re-encoded by _migrate_format0, predate them.
        "broker_logs": {
            name: (v.broker_log, {b: tuple(r) for b, r in v.base_roots.items()})
            for name, v in bucket.clusters.items()
            if getattr(v, "broker_log", None)
        },
        "broker_pos": list(bucket.replay.pos.items()) if hasattr(bucket, "replay") else [],
        # the fetch sessions' recent reads (state/sessions.py); absent before they existed
        "sessions": {name: v.sessions.to_rows() for name, v in bucket.clusters.items() if v.sessions.reads},
        # the compaction resolution each cluster's source states; absent before it was stated
        "resolutions": {
            name: v.compaction_resolution_ms
            for name, v in bucket.clusters.items()
            if getattr(v, "compaction_resolution_ms", None) is not None
        },
        # the compaction scheme each cluster's source states, when not "fixed"; absent before it
        "schemes": {
            name: v.compaction_scheme
            for name, v in bucket.clusters.items()
            if getattr(v, "compaction_scheme", None) not in (None, "fixed")
        },
        # each broker's current run of activity (state/cluster.py); absent before it existed
        "activity": {
            name: list(v.activity.items())
            for name, v in bucket.clusters.items()
            if getattr(v, "activity", None)
        },
    }


def _pickled(value) -> bytes:
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=5)  # protocol >= 4: sets need no class either
    # No memo: the state is a tree (nothing in it refers to itself), and without the memo's
    # back references it compresses to two thirds (a bucket of 6,250 partitions: 41 KB, not
    # 62 KB) and decodes a little faster.
    pickler.fast = True
    pickler.dump(value)
    return out.getvalue()


def _compressed(value) -> bytes:
    return zlib.compress(_pickled(value), COMPRESSION_LEVEL)


@dataclasses.dataclass(slots=True, eq=False)
class Chunks:
    """The partitions of the blob a process last wrote (or read) for a bucket, as written: what
    `encode_chunks` needs to write the next blob of that bucket with only the changed partitions
    encoded. `data`: chunk id -> compressed columns, in blob order; `index`: chunk id -> its
    compressed index (CHUNK_INDEX_FIELDS); `keys`: the partition keys of each chunk's rows;
    `live`: how many of those rows are current; `where`: partition key -> (chunk id, row) of its
    current copy; `seq`: partition key -> its place in the bucket's order; `orphans`: the dead
    rows with no newer copy (partitions evicted), which a decode must not take for current."""

    data: dict[int, bytes] = dataclasses.field(default_factory=dict)
    index: dict[int, bytes] = dataclasses.field(default_factory=dict)
    keys: dict[int, list[Key]] = dataclasses.field(default_factory=dict)
    live: dict[int, int] = dataclasses.field(default_factory=dict)
    where: dict[Key, tuple[int, int]] = dataclasses.field(default_factory=dict)
    seq: dict[Key, int] = dataclasses.field(default_factory=dict)
    orphans: set[tuple[int, int]] = dataclasses.field(default_factory=set)
    next_id: int = 0
    next_seq: int = 0
    recent: tuple[int, ...] = ()  # the chunks the last incremental write added

    def add(self, watches: list[PartitionWatch]) -> int:
        """A new chunk of these partitions (their current copies from now on; each has its
        `seq`); its id."""
        if not watches:
            return -1
        cid = self.next_id
        self.next_id += 1
        keys: list[Key] = [(w.cluster, w.topic, w.partition) for w in watches]
        self.data[cid] = _compressed(_partition_columns(watches))
        self.index[cid] = _compressed(_chunk_index(watches, list(map(self.seq.__getitem__, keys))))
        self.keys[cid] = keys
        self.live[cid] = len(keys)
        where = self.where
        for row, key in enumerate(keys):
            where[key] = (cid, row)
        return cid

    def forget(self, key: Key) -> None:
        """The partition's copy in its chunk is no longer current (a newer one follows)."""
        cid, _ = self.where.pop(key)
        self.live[cid] -= 1

    def evict(self, key: Key) -> None:
        """The partition left the bucket: its copy is dead, with no newer one."""
        at = self.where.pop(key)
        self.live[at[0]] -= 1
        self.orphans.add(at)
        del self.seq[key]

    def current(self, cid: int) -> list[Key]:
        """The keys of the chunk's rows that are current."""
        where = self.where
        return [k for row, k in enumerate(self.keys[cid]) if where.get(k) == (cid, row)]

    def drop(self, cid: int) -> list[Key]:
        """Remove a chunk; the keys of the rows in it that were still current."""
        current = self.current(cid)
        where = self.where
        for k in current:
            del where[k]
        del self.data[cid], self.index[cid], self.keys[cid], self.live[cid]
        if self.orphans:
            self.orphans = {o for o in self.orphans if o[0] != cid}
        return current


# A write of a bucket more than this share of whose partitions changed is whole, and so is a
# decode for a batch with events for at least this share of them: at busy 1.0 (every partition
# active) an incremental save took twice a whole one, moving every partition between chunks
# (bench/bucket_step.py, docs/performance.md); a lazy decode loading most partitions one by one
# costs more than decoding them all at once.
WHOLE_ABOVE = 0.5
# A blob with more chunks than this beyond those of its last whole write is written whole again
# (a chunk costs a compression stream and a pickle of its own; a few dozen are cheap).
MAX_CHUNKS = 32
# A whole write cuts the partitions into chunks of this many rows: a lazy decode that needs one
# partition decodes its chunk (a partition woken for its status refresh, a few a batch, would
# otherwise decode a whole bucket's worth of rows on every miss).
CHUNK_ROWS = 512


def encode(bucket: Bucket, tag: bytes = bytes(TAG_BYTES)) -> bytes:
    """The bucket as a versioned blob, marked with `tag` (TAG_BYTES long)."""
    return _write(bucket, tag, None)[0]


def encode_chunks(bucket: Bucket, tag: bytes = bytes(TAG_BYTES), kept: Chunks | None = None):
    """The bucket as a versioned blob, and its Chunks for the next write. With `kept`, the Chunks
    of the blob this bucket was last read from or written to, only the partitions the bucket
    names in `touched` (or new since) are encoded; `kept` is updated in place and the bucket's
    `touched` emptied. Without it, every partition is encoded."""
    out = _write(bucket, tag, kept)
    bucket.touched.clear()  # the Chunks returned are the state as of now
    return out


def _write(bucket: Bucket, tag: bytes, kept: Chunks | None) -> tuple[bytes, Chunks]:
    if len(tag) != TAG_BYTES:
        raise ValueError(f"tag must be {TAG_BYTES} bytes, got {len(tag)}")
    partitions = bucket.partitions
    touched = getattr(bucket, "touched", None)
    # most of the bucket changed (every partition active): written whole, which costs less than
    # moving most partitions between chunks one by one, and marked so that the next decode is
    # whole too (the next batch likely touches most of the bucket again)
    most = touched is not None and len(touched) > WHOLE_ABOVE * len(partitions)
    chunks = None if kept is None or touched is None or most else _changed_chunks(bucket, kept, touched)
    if chunks is None:
        _warm_all(bucket)  # all of it is written: every partition loaded first
        chunks = Chunks()
        chunks.seq = dict(zip(partitions, range(len(partitions)), strict=True))
        chunks.next_seq = len(partitions)
        values = list(partitions.values())
        for i in range(0, len(values), CHUNK_ROWS):
            chunks.add(values[i : i + CHUNK_ROWS])
    position = {cid: i for i, cid in enumerate(chunks.data)}
    doc = _bucket_doc(bucket)
    doc["partitions"] = {
        "rows": [len(keys) for keys in chunks.keys.values()],  # per chunk, its dead rows included
        "recent": [position[cid] for cid in chunks.recent if cid in position],
        "orphans": sorted((position[cid], row) for cid, row in chunks.orphans),
        # in the bucket's order (the chunks' `seq`), for every partition
        "time_ms": [w.time_ms for w in partitions.values()],
        "most": most,
    }
    stored = (
        zlib.compress(_pickled(doc), COMPRESSION_LEVEL),
        list(chunks.data.values()),
        list(chunks.index.values()),
    )
    body = _pickled(stored)
    cold = getattr(bucket, "load_cold", None)
    if isinstance(cold, _ColdRows):
        cold.written(chunks)
    return MAGIC + FORMAT_VERSION.to_bytes(2, "big") + tag + body, chunks


def _changed_chunks(bucket: Bucket, chunks: Chunks, touched: set[Key]) -> Chunks | None:
    """`chunks` updated in place to hold the bucket as it is now: the changed partitions in new
    chunks. None when the bucket is better written whole (too many chunks)."""
    partitions = bucket.partitions
    where = chunks.where
    changed = [k for k in touched if k in partitions]
    # The partitions that changed in the previous write too (busy ones) go into a chunk of
    # their own, which the next write usually leaves all dead (dropped, no copying); mixed with
    # the rest, they would leave it half dead after one write.
    recent = chunks.recent
    hot = [k for k in changed if k in where and where[k][0] in recent]
    for k in changed:
        if k in where:
            chunks.forget(k)
    # Every other partition has its current copy in a chunk, so the counts match unless
    # partitions were evicted (or one is new without a mark): then find them (a scan).
    known = set(changed)
    if len(where) + len(changed) != len(partitions):
        for k in [k for k in where if k not in partitions]:  # evicted
            chunks.evict(k)
        new = [k for k in partitions if k not in where and k not in known]
        changed += new
        known.update(new)
    if not _placed(chunks, partitions, known):
        return None
    moved: list[Key] = []
    for cid in [c for c, n in chunks.live.items() if 2 * n < len(chunks.keys[c])]:
        for k in chunks.current(cid):  # a partition left encoded is loaded while its chunk is there
            bucket.warm(k)
        moved += chunks.drop(cid)  # more than half dead: its live rows move
    if len(chunks.data) >= MAX_CHUNKS + len(partitions) // CHUNK_ROWS:
        return None
    hot_set = set(hot)
    warm = bucket.warm
    # each chunk's rows in the bucket's order (a decode then merges sorted runs)
    by_seq = chunks.seq.__getitem__
    rest = sorted([k for k in changed if k not in hot_set] + moved, key=by_seq)
    chunks.recent = (
        chunks.add([warm(k) for k in rest]),
        chunks.add([warm(k) for k in sorted(hot, key=by_seq)]),
    )
    return chunks


def _placed(chunks: Chunks, partitions: dict[Key, Any], changed: set[Key]) -> bool:
    """Give every partition the bucket added since the last write its place in the order
    (`seq`); False when one is not where that can tell (the write is then whole). A bucket
    adds at the end of its order (a dict's), and everything added since the last write is
    marked changed; so the run of changed partitions at the end of the order holds every new one
    (and a partition evicted and added again), and new places for that run, in its order, after
    every place given so far, keep the order."""
    seq = chunks.seq
    run: list[Key] = []
    for k in reversed(partitions):
        if k not in changed:
            break
        run.append(k)
    n = chunks.next_seq
    for k in reversed(run):
        seq[k] = n
        n += 1
    chunks.next_seq = n
    return all(k in seq for k in changed)


_index_values = operator.attrgetter(*_COLD_FIELDS[2:-2])  # (the key's first two: from the key)


def _chunk_index(watches: list[Any], seqs: list[int]) -> list[tuple[Any, ...]]:
    """A chunk's index (CHUNK_INDEX_FIELDS), by column in the chunk's order."""
    keys = _transpose([(w.cluster, w.topic) for w in watches], 2)
    values = _transpose(map(_index_values, watches), len(_COLD_FIELDS) - 4)
    leaders = _transpose(
        [
            (w.leader_id, w.replicas) if w.__class__ is ColdWatch else (w.leader.leader, w.leader.replicas)
            for w in watches
        ],
        2,
    )
    return [*keys, *values, *leaders, tuple(seqs)]


def _warm_all(bucket: Bucket) -> None:
    if getattr(bucket, "load_cold", None) is not None:  # (format 0 objects, re-encoded, predate it)
        bucket.warm_all()


def plain_values(bucket: Bucket) -> Doc:
    """The bucket's stored values as one document of plain values, the partitions by column in
    the bucket's order (format 2's layout): equal documents, equal states. For tests and tools."""
    _warm_all(bucket)
    return {**_bucket_doc(bucket), "partitions": _partition_columns(list(bucket.partitions.values()))}


def tag_of(blob: bytes) -> bytes | None:
    """The tag a versioned blob was written with (None for a format 0 blob or anything else)."""
    if blob[: len(MAGIC)] != MAGIC or len(blob) < _HEADER:
        return None
    return bytes(blob[_HEADER - TAG_BYTES : _HEADER])


def decode(blob: bytes, *, bucket_id: int, buckets: int, cfg: MonitorConfig) -> Bucket:
    """The bucket a blob describes, for a run with `buckets` buckets and the settings `cfg`.
    Raises StateFormatError, with what to do, for a blob this run must not use."""
    return decode_chunks(blob, bucket_id=bucket_id, buckets=buckets, cfg=cfg)[0]


def decode_chunks(
    blob: bytes,
    *,
    bucket_id: int,
    buckets: int,
    cfg: MonitorConfig,
    lazy: bool = False,
    needed: Callable[[], int] | None = None,
):
    """`decode`, and the blob's Chunks for writing the bucket's next blob with `encode_chunks`
    (None when the blob is of an older format or field list: the next write encodes it all).
    `lazy`: a format 4 blob's partitions are left encoded, each a ColdWatch in the bucket until
    the bucket loads it (state/bucket.py, `Bucket.warm`): the chunks are not even decompressed
    here, only their indexes (CHUNK_INDEX_FIELDS). `needed()`: how many partitions the caller's
    batch has events for; when that is WHOLE_ABOVE of the bucket or more, the decode is whole,
    and so is that of a blob written whole because most of it changed (the next batch likely
    changes most of it again)."""
    if blob[: len(MAGIC)] != MAGIC:
        return _migrate_format0(blob, bucket_id=bucket_id, buckets=buckets, cfg=cfg), None
    version = _readable_version(blob)
    stored: list[bytes] = []
    parts: list[Any] | None = None
    found: _Found | None = None
    try:
        if version >= 4:
            doc, stored, found, parts = _read_format4(blob, lazy, needed)
        elif version == 3:
            doc, stored = _BuiltinsOnly(io.BytesIO(blob[_HEADER:])).load()
            doc = _load(doc)
            parts = [_load(c) for c in stored]
        else:
            doc = _load(blob[_HEADER:])
    except Exception as exc:  # noqa: BLE001 - damaged bytes make zlib/pickle raise almost any type; all mean damaged
        raise StateFormatError(
            f"the checkpoint's state (bucket {bucket_id}) is damaged: {exc}. {_WHAT_TO_DO}."
        ) from None
    check_buckets(doc["buckets"], buckets)
    bucket = _bucket_from_doc(doc, bucket_id, buckets)
    fields = doc["fields"]
    chunks = None
    if found is not None:
        chunks = _add_format4_partitions(bucket, doc, stored, found, parts, cfg)
    elif version == 3:
        assert parts is not None  # (read whole)
        _add_format3_partitions(bucket, doc, parts, cfg)
    elif version == 2:
        _add_partitions(bucket, _rows_from_columns(doc["partitions"], fields), cfg)
    else:
        _add_partitions(bucket, _rows_from_format1(doc["partitions"], fields), cfg)
    return bucket, chunks


def _readable_version(blob: bytes) -> int:
    """The format version of a versioned blob; StateFormatError when this code cannot read it."""
    version = int.from_bytes(blob[len(MAGIC) : len(MAGIC) + 2], "big")
    if version not in READABLE_VERSIONS:
        raise StateFormatError(
            f"the checkpoint's state is in format {version}, and this replmon reads formats 0 "
            f"to {FORMAT_VERSION}: it was written by another (newer?) replmon version. Run the "
            f"version that wrote it, or start over. {_WHAT_TO_DO}."
        )
    return version


@dataclasses.dataclass(slots=True)
class _Found:
    """What a format 4 blob's chunk indexes say: each chunk's index by field name, the chunk and
    row of every partition's current copy (the newest chunk that has it, unless it was evicted
    since: an orphan), its place in the order, and the partitions in the bucket's order."""

    columns: list[dict[str, Any]]
    keys: list[list[Key]]  # per chunk, the key of each row
    current: dict[Key, tuple[int, int]]
    seq: dict[Key, int]
    order: list[Key]
    raw_index: list[bytes]


def _read_format4(
    blob: bytes, lazy: bool, needed: Callable[[], int] | None
) -> tuple[Doc, list[bytes], _Found, list[Any] | None]:
    """A format 4 blob's document, its chunks as stored (compressed), what their indexes say,
    and the chunks' decoded columns, or None when the decode is lazy (`decode_chunks`: a blob of
    these fields not written whole for most of it changing, for a batch that needs less than
    WHOLE_ABOVE of its partitions)."""
    meta, stored, raw_index = _BuiltinsOnly(io.BytesIO(blob[_HEADER:])).load()
    doc = _load(meta)
    where = doc["partitions"]
    columns = [dict(zip(doc["fields"]["index"], _load(ix), strict=True)) for ix in raw_index]
    if len(columns) != len(stored):
        raise ValueError(f"{len(stored)} chunks and {len(columns)} indexes")
    # every row of every chunk in blob order, and each partition's newest copy (a later chunk's
    # row replaces an earlier one), less the rows of partitions evicted since (orphans)
    chunk_keys = []
    all_keys: list[Key] = []
    all_seq: list[int] = []
    all_at: list[tuple[int, int]] = []
    for pos, c in enumerate(columns):
        keys = list(zip(c["cluster"], c["topic"], c["partition"], strict=True))
        chunk_keys.append(keys)
        all_keys += keys
        all_seq += c["seq"]
        all_at += zip(itertools.repeat(pos), range(len(keys)), strict=False)
    newest = dict(zip(all_keys, range(len(all_keys)), strict=True))
    if where["orphans"]:
        start = list(itertools.accumulate((len(k) for k in chunk_keys), initial=0))
        for pos, row in where["orphans"]:
            at = start[pos] + row
            if newest.get(all_keys[at]) == at:
                del newest[all_keys[at]]
    # in the bucket's order: each chunk's rows are in it (written so), so this merges the runs
    live = sorted(newest.values(), key=all_seq.__getitem__)
    order = list(map(all_keys.__getitem__, live))
    current = dict(zip(order, map(all_at.__getitem__, live), strict=True))
    seq = dict(zip(order, map(all_seq.__getitem__, live), strict=True))
    if len(order) != len(where["time_ms"]):
        raise ValueError(f"{len(order)} partitions and {len(where['time_ms'])} times")
    lazy = (
        lazy
        and not where["most"]
        and doc["fields"] == _fields()
        and (needed is None or needed() < WHOLE_ABOVE * len(order))
    )
    found = _Found(columns, chunk_keys, current, seq, order, raw_index)
    return doc, stored, found, None if lazy else [_load(c) for c in stored]


def _add_format4_partitions(
    bucket: Bucket, doc: Doc, stored: list[bytes], found: _Found, parts: list[Any] | None, cfg: MonitorConfig
) -> Chunks | None:
    """Put a format 4 blob's partitions in the bucket, in its order: decoded from `parts`, or
    left encoded (`parts` None: lazy, each a ColdWatch the bucket loads when needed). Returns
    the blob's Chunks, or None when its field list is another (the next save is whole)."""
    fields = doc["fields"]
    times = doc["partitions"]["time_ms"]
    at = list(map(found.current.__getitem__, found.order))
    if parts is None:
        new_cold = _builder(ColdWatch, _COLD_FIELDS)
        cold_rows = [list(zip(*(c[f] for f in _COLD_FIELDS), strict=True)) for c in found.columns]
        partitions = bucket.partitions
        for key, (pos, row), t in zip(found.order, at, times, strict=True):
            cold = partitions[key] = new_cold(cold_rows[pos][row])
            cold.time_ms = t
    else:
        rows = [list(_rows_from_columns(part, fields)) for part in parts]
        _add_partitions(bucket, (rows[pos][row] for pos, row in at), cfg, times)
    if fields != _fields():
        return None
    chunks = Chunks(next_id=len(stored))
    live = collections.Counter(map(operator.itemgetter(0), found.current.values()))
    for cid, (data, ix, keys) in enumerate(zip(stored, found.raw_index, found.keys, strict=True)):
        chunks.data[cid] = data
        chunks.index[cid] = ix
        chunks.keys[cid] = keys
        chunks.live[cid] = live[cid]
    chunks.where = found.current
    chunks.seq = found.seq
    chunks.next_seq = max(found.seq.values(), default=-1) + 1
    where = doc["partitions"]
    chunks.orphans = {(pos, row) for pos, row in where["orphans"]}
    chunks.recent = tuple(where["recent"])
    for cid in [c for c, n in chunks.live.items() if n == 0]:
        chunks.drop(cid)
    if parts is None:
        bucket.load_cold = _ColdRows(chunks, cfg)
    return chunks


def _add_format3_partitions(bucket: Bucket, doc: Doc, parts: list[Any], cfg: MonitorConfig) -> None:
    """Put a format 3 blob's partitions in the bucket (decoded whole: its Chunks are not kept,
    the next save writes format 4 whole). Format 3 stored, per partition in the bucket's order,
    its chunk and row, and its time_ms in the index (INDEX_FIELDS) or, without one, apart."""
    fields = doc["fields"]
    where = doc["partitions"]
    index = where.pop("index")
    if index is not None:
        where.update(zip(fields["index"], index, strict=True))
    rows = [list(_rows_from_columns(part, fields)) for part in parts]
    _add_partitions(
        bucket,
        (rows[c][r] for c, r in zip(where["chunk"], where["row"], strict=True)),
        cfg,
        where["time_ms"],
    )


def _load(compressed: bytes):
    return _BuiltinsOnly(io.BytesIO(zlib.decompress(compressed))).load()


def _bucket_from_doc(doc: Doc, bucket_id: int, buckets: int) -> Bucket:
    """A bucket with what the blob stores besides the partitions."""
    bucket = Bucket(bucket_id, buckets)
    bucket.global_ms = doc["global_ms"]
    for name, clock_ms, brokers, book, *root_book in doc["clusters"]:
        view = bucket.clusters[name] = ClusterView(
            clock_ms=clock_ms, brokers=brokers, book=AlertBook.from_rows(book)
        )
        if root_book:  # the open root-cause alerts; the roots are derived from them
            view.root_book = AlertBook.from_rows(root_book[0])
            view.roots = roots_from_book(view.root_book)
            # a silent broker is the cluster step's to decide now (state/cluster.py): a bucket's
            # own silent root from an older checkpoint is dropped
            for k, a in list(view.root_book.open.items()):
                if a.cause == "broker_silent":
                    del view.root_book.open[k]
            view.fetcher_roots = fetcher_roots_from_book(view.root_book)
    for view in bucket.clusters.values():
        view.base_roots = dict(view.roots)  # with no log, the roots as of its start are today's
    for name, (log, base_roots) in doc.get("broker_logs", {}).items():
        view = bucket.clusters[name]
        view.broker_log = list(log)
        view.base_roots = {b: BrokerRoot(*r) for b, r in base_roots.items()}
    bucket.replay.pos = dict(doc.get("broker_pos", ()))
    for name, runs in doc.get("activity", {}).items():
        bucket.clusters[name].activity = {b: list(run) for b, run in runs}
    for name, rows in doc.get("sessions", {}).items():
        bucket.clusters[name].sessions = SessionTable.from_rows(rows)
    for name, stated in doc.get("resolutions", {}).items():
        bucket.clusters[name].compaction_resolution_ms = stated
    for name, scheme in doc.get("schemes", {}).items():
        bucket.clusters[name].compaction_scheme = scheme
    return bucket


def _add_partitions(
    bucket: Bucket, rows: Iterable[Any], cfg: MonitorConfig, times: list[int] | None = None
) -> None:
    """The partitions of `rows` (see _rows_from_columns), in order, into the bucket; `times`:
    their time_ms, when stored apart (formats 3 and 4)."""
    build = _watch_builder(cfg)
    partitions = bucket.partitions
    for row in rows:
        watch = build(row)
        partitions[(watch.cluster, watch.topic, watch.partition)] = watch
    if times is not None:
        for watch, t in zip(partitions.values(), times, strict=True):
            watch.time_ms = t


def _watch_builder(cfg: MonitorConfig):
    """A function from a row (see _rows_from_columns) to its PartitionWatch."""
    new_watch = _builder(PartitionWatch, WATCH_FIELDS)
    new_leader = _leader_builder(LEADER_FIELDS)
    new_replica = _builder(ReplicaState, REPLICA_FIELDS)
    from_rows = AlertBook.from_rows
    configs: dict[tuple[int | None, int | None], PartitionConfig] = {}

    def build(row) -> PartitionWatch:
        watch_values, leader_values, followers, book = row
        watch = new_watch(watch_values)
        watch.name = f"{watch.topic}-{watch.partition}"
        watch.book = from_rows(book)
        overrides = (watch.lag_override, watch.min_isr_override)
        config = configs.get(overrides)
        if config is None:
            config = configs[overrides] = cfg.partition_config(*overrides)
        leader = new_leader(leader_values)
        leader.config = config
        leader.followers = {r: new_replica(values) for r, values in followers}
        watch.leader = leader
        return watch

    return build


@functools.cache
def _leader_builder(names: tuple[str, ...]) -> Callable[[Any], PartitionLeader]:
    """A function from a row of values (in the order of `names`, LEADER_FIELDS) to its
    PartitionLeader: the ISR_STATE_FIELDS become its `isr_state`, the others are set by a
    `_builder` constructor."""
    plain = tuple(n for n in names if n not in ISR_STATE_FIELDS)
    build = _builder(PartitionLeader, plain)
    plain_values = operator.itemgetter(*(names.index(n) for n in plain))
    state_values = operator.itemgetter(
        *(names.index(n) for n in ("isr", "pending", "pending_ids", "pending_retry"))
    )
    width = len(names)

    def new_leader(row: Any) -> PartitionLeader:
        if len(row) != width:
            raise ValueError(f"a leader row has {width} values, got {len(row)}")
        leader = build(plain_values(row))
        leader.isr_state = isr_state_from_stored(*state_values(row))
        return leader

    return new_leader


class _ColdRows:
    """Loads the partitions a lazy decode left encoded (`Bucket.load_cold`), each from the
    chunk that holds its current copy: a chunk is decompressed once (when its first partition
    is wanted) and only the wanted rows become objects. Follows the bucket's Chunks from write
    to write (`written`): a row left encoded stays in its chunk until the chunk goes, and the
    write loads a chunk's live rows before it drops the chunk."""

    def __init__(self, chunks: Chunks, cfg: MonitorConfig) -> None:
        self.chunks = chunks
        self.build = _watch_builder(cfg)
        self.parts: dict[int, _ChunkColumns] = {}  # chunk id -> its columns, decoded

    def __call__(self, key: Key) -> PartitionWatch:
        cid, row = self.chunks.where[key]
        part = self.parts.get(cid)
        try:
            if part is None:
                part = self.parts[cid] = _ChunkColumns(_load(self.chunks.data[cid]), _fields())
            values = part.row(row)
        except Exception as exc:  # noqa: BLE001 - as in decode: damaged bytes raise almost any type
            raise StateFormatError(f"the checkpoint's state is damaged: {exc}. {_WHAT_TO_DO}.") from None
        return self.build(values)

    def written(self, chunks: Chunks) -> None:
        """The bucket was written as `chunks`; the decompressed chunks are let go."""
        self.chunks = chunks
        self.parts = {}


_watch_values = operator.attrgetter(*WATCH_FIELDS)
_leader_values = operator.attrgetter(*LEADER_FIELDS)
_replica_values = operator.attrgetter(*REPLICA_FIELDS)


def _partition_columns(watches: list[PartitionWatch]) -> Doc:
    """Format 2: the partitions' fields by column, their followers' likewise (with how many
    each partition has and their ids), and the open alerts of the partitions that have any."""
    leaders = [w.leader for w in watches]
    counts: list[int] = []
    ids: list[int] = []
    replicas: list[tuple[Any, ...]] = []
    for p in leaders:
        followers = p.followers
        counts.append(len(followers))
        ids.extend(followers)
        replicas.extend(map(_replica_values, followers.values()))
    return {
        "count": len(watches),
        "watch": _transpose(map(_watch_values, watches), _WIDTH["watch"]),
        "leader": _transpose(map(_leader_values, leaders), _WIDTH["leader"]),
        "followers": (tuple(counts), tuple(ids), _transpose(replicas, _WIDTH["replica"])),
        "books": [(i, w.book.to_rows()) for i, w in enumerate(watches) if w.book.open],
    }


_WIDTH = {"watch": len(WATCH_FIELDS), "leader": len(LEADER_FIELDS), "replica": len(REPLICA_FIELDS)}


def _transpose(rows: Iterable[Any], width: int) -> list[tuple[Any, ...]]:
    return list(zip(*rows, strict=True)) or [()] * width


# A lazily decoded chunk builds every row at once after a batch asked for this share of them.
ALL_ROWS_AFTER = 0.1


class _ChunkColumns:
    """One chunk's columns (format 2's layout) and its rows: all of them (`all_rows`), or each
    only when asked for (`row`): a batch that needs a few partitions of a chunk of thousands
    builds (and later frees) those few rows, not all of them. A row alone costs about 1.5 times
    its share of building them all at once (a zip of the columns, in C: 9.7 against 5.9-6.7 µs
    a row), so once a batch has asked for ALL_ROWS_AFTER of a chunk's rows, all of them are
    built at once. What it buys (bench/bucket_step.py --miss, CPU per whole call, median of 3
    runs alternating with the code before it, min-max, 2026-11-28): a near-idle bucket (--busy
    0.01 --idle-every 1000) 35 ms (33-38) instead of 52 (50-73); --busy 0.1 the same, 97 ms
    (94-131) and 100 (98-125)."""

    __slots__ = ("asked", "books", "counts", "ids", "leader", "replicas", "rows", "starts", "watch")

    def __init__(self, part: Doc, fields: dict[str, tuple[str, ...]]) -> None:
        n = part["count"]
        self.watch = _columns(part["watch"], fields["watch"], WATCH_FIELDS, n)
        self.leader = _columns(part["leader"], fields["leader"], LEADER_FIELDS, n)
        self.counts, self.ids, replica_columns = part["followers"]
        self.replicas = _columns(replica_columns, fields["replica"], REPLICA_FIELDS, len(self.ids))
        self.starts: list[int] | None = None  # where each row's followers start, on first use
        self.books = dict(part["books"])
        self.asked = 0
        self.rows: list[tuple[Any, ...]] | None = None  # every row, once enough are asked for
        if len(self.counts) != n or any(len(c) != n for c in (*self.watch, *self.leader)):
            raise ValueError(f"a chunk's columns are not all {n} long")
        if sum(self.counts) != len(self.ids) or any(len(c) != len(self.ids) for c in self.replicas):
            raise ValueError(f"a chunk's follower columns are not all {len(self.ids)} long")

    def all_rows(self) -> Iterator[tuple[Any, ...]]:
        """(watch values, leader values, ((replica, values), ...), open alerts) per partition."""
        replicas = list(zip(self.ids, zip(*self.replicas, strict=True), strict=True))
        books = self.books
        start = 0
        watch, leader = zip(*self.watch, strict=True), zip(*self.leader, strict=True)
        for i, (w, p, k) in enumerate(zip(watch, leader, self.counts, strict=True)):
            yield w, p, replicas[start : start + k], books.get(i, ())
            start += k

    def row(self, i: int) -> tuple[Any, ...]:
        """Row i of `all_rows`."""
        if self.rows is not None:
            return self.rows[i]
        self.asked += 1
        if self.asked > ALL_ROWS_AFTER * len(self.counts):
            self.rows = list(self.all_rows())
            return self.rows[i]
        if self.starts is None:
            self.starts = [0, *itertools.accumulate(self.counts)]
        ids, replicas = self.ids, self.replicas
        span = range(self.starts[i], self.starts[i + 1])
        followers = [(ids[j], tuple(map(operator.itemgetter(j), replicas))) for j in span]
        at = operator.itemgetter(i)
        return tuple(map(at, self.watch)), tuple(map(at, self.leader)), followers, self.books.get(i, ())


def _rows_from_columns(part: Doc, fields: dict[str, tuple[str, ...]]) -> Iterator[tuple[Any, ...]]:
    """Format 2 -> (watch values, leader values, ((replica, values), ...), open alerts) per
    partition, each in the order of this code's field lists."""
    return _ChunkColumns(part, fields).all_rows()


def _columns(stored: list[Any], stored_names: tuple[str, ...], wanted: tuple[str, ...], n: int) -> list[Any]:
    """The stored columns in the order of `wanted`; a field the blob lacks takes its default."""
    if tuple(stored_names) == wanted:
        return stored
    position = {name: i for i, name in enumerate(stored_names)}
    _check_fields(wanted, position)
    return [stored[position[f]] if f in position else (DEFAULTS[f],) * n for f in wanted]


def _rows_from_format1(rows: list[Any], fields: dict[str, tuple[str, ...]]) -> Iterator[tuple[Any, ...]]:
    """Format 1 (a tuple per partition) -> the rows `_rows_from_columns` gives."""
    read_watch = _reader(fields["watch"], WATCH_FIELDS)
    read_leader = _reader(fields["leader"], LEADER_FIELDS)
    read_replica = _reader(fields["replica"], REPLICA_FIELDS)
    for w, p, followers, book in rows:
        yield (read_watch(w), read_leader(p), [(r, read_replica(values)) for r, values in followers], book)


def _reader(stored: tuple[str, ...], wanted: tuple[str, ...]) -> Callable[[Any], Any]:
    """A function from a stored row to the values of the fields this code wants, in order."""
    if tuple(stored) == wanted:
        return lambda row: row
    position = {name: i for i, name in enumerate(stored)}
    _check_fields(wanted, position)
    plan = [(position.get(n), DEFAULTS.get(n)) for n in wanted]
    return lambda row: [row[i] if i is not None else default for i, default in plan]


def _check_fields(wanted: tuple[str, ...], position: dict[str, int]) -> None:
    missing = [n for n in wanted if n not in position and n not in DEFAULTS]
    if missing:
        raise StateFormatError(f"the checkpoint's state lacks the field(s) {missing}. {_WHAT_TO_DO}.")


@functools.cache
def _builder(cls: type, names: tuple[str, ...]) -> Callable[[Any], Any]:
    """A function from a row of values (in the order of `names`) to a new `cls` object with
    those fields, without calling __init__. Decoding builds one per partition and replica, so
    it is the state load's inner loop: the attributes are set by one generated tuple assignment.
    What it buys: decoding a 6,250-partition bucket takes 78 ms (62-81) of CPU instead of 111
    (94-118) with a setattr per field (bench/bucket_step.py --buckets 8 --batches 6 --miss, without
    and with --plain-constructors, median of 3 runs with min-max, 2026-11-25, machine shared).
    The names come from the field lists above, never from a blob; tests/state/test_codec.py
    checks that the object built equals the setattr-per-field one on every slot."""
    if not all(n.isidentifier() for n in names):
        raise ValueError(f"not field names: {names}")
    targets = "".join(f"o.{n}, " for n in names)
    local: dict[str, Any] = {}  # apart from the globals, so the function is not in a reference cycle
    exec(
        f"def build(row):\n    o = new(cls)\n    {targets}= row\n    return o\n",
        {"new": object.__new__, "cls": cls},
        local,
    )
    return local["build"]


def check_buckets(stored: int, buckets: int) -> None:
    """Refuse a checkpoint written with another bucket count. Also run on the driver, before the
    query starts, against the count recorded beside a local checkpoint (streaming/checkpoint.py)."""
    if stored != buckets:
        raise StateFormatError(
            f"the checkpoint was written with stream.buckets = {stored}, and this run has "
            f"stream.buckets = {buckets}: partitions would hash to other buckets and lose their "
            f"state. Set stream.buckets = {stored} again to continue from this checkpoint, or "
            f"start over with the new count. {_WHAT_TO_DO}."
        )


class _BuiltinsOnly(pickle.Unpickler):
    """Loads builtin values only: a blob naming any class is not a format-1 blob."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"the state names a class ({module}.{name})")


class _Format0(pickle.Unpickler):
    """Format 0 named replmon's engine classes (and, before the replmon.* namespace, the bare
    package names); nothing else may be loaded from a checkpoint."""

    def find_class(self, module, name):
        if module.startswith("state."):
            module = "replmon." + module
        if module == "replmon.state.partition" and name == "PartitionLeader":
            return _Format0Leader
        if module.startswith("replmon.state.") or (module == "builtins" and name in ("set", "frozenset")):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"format 0 state may not name {module}.{name}")


class _Format0Leader:
    """A PartitionLeader as format 0 pickled it: the ISR state as separate fields. Encoding
    reads it as it reads a leader (by LEADER_FIELDS), and decoding builds the leader."""

    __slots__ = (*LEADER_FIELDS, *DERIVED["PartitionLeader"])


def _fill_dataclass_defaults(obj) -> None:
    """A dataclass object unpickled from format 0 lacks the fields added since: their defaults."""
    for f in dataclasses.fields(obj):
        if not hasattr(obj, f.name):
            if f.default is not dataclasses.MISSING:
                setattr(obj, f.name, f.default)
            elif f.default_factory is not dataclasses.MISSING:
                setattr(obj, f.name, f.default_factory())


def _fill_slot_defaults(obj) -> None:
    """A slotted engine object unpickled from format 0: fields added since take DEFAULTS."""
    for name in obj.__slots__:
        if not hasattr(obj, name) and name in DEFAULTS:
            setattr(obj, name, DEFAULTS[name])


def _migrate_format0(blob: bytes, *, bucket_id: int, buckets: int, cfg: MonitorConfig) -> Bucket:
    """Format 0 (a pickled Bucket, before the state had a format): read it with today's classes
    and re-read it through format 1, so that any field the old objects lack is caught here."""
    if blob[:1] != b"\x80":
        raise StateFormatError(
            f"the checkpoint's state (bucket {bucket_id}) is not a replmon "
            f"state (no format header). {_WHAT_TO_DO}."
        )
    try:
        old = _Format0(io.BytesIO(blob)).load()
        if not isinstance(old, Bucket):
            raise TypeError(f"it holds a {type(old).__name__}, not a Bucket")
        books = []
        for view in old.clusters.values():
            _fill_dataclass_defaults(view)
            books += [view.book, view.root_book]
        for watch in old.partitions.values():
            _fill_slot_defaults(watch)
            _fill_slot_defaults(watch.leader)
            for st in watch.leader.followers.values():
                _fill_slot_defaults(st)
            books.append(watch.book)
        for book in books:
            for alert in book.open.values():
                _fill_dataclass_defaults(alert)
        check_buckets(old.buckets, buckets)
        return decode(encode(old), bucket_id=bucket_id, buckets=buckets, cfg=cfg)
    except StateFormatError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure to read old pickled objects is the same refusal
        raise StateFormatError(
            f"the checkpoint's state is in format 0 (pickled engine objects, replmon before "
            f"state format 1) and can no longer be read ({type(exc).__name__}: {exc}). Run the "
            f"replmon version that wrote it to finish that stream, or start over. "
            f"{_WHAT_TO_DO}."
        ) from None
