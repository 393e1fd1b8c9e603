"""The cluster clock the router hands the sink: each cluster's newest activity in the batch, so
that a batch whose statuses all waited for stream.status_refresh_ms still moves the cluster
series (sinks/redis_sink.py)."""

from __future__ import annotations

from replmon.streaming.bridge import OutputRouter, newest_activity


def report(cluster, bucket, segments_by_broker):
    return {
        "cluster": cluster,
        "bucket": bucket,
        "brokers": {str(b): {"segments": s} for b, s in segments_by_broker.items()},
    }


def test_newest_activity_is_the_latest_run_end_per_cluster():
    activity = [
        report("c1", 0, {1: [[100, 900]], 2: [[50, 1200]]}),
        report("c1", 1, {3: [[10, 20], [400, 1100]]}),
        report("c2", 0, {1: [[7, 70]]}),
        report("c3", 0, {}),  # no segment: no clock
    ]
    assert newest_activity(activity) == {"c1": 1200, "c2": 70}
    assert newest_activity([]) == {}


class Sink:
    def __init__(self):
        self.calls = []

    def write_batch(
        self,
        batch_id,
        alerts,
        partition_status,
        replica_status,
        quarantine,
        clocks=None,
        series_points=None,
        verdicts=None,
    ):
        self.calls.append((batch_id, len(alerts) + len(partition_status) + len(replica_status), clocks))


def test_a_batch_without_records_reaches_the_sink_with_its_clock_only_when_there_is_one():
    sink = Sink()
    router = OutputRouter(None, sink)
    empty = {"alerts": [], "partition_status": [], "replica_status": [], "quarantine": []}
    router._output(3, dict(empty), {"c1": 1200})
    router._output(4, dict(empty), {})
    assert sink.calls == [(3, 0, {"c1": 1200})]
