"""The cluster step's state kept with the checkpoint (streaming/cluster_state.py): a restart
continues where the last batch left off, and a replayed batch decides what it decided the
first time, in a local folder and through Spark's Hadoop file system client (the path a
checkpoint on hdfs:// or s3a:// takes)."""

from __future__ import annotations

import json

import pytest

from replmon.streaming.cluster_state import ClusterStepRunner, HadoopFolder, LocalFolder, state_folder
from replmon.streaming.settings import monitor_config

T = 1_767_225_600_000


def activity(until: dict[int, int], start: int) -> list[dict]:
    return [
        {
            "cluster": "c",
            "bucket": 0,
            "brokers": {
                str(b): {"segments": [[T + start, T + end]], "led": 1, "replicas": 3}
                for b, end in until.items()
            },
        }
    ]


# Broker 3 stops being heard of at +10 s while brokers 1 and 2 go on: a BrokerUnavailable
# episode that the later batches decide (silence, then group_wait, then release).
BATCHES = [([], activity({1: 10_000, 2: 10_000, 3: 10_000}, 0))] + [
    ([], activity({1: 10_000 * (i + 1), 2: 10_000 * (i + 1)}, 10_000 * i)) for i in range(1, 6)
]


def decide(make_runner) -> list[list[dict]]:
    """Each batch on a runner made afresh (a restart before every batch), batch 3 run twice
    (foreachBatch replays a batch after a crash): the outputs, batch by batch."""
    out = []
    for batch_id, (alerts, act) in enumerate(BATCHES):
        out.append(make_runner().run(batch_id, alerts, act))
        if batch_id == 3:
            again = make_runner().run(batch_id, alerts, act)
            assert again == out[-1], "a replayed batch decides what it decided"
    return out


def names(out: list[list[dict]]) -> list[tuple]:
    return [(r["name"], r["status"], r.get("broker")) for batch in out for r in batch]


def test_a_restarted_runner_decides_as_one_that_ran_throughout(tmp_path):
    cfg = monitor_config()
    throughout = ClusterStepRunner(cfg, None)
    expected = [throughout.run(i, a, act) for i, (a, act) in enumerate(BATCHES)]
    assert ("BrokerUnavailable", "firing", 3) in [
        (n, s, int(b)) for n, s, b in names(expected) if b is not None
    ]
    got = decide(lambda: ClusterStepRunner(cfg, str(tmp_path / "ckpt")))
    assert got == expected
    files = sorted(p.name for p in (tmp_path / "ckpt" / "cluster-step").iterdir())
    assert files == [f"{i}.json" for i in range(len(BATCHES))]
    assert ClusterStepRunner(cfg, str(tmp_path / "ckpt")).next_batch() == len(BATCHES)


def test_a_file_uri_is_the_local_folder(tmp_path):
    folder = state_folder(f"file://{tmp_path}/ckpt")
    assert isinstance(folder, LocalFolder) and folder.folder == tmp_path / "ckpt" / "cluster-step"


@pytest.mark.spark
def test_a_remote_checkpoint_keeps_the_state_through_spark(spark, tmp_path):
    """Through Spark's Hadoop client (here its file:// file system, the same calls an hdfs://
    or s3a:// checkpoint makes): the same decisions, and the same documents, as the local
    folder."""
    cfg = monitor_config()
    uri = f"file://{tmp_path}/remote/cluster-step"

    def runner():
        r = ClusterStepRunner(cfg, None)
        r.folder = HadoopFolder(spark, uri)
        return r

    local = decide(lambda: ClusterStepRunner(cfg, str(tmp_path / "local")))
    assert decide(runner) == local
    for i in range(len(BATCHES)):
        remote_doc = json.loads((tmp_path / "remote" / "cluster-step" / f"{i}.json").read_text())
        local_doc = json.loads((tmp_path / "local" / "cluster-step" / f"{i}.json").read_text())
        assert remote_doc == local_doc
    assert runner().next_batch() == len(BATCHES)
    assert not [p for p in (tmp_path / "remote" / "cluster-step").iterdir() if p.name.endswith(".tmp")]


def test_a_runner_that_keeps_its_state_decides_as_one_that_reads_it_back(tmp_path):
    # The runner keeps the step it ran last and starts the next batch from it, instead of
    # reading its state back: what it outputs, saves and gives as restart-gate verdicts must be
    # what a runner made afresh for every batch (which reads the state back) gives. The batches
    # come from a bucket: a partition whose follower 3 stops fetching (it lags, leaves the ISR),
    # with the statuses that feed the restart gate.
    from replmon.state.bucket import Bucket
    from tests.state.test_monitor import T0, L, meta, steady

    cfg = monitor_config(replica_lag_time_max_ms=L)
    events = [meta(T0), *steady(T0 + 100, T0 + 40_000, stop=T0 + 8_000)]
    bucket, batches = Bucket(0, 1), []
    for s in range(0, 40, 4):
        alerts: list = []
        bucket.process([e for e in events if T0 + s * 1000 <= e[1] < T0 + (s + 4) * 1000], cfg, alerts, [])
        bucket.advance(cfg, alerts)
        parts: list = []
        reps: list = []
        bucket.statuses(cfg, parts, reps)
        batches.append((alerts, bucket.activity_reports(), (parts, reps)))
    assert any(r["name"] == "ReplicaOutOfSync" for a, _, _ in batches for r in a)

    kept = ClusterStepRunner(cfg, str(tmp_path / "kept"))
    for batch_id, (alerts, act, statuses) in enumerate(batches):
        afresh = ClusterStepRunner(cfg, str(tmp_path / "afresh"))
        assert kept.run(batch_id, alerts, act, statuses=statuses) == afresh.run(
            batch_id, alerts, act, statuses=statuses
        )
        assert kept.verdicts == afresh.verdicts
        name = f"{batch_id}.json"
        assert (tmp_path / "kept" / "cluster-step" / name).read_bytes() == (
            tmp_path / "afresh" / "cluster-step" / name
        ).read_bytes()
    # a batch run again (a replay after a crash) starts from the state before it, not its own
    again = kept.run(len(batches) - 1, *batches[-1][:2], statuses=batches[-1][2])
    assert again == ClusterStepRunner(cfg, str(tmp_path / "afresh")).run(
        len(batches) - 1, *batches[-1][:2], statuses=batches[-1][2]
    )
    assert any(v["reasons"] for v in kept.verdicts)
