"""The alert book (state/alerts.py): a transition's record is complete when it is made, and
the decisions a later check acts on are recorded as they are made."""

import pytest

from replmon.state.alerts import AlertBook, Emitted, OutOfSync, alert_record, derived

REPLICA = ("c1", "t", 0, 3)  # (cluster, topic, partition, replica)
BROKER = ("c1", None, None, 2)


def test_a_record_is_made_complete_and_returned():
    book, out = AlertBook(), []
    rec = book.fire(
        out,
        "ReplicaFetcherStalled",
        "c1/fetcher/2/1/0",
        100,
        BROKER,
        "",
        None,
        "fetcher_stalled",
        leader=1,
        fetcher_id=0,
        partitions=["t-0", "t-1"],
        counts={},
    )
    assert out == [rec]
    # the extra fields come after the common ones, in the order given (the JSON is the output)
    assert list(rec)[-5:] == ["silenced_by", "leader", "fetcher_id", "partitions", "counts"]
    assert (rec["broker"], rec["replica"], rec["leader"], rec["partitions"]) == (2, None, 1, ["t-0", "t-1"])
    closed = book.update(
        out, "ReplicaFetcherStalled", "c1/fetcher/2/1/0", False, 200, BROKER, "", leader=1, fetcher_id=0
    )
    assert closed is out[1] and closed["status"] == "resolved" and closed["started_ms"] == 100
    assert list(closed)[-2:] == ["leader", "fetcher_id"]
    assert book.update(out, "ReplicaFetcherStalled", "c1/fetcher/2/1/0", False, 300, BROKER, "") is None
    assert len(out) == 2, "no transition, no record"


@pytest.mark.parametrize(
    "name, caused_by, recorded",
    [
        ("ReplicaOutOfSync", None, True),  # out of sync, nothing known explains it: the fetcher check starts
        ("ReplicaOutOfSync", "a1", False),  # a broker outage explains it already
        ("IsrExitImminent", None, False),  # not out of sync yet
    ],
)
def test_a_follower_out_of_sync_with_no_root_is_recorded_as_it_fires(name, caused_by, recorded):
    out = Emitted()
    AlertBook().fire(out, name, "c1/t-0/3", 500, REPLICA, "", caused_by, "lag")
    assert len(out) == 1
    assert out.take_out_of_sync() == ([OutOfSync("c1", "t", 0, 3, 500)] if recorded else [])
    assert out.take_out_of_sync() == [], "each decision is taken once"


def test_a_plain_list_takes_the_records_and_no_decisions():
    out: list = []
    AlertBook().fire(out, "ReplicaOutOfSync", "c1/t-0/3", 500, REPLICA, "", None, "lag")
    assert [r["name"] for r in out] == ["ReplicaOutOfSync"]


def test_derived_copies_and_leaves_the_record_as_it_was():
    rec = alert_record("a1", "ReplicaOutOfSync", "firing", "c1/t-0/3", REPLICA, 0, 0, "", None, "lag")
    copy = derived(rec, caused_by="r1", root_cause=False)
    assert (rec["caused_by"], rec["root_cause"]) == (None, True)
    assert (copy["caused_by"], copy["root_cause"]) == ("r1", False)
    assert list(copy) == list(rec), "same fields, same order"
    with pytest.raises(KeyError, match="not alert record fields"):
        derived(rec, causedby="r1")
