"""The bucket count a run uses with a checkpoint (streaming/checkpoint.py): unset, it is the count
the checkpoint was written with, so a changed default never strands an existing checkpoint."""
from __future__ import annotations

import json

from replmon.streaming.checkpoint import LEGACY_DEFAULT_BUCKETS, MARKER, with_checkpoint_buckets
from replmon.streaming.settings import Settings


def _settings(checkpoint, **stream) -> Settings:
    return Settings(spark={"checkpoint_dir": str(checkpoint)}, stream=stream)


def test_a_new_checkpoint_records_the_runs_count(tmp_path):
    default = Settings().stream.buckets
    got = with_checkpoint_buckets(_settings(tmp_path / "ck"))
    assert got.stream.buckets == default
    assert json.loads((tmp_path / "ck" / MARKER).read_text()) == {"buckets": default}


def test_an_unset_count_follows_the_marker(tmp_path):
    with_checkpoint_buckets(_settings(tmp_path, buckets=5))
    assert with_checkpoint_buckets(_settings(tmp_path)).stream.buckets == 5


def test_a_checkpoint_from_before_the_marker_was_written_with_the_old_default(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("v1\n")
    got = with_checkpoint_buckets(_settings(tmp_path))
    assert got.stream.buckets == LEGACY_DEFAULT_BUCKETS != Settings().stream.buckets
    assert json.loads((tmp_path / MARKER).read_text()) == {"buckets": LEGACY_DEFAULT_BUCKETS}


def test_a_set_count_is_kept_and_the_marker_is_not_rewritten(tmp_path):
    # a mismatch is refused by the state format, with what to do (test_checkpoint_format.py)
    with_checkpoint_buckets(_settings(tmp_path, buckets=4))
    assert with_checkpoint_buckets(_settings(tmp_path, buckets=8)).stream.buckets == 8
    assert json.loads((tmp_path / MARKER).read_text()) == {"buckets": 4}
    (tmp_path / MARKER).unlink()
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("v1\n")
    assert with_checkpoint_buckets(_settings(tmp_path, buckets=8)).stream.buckets == 8
    assert not (tmp_path / MARKER).exists()   # unknown what the old run used: nothing recorded


def test_a_remote_checkpoint_is_left_to_the_settings(tmp_path):
    settings = Settings(spark={"checkpoint_dir": "s3a://bucket/replmon"})
    assert with_checkpoint_buckets(settings) is settings
