"""The brokers each partition record depends on, and a partition's roots (state/alert_roots.py)."""

import pytest

from replmon.state.alert_roots import roots_here, with_brokers
from replmon.state.alerts import alert_record
from replmon.state.fetcher import FetcherRoot, fetcher_key
from replmon.state.monitor import PartitionWatch
from replmon.state.root_cause import BrokerRoot

from .helpers import T, make


def record(name, replica=None):
    subject = "c/t-0" if replica is None else f"c/t-0/{replica}"
    return alert_record("id", name, "firing", subject, ("c", "t", 0, replica), T, T, "text")


# Partition 1 leads replicas (1, 2, 3, 4); 3 and 4 are out of the ISR, 4 is being added.
@pytest.mark.parametrize(
    "name, replica, brokers, why",
    [
        ("ReplicaOutOfSync", 3, [3], "a replica alert depends on its replica"),
        ("UnderReplicated", None, [3], "the replicas missing from the ISR, not one being added"),
        ("HighWatermarkStalled", None, [2], "the HW holders"),
        ("OfflinePartition", None, [1, 2, 3, 4], "every replica"),
        ("TelemetryMissing", None, [1], "the leader, whose events stopped"),
    ],
)
def test_each_record_names_the_brokers_it_depends_on(name, replica, brokers, why):
    p = make(replicas=(1, 2, 3, 4), isr=(1, 2), adding_replicas=(4,))
    (rec,) = with_brokers(p, [record(name, replica)], holders=(2,))
    assert (rec["leader"], rec["replicas"], rec["brokers"]) == (1, [1, 2, 3, 4], brokers), why


def test_records_are_new_ones_with_the_fields_added_last():
    p = make(isr=(1, 2))
    emitted = [record("ReplicaOutOfSync", 3), record("UnderReplicated")]
    before = [dict(r) for r in emitted]
    out = with_brokers(p, emitted, holders=())
    assert [dict(r) for r in emitted] == before  # what was emitted is not changed
    assert [list(r)[-3:] for r in out] == [["leader", "replicas", "brokers"]] * 2
    assert [list(r)[:-3] for r in out] == [list(r) for r in before]


def test_without_a_known_leader_telemetry_names_no_broker():
    p = make()
    p.leader = -1
    (rec,) = with_brokers(p, [record("TelemetryMissing")], holders=())
    assert (rec["leader"], rec["brokers"]) == (-1, [])


def test_a_partition_sees_its_replicas_outages_and_its_followers_stalled_fetchers():
    watch = PartitionWatch("c", "t", 0, make(replicas=(1, 2, 3, 4)), T)
    down, stalled, elsewhere = BrokerRoot("b3", "fenced", T), FetcherRoot("f2", T), FetcherRoot("f9", T)
    roots = {
        3: down,
        fetcher_key(2, 1, 0): stalled,  # follower 2's fetcher from leader 1 (one fetcher: id 0)
        fetcher_key(3, 1, 0): FetcherRoot("f3", T),  # 3's broker is down: that explains it first
        fetcher_key(4, 2, 0): elsewhere,  # 4's fetcher from another leader
    }
    assert roots_here(watch, roots, num_replica_fetchers=1) == {3: down, 2: stalled}


def test_broker_outages_alone_are_taken_as_they_are():
    watch = PartitionWatch("c", "t", 0, make(), T)
    roots = {3: BrokerRoot("b3", "fenced", T), 7: BrokerRoot("b7", "shutting_down", T)}
    assert roots_here(watch, roots, num_replica_fetchers=1) == roots
