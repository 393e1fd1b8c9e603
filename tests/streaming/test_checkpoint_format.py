"""A checkpoint written before the state had a format (format 0: pickled engine objects) is
restored by the real query and goes on as the old code did; a checkpoint the format refuses
(another stream.buckets) stops `replmon run` with a message that says what to do.

tests/streaming/data/checkpoint_format0/README.md says how the checkpoint was made (the code
on main before issue 13, 2 buckets, the first 2,600 events of paused_and_slow).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.streaming.helpers import run_once

pytestmark = pytest.mark.spark

FORMAT0 = Path(__file__).parent / "data" / "checkpoint_format0"


def _key(alert: dict) -> tuple:
    return (alert["alert_id"], alert["status"], alert["ts"], alert["name"], alert["subject"])


def test_a_format0_checkpoint_is_restored_and_continues_as_the_old_code_did(spark, tmp_path):
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(FORMAT0 / "checkpoint", checkpoint)
    inp = tmp_path / "in"
    inp.mkdir()
    shutil.copy(FORMAT0 / "events-2.jsonl", inp / "part-00001.jsonl")
    out = run_once(
        spark, inp, tmp_path / "out", stream={"buckets": 2}, spark={"checkpoint_dir": str(checkpoint)}
    )
    expected = [
        json.loads(line) for line in (FORMAT0 / "alerts-after-restore.jsonl").read_text().splitlines()
    ]
    assert expected, "the fixture holds the old code's alerts"
    # The ids are digests of (name, subject, episode start): the restored run resolves the very
    # episodes the old run opened before the checkpoint.
    assert sorted(map(_key, out["alerts"])) == sorted(map(_key, expected))
    assert out["quarantine"] == []

    # The checkpoint is now in the current format with 2 buckets; a run with 3 is refused, by the CLI,
    # with what to do, and nothing is written for the new input.
    from replmon.streaming import cli

    shutil.copy(FORMAT0 / "events-2.jsonl", inp / "part-00002.jsonl")
    config = tmp_path / "replmon.toml"
    config.write_text(f'[stream]\nbuckets = 3\n[spark]\ncheckpoint_dir = "{checkpoint}"\n')
    err_file = tmp_path / "stderr.txt"
    with open(err_file, "w") as err, pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stderr", err)
        rc = cli.main(
            [
                "run",
                "--config",
                str(config),
                "--input",
                str(inp),
                "--once",
                "--output",
                str(tmp_path / "out2"),
                "--no-timeline",
            ]
        )
    printed = err_file.read_text()
    assert rc == 2
    assert f"cannot continue from the checkpoint {checkpoint}" in printed
    assert "stream.buckets = 2, and this run has stream.buckets = 3" in printed
    assert "Set stream.buckets = 2 again" in printed
    assert not list((tmp_path / "out2").glob("alerts/*.jsonl"))
