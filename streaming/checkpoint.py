"""What replmon records beside Spark's checkpoint: the bucket count its state was written with.

The state format (state/codec.py) refuses a bucket count other than the one it was written with
(partitions would hash to other buckets and lose their state). A run that does not set
`stream.buckets` therefore takes the count from the checkpoint it continues: from the marker
file this module writes, or, for a checkpoint written before the marker existed, the default
of those versions (64). A run that sets it keeps it, and the state format refuses a mismatch.
"""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

MARKER = "replmon.json"
# stream.buckets' default before the marker existed: what an unmarked checkpoint was written with
# unless its run set the count.
LEGACY_DEFAULT_BUCKETS = 64


def local_path(checkpoint_dir: str) -> Path | None:
    """The checkpoint folder on this machine, or None for a remote one (hdfs://, s3a://, ...)."""
    scheme = urlparse(checkpoint_dir).scheme
    if scheme in ("", "file"):
        return Path(urlparse(checkpoint_dir).path if scheme == "file" else checkpoint_dir)
    return None


def written_buckets(folder: Path) -> int | None:
    """The bucket count the checkpoint in `folder` was written with, None for a new checkpoint."""
    marker = folder / MARKER
    if marker.is_file():
        return int(json.loads(marker.read_text())["buckets"])
    offsets = folder / "offsets"
    if offsets.is_dir() and any(offsets.iterdir()):
        return LEGACY_DEFAULT_BUCKETS
    return None


def with_checkpoint_buckets(settings):
    """`settings` with the bucket count of the checkpoint it continues when the run did not set
    one; records the count in the checkpoint folder. Remote checkpoints are left as they are
    (set stream.buckets there: docs/design.md)."""
    folder = local_path(settings.checkpoint_dir)
    if folder is None:
        return settings
    written = written_buckets(folder)
    if written is not None and "buckets" not in settings.stream.model_fields_set:
        stream = settings.stream.model_copy(update={"buckets": written})
        settings = settings.model_copy(update={"stream": stream})
    if written is None or not (folder / MARKER).is_file():
        if written is None or written == settings.stream.buckets:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / MARKER).write_text(json.dumps({"buckets": settings.stream.buckets}) + "\n")
    return settings
