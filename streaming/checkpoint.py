"""What replmon records beside Spark's checkpoint: the bucket count its state was written with,
and the grouping key of each bucket.

The state format (state/codec.py) refuses a bucket count other than the one it was written with
(partitions would hash to other buckets and lose their state). A run that does not set
`stream.buckets` therefore takes the count from the checkpoint it continues: from the marker
file this module writes, or, for a checkpoint written before the marker existed, the default
of those versions (64). A run that sets another count than the marker's is refused before its
query starts; without a marker, the state format refuses it at the first batch.

Keys: Spark sends a group to shuffle partition pmod(murmur3(key), partitions), so buckets keyed
0..n-1 land unevenly (16 buckets on 2 partitions: 7 and 9; the task with 9 sets the batch's
pace). A new checkpoint keys bucket b with the smallest unused int that Spark sends to
partition b mod partitions, and records the keys: state is keyed by them, so they never change
for that checkpoint. Checkpoints written before keys were recorded, and remote ones, keep
key = bucket id.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

from replmon.state.codec import check_buckets

MARKER = "replmon.json"
# stream.buckets' default before the marker existed: what an unmarked checkpoint was written with
# unless its run set the count.
LEGACY_DEFAULT_BUCKETS = 64


def local_path(checkpoint_dir: str) -> Path | None:
    """The checkpoint folder on this machine, or None for a remote one (hdfs://, s3a://, ...)."""
    url = urlparse(checkpoint_dir)
    if url.scheme == "file":
        return Path(url.path)
    return Path(checkpoint_dir) if url.scheme == "" else None


def _marker(folder: Path) -> dict:
    marker = folder / MARKER
    return json.loads(marker.read_text()) if marker.is_file() else {}


def _has_state(folder: Path) -> bool:
    """Spark has committed a batch to this checkpoint."""
    offsets = folder / "offsets"
    return offsets.is_dir() and any(offsets.iterdir())


# Spark's Murmur3 again, so that the driver can key the buckets evenly before the query starts.
# What it buys: 16 buckets keyed 0..15 land 7 and 9 on 2 shuffle partitions, so the slower task
# does 9/16 of the stateful step, not 8/16; at 100k partitions, 300k-event batches
# (docs/performance.md: 2.6 s of the Python step's CPU per batch over 2 tasks) that is about 160 ms of a
# 3.9 s batch, an estimate from those figures, not a bench run of its own. Its assumption (this
# is the hash Spark shuffles an int key by) is checked against Spark's own hash values without
# Spark and against Spark's shuffle placement with it (tests/streaming/test_checkpoint_buckets.py).
def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's Murmur3Hash of one int column (Murmur3_x86_32.hashInt), as a signed int."""
    k1 = (value & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF
    k1 = _rotl(k1, 15) * 0x1B873593 & 0xFFFFFFFF
    h1 = _rotl(seed ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & 0xFFFFFFFF
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & 0xFFFFFFFF
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def spark_partition(key: int, partitions: int) -> int:
    """The shuffle partition Spark's hash partitioning gives an int grouping key."""
    return spark_hash_int(key) % partitions


def buckets_per_task(keys: list[int], partitions: int) -> int:
    """The most buckets one shuffle partition gets: what one task, and so one Python worker at a
    time, handles per batch (the stateful step keeps at most this many decoded per worker)."""
    return max(Counter(spark_partition(k, partitions) for k in keys).values())


def balanced_keys(buckets: int, partitions: int) -> list[int]:
    """A grouping key per bucket such that bucket b lands in shuffle partition b % partitions."""
    keys: list[int] = []
    candidate = 0
    by_partition: dict[int, list[int]] = {}
    for b in range(buckets):
        want = b % partitions
        while not by_partition.get(want):
            by_partition.setdefault(spark_partition(candidate, partitions), []).append(candidate)
            candidate += 1
        keys.append(by_partition[want].pop(0))
    return keys


def bucket_keys(checkpoint_dir: str, buckets: int, partitions: int) -> list[int]:
    """The grouping key of each bucket for the query with this checkpoint (see the module's
    docstring); a new local checkpoint gets balanced keys, recorded in its marker."""
    identity = list(range(buckets))
    folder = local_path(checkpoint_dir)
    if folder is None:
        return identity
    recorded = _marker(folder).get("bucket_keys")
    if recorded is not None:
        # another count is refused by the state format at the first batch, with what to do
        return [int(k) for k in recorded] if len(recorded) == buckets else identity
    if _has_state(folder):
        return identity  # state written before keys were recorded is keyed by bucket id
    keys = balanced_keys(buckets, partitions)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).write_text(json.dumps({"buckets": buckets, "bucket_keys": keys}) + "\n")
    return keys


def written_buckets(folder: Path) -> int | None:
    """The bucket count the checkpoint in `folder` was written with, None for a new checkpoint."""
    recorded = _marker(folder).get("buckets")
    if recorded is not None:
        return int(recorded)
    return LEGACY_DEFAULT_BUCKETS if _has_state(folder) else None


def with_checkpoint_buckets(settings):
    """`settings` with the bucket count of the checkpoint it continues when the run did not set
    one. A run that sets another count than the one recorded beside a checkpoint with state is
    refused here, before the query starts (StateFormatError, with what to do); one whose
    checkpoint has no record (remote, or written before the record existed) is refused by the
    state format at its first batch. Remote checkpoints are left as they are (set stream.buckets
    there: docs/design.md)."""
    folder = local_path(settings.checkpoint_dir)
    if folder is None:
        return settings
    if "buckets" in settings.stream.model_fields_set:
        recorded = _marker(folder).get("buckets")
        if recorded is not None and _has_state(folder):
            check_buckets(int(recorded), settings.stream.buckets)
        return settings
    written = written_buckets(folder)
    if written is None:
        return settings
    stream = settings.stream.model_copy(update={"buckets": written})
    return settings.model_copy(update={"stream": stream})
