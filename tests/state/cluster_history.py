"""A cluster step driven so that every part of its state holds something (the input of
tests/state/test_cluster_facts.py). Uses only the step's public interface, so that the same
input runs on an older replmon too (how tests/state/data/cluster_format1.json was written:
run `write_format1` with that version's Python and `tests` on the path)."""

from __future__ import annotations

import json
import sys

from tests.state.test_cluster import CFG, T, act, alert

# Times are offsets from T (silence after 3 s, group_wait 5 s, slack 1 s); the step decides up
# to +29 s (broker 1's activity to +30 s, less the slack).
ROS_3 = alert("ReplicaOutOfSync", 14_000, replica=3, leader=1)  # claimed by broker 3's silence
ROS_5 = alert("ReplicaOutOfSync", 12_000, partition=1, replica=5, leader=1)  # a lag of its own: a group
ROS_2 = alert("ReplicaOutOfSync", 27_000, partition=2, replica=2, leader=1, cause="controller")  # still held


def share(broker: int, at: int, cause: str, aid: str) -> dict:
    """A bucket's share of a BrokerUnavailable: the controller's word on `broker`."""
    rec = alert("BrokerUnavailable", at, topic=None, replica=None, cause=cause, severity="critical", aid=aid)
    rec.update(subject=f"c/broker/{broker}", broker=broker, partition=None, leader=None)
    return rec


def partition_status(partition: int, isr: list[int]) -> dict:
    return {
        "cluster": "c",
        "topic": "t",
        "partition": partition,
        "ts": T + 29_000,
        "replicas": [1, 2, 3],
        "isr": isr,
        "reported_isr": None,
        "min_insync_replicas": 2,
        "replica_lag_time_max_ms": 30_000,
        "leader": 1,
    }


def replica_status(partition: int, replica: int) -> dict:
    return {
        "cluster": "c",
        "topic": "t",
        "partition": partition,
        "replica": replica,
        "ts": T + 29_000,
        "lag_messages": 12,
        "caught_up": False,
        "last_caught_up_ms": T + 20_000,
        "state": "stuck",
    }


FIRST = (
    [
        ROS_5,
        ROS_3,
        alert(
            "UnderReplicated", 14_000, leader=1, caused_by=ROS_3["alert_id"], brokers=[3], cause="replicas"
        ),
        share(4, 15_000, "broker_shutting_down", "share-4"),  # a controlled shutdown
        share(7, 60_000, "broker_fenced", "share-7"),  # fenced after the step's horizon: pending
        ROS_2,  # the controller took broker 2 out of an ISR: a controller exit
    ],
    [
        act(0, {1: [(0, 30_000)], 2: [(0, 30_000)], 4: [(0, 30_000)], 5: [(0, 30_000)], 7: [(0, 30_000)]}),
        act(1, {3: [(0, 10_000)], 6: [(0, 8_000), (20_000, 30_000)]}),  # 3 silent; 6 silent, then back
    ],
    ([partition_status(0, [1, 2]), partition_status(1, [1, 2, 3])], [replica_status(0, 3)]),
)
LATER = (
    [alert("ReplicaOutOfSync", 35_000, replica=3, leader=1, status="resolved", started=14_000)],
    [act(0, {b: [(30_000, 45_000)] for b in (1, 2, 4, 5, 7)}), act(1, {3: [(40_000, 45_000)]})],
)


def driven(step_cls, cfg=CFG):
    """A step after FIRST, and its output."""
    step = step_cls(cfg)
    alerts, activity, statuses = FIRST
    out = step.step(json.loads(json.dumps(alerts)), activity, statuses=statuses)
    return step, out


def write_format1(path: str) -> None:
    """The document this replmon writes after FIRST, and what it decides of LATER from it."""
    from replmon.state.cluster import ClusterStep

    step, _ = driven(ClusterStep)
    doc = step.to_doc()
    again = ClusterStep.from_doc(CFG, json.loads(json.dumps(doc)))
    later = again.step(json.loads(json.dumps(LATER[0])), LATER[1])
    later += again.step([], [], flush=True)
    with open(path, "w") as f:
        json.dump(
            {"doc": doc, "later": later, "verdicts": again.restart_verdicts()}, f, indent=1, sort_keys=True
        )
        f.write("\n")


if __name__ == "__main__":
    write_format1(sys.argv[1])
