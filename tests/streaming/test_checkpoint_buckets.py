"""The bucket count a run uses with a checkpoint (streaming/checkpoint.py): unset, it is the count
the checkpoint was written with, so a changed default never strands an existing checkpoint; and
each bucket's grouping key: spread evenly over Spark's shuffle partitions for a new checkpoint,
recorded, and the bucket number itself for state written before keys were recorded."""

from __future__ import annotations

import json

import pytest

from replmon.state.codec import StateFormatError
from replmon.streaming.checkpoint import (
    LEGACY_DEFAULT_BUCKETS,
    MARKER,
    balanced_keys,
    bucket_keys,
    buckets_per_task,
    spark_hash_int,
    spark_partition,
    with_checkpoint_buckets,
)
from replmon.streaming.settings import Settings


def _settings(checkpoint, **stream) -> Settings:
    return Settings(spark={"checkpoint_dir": str(checkpoint)}, stream=stream)


def test_a_new_checkpoint_records_the_runs_count_and_balanced_keys(tmp_path):
    default = Settings().stream.buckets
    settings = with_checkpoint_buckets(_settings(tmp_path / "ck"))
    assert settings.stream.buckets == default
    keys = bucket_keys(settings.checkpoint_dir, default, 2)
    assert json.loads((tmp_path / "ck" / MARKER).read_text()) == {"buckets": default, "bucket_keys": keys}
    assert [spark_partition(k, 2) for k in keys] == [b % 2 for b in range(default)]
    assert len(set(keys)) == default
    # the recorded keys stand, whatever the shuffle partitions of a later run
    assert bucket_keys(settings.checkpoint_dir, default, 4) == keys


def test_an_unset_count_follows_the_marker(tmp_path):
    bucket_keys(str(tmp_path), 5, 2)
    assert with_checkpoint_buckets(_settings(tmp_path)).stream.buckets == 5


def test_a_checkpoint_from_before_the_marker_was_written_with_the_old_default(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("v1\n")
    got = with_checkpoint_buckets(_settings(tmp_path))
    assert got.stream.buckets == LEGACY_DEFAULT_BUCKETS != Settings().stream.buckets
    # its state is keyed by bucket number
    assert bucket_keys(str(tmp_path), LEGACY_DEFAULT_BUCKETS, 2) == list(range(LEGACY_DEFAULT_BUCKETS))
    assert not (tmp_path / MARKER).exists()  # nothing to record: both follow from its offsets


def _committed(folder) -> None:
    """As if Spark had committed a batch to the checkpoint in `folder`."""
    (folder / "offsets").mkdir()
    (folder / "offsets" / "0").write_text("v1\n")


def test_a_set_count_other_than_the_recorded_one_is_refused_before_the_query_starts(tmp_path):
    bucket_keys(str(tmp_path), 4, 2)
    _committed(tmp_path)
    with pytest.raises(StateFormatError) as refused:
        with_checkpoint_buckets(_settings(tmp_path, buckets=8))
    assert "stream.buckets = 4, and this run has stream.buckets = 8" in refused.value.reason
    assert with_checkpoint_buckets(_settings(tmp_path, buckets=4)).stream.buckets == 4


def test_replmon_run_refuses_it_with_exit_2_and_what_to_do_without_starting_spark(
    tmp_path, monkeypatch, capsys
):
    from replmon.streaming import cli, session

    def no_spark(*args, **kwargs):
        raise AssertionError("the refusal must come before any Spark session")

    monkeypatch.setattr(session, "build_session", no_spark)
    checkpoint = tmp_path / "ck"
    bucket_keys(str(checkpoint), 2, 2)
    _committed(checkpoint)
    config = tmp_path / "replmon.toml"
    config.write_text(f'[stream]\nbuckets = 3\n[spark]\ncheckpoint_dir = "{checkpoint}"\n')
    (tmp_path / "in").mkdir()
    args = ["run", "--config", str(config), "--input", str(tmp_path / "in"), "--once", "--no-timeline"]
    assert cli.main([*args, "--output", str(tmp_path / "out")]) == 2
    printed = capsys.readouterr().err
    said = f"replmon run: cannot continue from the checkpoint {checkpoint}: the checkpoint was written"
    assert said in printed
    assert "Set stream.buckets = 2 again" in printed and StateFormatError.MARKER not in printed


def test_a_set_count_is_kept_and_the_marker_is_not_rewritten(tmp_path):
    # a checkpoint with no state yet: nothing to refuse; without a marker a mismatch is refused by
    # the state format at the first batch, with what to do (test_checkpoint_format.py)
    keys = bucket_keys(str(tmp_path), 4, 2)
    assert with_checkpoint_buckets(_settings(tmp_path, buckets=8)).stream.buckets == 8
    assert bucket_keys(str(tmp_path), 8, 2) == list(range(8))
    assert json.loads((tmp_path / MARKER).read_text()) == {"buckets": 4, "bucket_keys": keys}
    (tmp_path / MARKER).unlink()
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("v1\n")
    assert with_checkpoint_buckets(_settings(tmp_path, buckets=8)).stream.buckets == 8
    assert not (tmp_path / MARKER).exists()  # unknown what the old run used: nothing recorded


def test_a_remote_checkpoint_is_left_to_the_settings(tmp_path):
    settings = Settings(spark={"checkpoint_dir": "s3a://bucket/replmon"})
    assert with_checkpoint_buckets(settings) is settings
    assert bucket_keys("s3a://bucket/replmon", 16, 2) == list(range(16))


@pytest.mark.parametrize("buckets,partitions", [(16, 2), (16, 4), (7, 3), (64, 8), (3, 5)])
def test_balanced_keys_put_the_same_number_of_buckets_in_each_partition(buckets, partitions):
    keys = balanced_keys(buckets, partitions)
    assert len(set(keys)) == buckets
    assert [spark_partition(k, partitions) for k in keys] == [b % partitions for b in range(buckets)]


@pytest.mark.parametrize(
    "keys,partitions,most",
    [
        (balanced_keys(16, 2), 2, 8),  # a new checkpoint: even
        (list(range(16)), 2, 9),  # keyed by bucket number: 7 and 9
        (balanced_keys(7, 3), 3, 3),
        (list(range(3)), 5, 1),
    ],
)
def test_buckets_per_task_is_the_most_buckets_one_shuffle_partition_gets(keys, partitions, most):
    assert buckets_per_task(keys, partitions) == most


# Spark's hash of an int (SQL `hash(CAST(k AS INT))`: Murmur3_x86_32 with seed 42, which its
# hash partitioning uses), as pyspark 4.3.0 printed it. The Spark test below checks the shuffle
# placement itself; this one keeps checkpoint.spark_hash_int honest where no Spark runs.
SPARK_HASHES = {
    0: 933211791,
    1: -559580957,
    2: 1765031574,
    7: 1079293707,
    42: 29417773,
    -1: -1604776387,
    1000003: 45861451,
    2**31 - 1: 133916647,
    -(2**31): 723455942,
}


def test_the_hash_computed_here_is_sparks_own():
    assert {k: spark_hash_int(k) for k in SPARK_HASHES} == SPARK_HASHES


@pytest.mark.spark
def test_the_partition_computed_here_is_the_one_spark_shuffles_a_key_to(spark):
    from pyspark.sql import functions as F

    for partitions in (2, 3, 5):
        rows = (
            spark.range(300)
            .select(F.col("id").cast("int").alias("k"))
            .repartition(partitions, "k")
            .select("k", F.spark_partition_id().alias("p"))
            .collect()
        )
        assert len(rows) == 300
        assert {r.k: r.p for r in rows} == {k: spark_partition(k, partitions) for k in range(300)}
