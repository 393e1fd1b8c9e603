"""Alert texts (state/texts.py): every template renders, and durations never read as within a
limit they exceed."""

import string

import pytest

from replmon.state import texts


@pytest.mark.parametrize(
    "elapsed, limit, expected",
    [
        (10001, 10000, "10.001 s, over the 10 s limit"),  # 10.0 s would read as within the limit
        (12345, 10000, "12.3 s, over the 10 s limit"),  # clearly over: one decimal is enough
        (10000, 10000, "10.0 s of the 10 s limit"),  # at the limit is not over (Kafka: > L)
        (5000, 10000, "5.0 s of the 10 s limit"),
        (30049, 30000, "30.049 s, over the 30 s limit"),  # rounds to 30.0
    ],
)
def test_against_limit(elapsed, limit, expected):
    assert texts.fmt_against_limit(elapsed, limit) == expected


@pytest.mark.parametrize("table", [texts.OPEN, texts.CLOSE])
def test_every_template_names_only_known_facts(table):
    known = {
        "replica",
        "partition",
        "lag",
        "lag_messages",
        "state",
        "fetch",
        "since",
        "leader",
        "leader_epoch",
        "isr",
        "replicas",
        "isr_size",
        "replica_count",
        "hw",
        "leader_leo",
        "min_isr",
        "out",
        "holders",
        "stalled",
        "exits",
        "window",
        "silent",
        "cluster",
        "gap",
        "broker",
        "counts",
        "silent_since",
        "fetcher_id",
        "n",
        "partitions",
        "query",  # MonitorLagging (streaming/heartbeat.py)
        "limit",
    }
    for key, template in table.items():
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
        assert fields <= known, f"{key}: unknown facts {fields - known}"


def test_close_text_falls_back_to_the_generic_role_change():
    assert (
        texts.close_text("ReplicaOutOfSync", "became_leader", replica=2, partition="t-0")
        == "replica 2 became the leader of t-0"
    )


def test_counts_in_a_fixed_order():
    assert (
        texts.fmt_counts({"offline": 1, "under_replicated": 5})
        == "5 partitions under-replicated, 0 under min ISR, 1 offline, 0 leaders lost"
    )
