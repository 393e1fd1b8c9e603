"""BrokerReplay on its own: where a new partition starts in its cluster's broker log, and what
a trim folds (the entries every partition has applied) and keeps."""

from replmon.state.broker_replay import BrokerReplay
from replmon.state.cluster_view import ClusterView
from replmon.state.partition import PartitionConfig, PartitionLeader

A, B = ("c1", "t", 0), ("c1", "t", 1)


def _log() -> ClusterView:
    # broker 1 fenced at 100 (epoch 5), running again at 200 (epoch 6)
    return ClusterView(broker_log=[(100, 1, "fenced", 5), (200, 1, "running", 6)])


def _leader() -> PartitionLeader:
    return PartitionLeader(
        config=PartitionConfig(),
        now_ms=0,
        leader=2,
        leader_epoch=0,
        replicas=(1, 2),
        isr=(1, 2),
        leader_leo=0,
        hw=0,
    )


def test_a_new_partition_starts_after_the_entries_up_to_its_time():
    view, replay = _log(), BrokerReplay()
    replay.start(A, _leader(), view, 150)  # after the fence, before the return
    replay.start(B, _leader(), view, 50)  # before both: nothing applied, no entry kept
    assert replay.pos == {A: 1}
    assert replay.applied(B) == 0


def test_a_trim_folds_what_every_partition_applied_and_shifts_the_rest():
    view, replay = _log(), BrokerReplay()
    replay.pos = {A: 1, B: 2}
    replay.trim({A: None, B: None}, {"c1": view})
    # the fence (applied by both) is now the broker's state as of the log's start, and its root
    assert view.brokers == {1: ("fenced", 5)}
    assert set(view.base_roots) == {1}
    assert view.broker_log == [(200, 1, "running", 6)]
    assert replay.pos == {B: 1}  # A applied all that is left: 0, not stored
