"""Each scheduled fault shows in the truth the way Kafka's rules say it must.

docs/kafka-rules.md §2-§5, §11."""

from __future__ import annotations

import dataclasses
from itertools import pairwise

import pytest

from replmon.streaming.simulator import scenarios
from replmon.streaming.simulator.model import simulate

from .runs import run

L = 10000
SEEDS = (0, 1, 2)


def records(truth, kind, **match):
    return [r for r in truth if r["kind"] == kind and all(r.get(k) == v for k, v in match.items())]


def fault(truth, name):
    (record,) = records(truth, "fault", fault=name)
    return record


def fetches(events, topic, partition, replica=None):
    return [
        e
        for e in events
        if e["type"] == "fetch"
        and e["topic"] == topic
        and e["partition"] == partition
        and (replica is None or e["replica"] == replica)
    ]


def metadata(events, topic, partition):
    return [
        e for e in events if e["type"] == "metadata" and e["topic"] == topic and e["partition"] == partition
    ]


@pytest.mark.parametrize("seed", SEEDS)
def test_paused_follower_goes_out_of_sync_is_removed_and_rejoins(seed):
    events, truth = run("demo", seed)
    f = fault(truth, "paused_follower")
    key = dict(topic=f["topic"], partition=f["partition"])
    (episode,) = records(truth, "out_of_sync", **key, replica=f["replica"])
    # lcu is its last fetch at the LEO, at most one long poll before the pause: out of sync at lcu + L + 1.
    assert f["start_ms"] + L + 1 - 600 <= episode["start_ms"] <= f["start_ms"] + L + 1
    assert f["end_ms"] < episode["end_ms"] < f["end_ms"] + 2000
    mine = fetches(events, **key, replica=f["replica"])
    assert not [e for e in mine if f["start_ms"] < e["ts"] < f["end_ms"]]
    assert episode["start_ms"] - L - 1 in {e["ts"] for e in mine}  # lcu is the time of one of its fetches
    shrink, expand = records(truth, "isr_change", **key)[:2]  # (the broker crash comes later)
    assert (
        shrink["reason"] == "shrink" and f["replica"] in shrink["old"] and f["replica"] not in shrink["new"]
    )
    # the first isr-expiration run after it is out of sync (they run every L/2)
    assert episode["start_ms"] <= shrink["ts"] <= episode["start_ms"] + L // 2
    assert expand["reason"] == "expand" and expand["new"] == shrink["old"] and expand["ts"] >= f["end_ms"]


@pytest.mark.parametrize("seed", SEEDS)
def test_slow_follower_keeps_fetching_but_goes_out_of_sync(seed):
    events, truth = run("demo", seed)
    f = fault(truth, "slow_follower")
    key = dict(topic=f["topic"], partition=f["partition"])
    (episode,) = [
        r for r in records(truth, "out_of_sync", **key, replica=f["replica"]) if r["start_ms"] < f["end_ms"]
    ]
    assert f["start_ms"] + L - 600 <= episode["start_ms"] <= f["start_ms"] + L + 600
    assert episode["end_ms"] >= f["end_ms"]
    mine = fetches(events, **key, replica=f["replica"])
    assert episode["start_ms"] - L - 1 in {e["ts"] for e in mine}  # lcu is the time of one of its fetches
    during = [e for e in mine if f["start_ms"] < e["ts"] < f["end_ms"]]
    assert max(b["ts"] - a["ts"] for a, b in pairwise(during)) < 600  # slow, not stuck
    assert during[-1]["leader_leo"] - during[-1]["fetch_offset"] > 5000  # ever further behind
    assert any(
        r["reason"] == "shrink" and f["replica"] not in r["new"] for r in records(truth, "isr_change", **key)
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_bursts_far_above_4000_messages_cause_no_isr_change(seed):
    events, truth = run("bursty", seed)
    assert records(truth, "isr_change") == [] and records(truth, "out_of_sync") == []
    assert max(e["leader_leo"] - e["fetch_offset"] for e in events if e["type"] == "fetch") > 10 * 4000


def test_the_same_bursts_churn_the_isr_under_0_8s_message_rule():
    """Why the time rule exists (KAFKA-1546): under 0.8's replica.lag.max.messages the bursts
    shrink the ISR."""
    _, truth = simulate(dataclasses.replace(scenarios.bursty(), rule_set="v0_8"), seed=0)
    assert [r for r in records(truth, "isr_change") if r["reason"] == "shrink"]


@pytest.mark.parametrize("seed", SEEDS)
def test_bursty_partition_of_the_demo_has_no_leader_initiated_change(seed):
    _, truth = run("demo", seed)
    f = fault(truth, "bursty_producer")
    changes = records(truth, "isr_change", topic=f["topic"], partition=f["partition"])
    assert not [r for r in changes if r["reason"] == "shrink"]
    assert not [
        r
        for r in records(truth, "out_of_sync", topic=f["topic"], partition=f["partition"])
        if r["start_ms"] < f["end_ms"]
    ]


@pytest.mark.parametrize("seed", SEEDS)
def test_bootstrapping_replica_catches_up_joins_the_isr_and_the_reassignment_completes(seed):
    events, truth = run("demo", seed)
    f = fault(truth, "bootstrap_replica")
    key = dict(topic=f["topic"], partition=f["partition"])
    new, old = f["replica"], f["remove"]
    adding = [m for m in metadata(events, **key) if m.get("adding_replicas") == [new]]
    assert adding and new in adding[0]["replicas"] and old in adding[0]["replicas"]
    assert new not in adding[0]["isr"]
    mine = fetches(events, **key, replica=new)
    assert mine[0]["fetch_offset"] == 0 and mine[0]["ts"] >= adding[0]["ts"]
    join = next(r for r in records(truth, "isr_change", **key) if new in r["new"] and new not in r["old"])
    assert join["reason"] == "expand"
    at_join = next(e for e in mine if e["ts"] == join["ts"])
    assert at_join["fetch_offset"] >= at_join["leader_hw"]  # joins once its LEO reaches the HW
    # it copied the log at its throttle: no faster than `throughput` messages/s (plus one fetch)
    copied = at_join["fetch_offset"] - mine[0]["fetch_offset"]
    assert copied <= f["throughput"] * (at_join["ts"] - mine[0]["ts"]) / 1000 + f["throughput"] / 10
    done = next(r for r in records(truth, "isr_change", **key) if r["reason"] == "reassignment")
    assert done["ts"] >= join["ts"] and old not in done["new"] and new in done["new"]
    final = next(m for m in metadata(events, **key) if m["ts"] >= done["ts"] and old not in m["replicas"])
    assert final["ts"] <= done["ts"] + 200 and "adding_replicas" not in final
    assert not [e for e in fetches(events, **key, replica=old) if e["ts"] > final["ts"]]
    (episode,) = records(truth, "out_of_sync", **key, replica=new)  # a new replica starts with lcu 0
    assert episode["start_ms"] == adding[0]["ts"] and episode["end_ms"] <= join["ts"]


@pytest.mark.parametrize("seed", SEEDS)
def test_broker_crash_fences_it_shrinks_isrs_and_elects_new_leaders(seed):
    events, truth = run("demo", seed)
    f = fault(truth, "broker_crash")
    broker = f["broker"]
    (fenced,) = [
        e for e in events if e["type"] == "broker" and e["broker"] == broker and e["state"] == "fenced"
    ]
    assert f["start_ms"] + 9000 <= fenced["ts"] <= f["start_ms"] + 9000 + 200  # broker.session.timeout.ms
    led = {
        (m["topic"], m["partition"])
        for m in events
        if m["type"] == "metadata" and m["ts"] == events[0]["ts"] and m["leader"] == broker
    }
    assert led
    for topic, partition in led:
        (election,) = records(truth, "isr_change", topic=topic, partition=partition, reason="election")
        assert election["ts"] == fenced["ts"] and election["old_leader"] == broker
        assert (
            election["leader"] != broker and election["leader_epoch"] == 1 and broker not in election["new"]
        )
        assert any(
            m["ts"] == fenced["ts"] and m["leader_epoch"] == 1 and m["leader"] == election["leader"]
            for m in metadata(events, topic, partition)
        )
        mine = fetches(events, topic, partition)
        assert not [e for e in mine if f["start_ms"] < e["ts"] < fenced["ts"]]  # leaderless meanwhile
        assert all(e["leader_epoch"] == 1 for e in mine if e["ts"] > fenced["ts"])
    for r in records(truth, "isr_change", reason="fenced"):
        assert r["ts"] == fenced["ts"] and set(r["old"]) - set(r["new"]) == {broker}
        assert (r["topic"], r["partition"]) not in led and r["leader_epoch"] == 0  # no epoch bump on shrink
    assert len(records(truth, "isr_change", reason="fenced")) + len(led) == sum(
        1 for m in events if m["type"] == "metadata" and m["ts"] == fenced["ts"]
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_crashed_broker_comes_back_truncates_and_rejoins_every_isr(seed):
    events, truth = run("demo", seed)
    f = fault(truth, "broker_crash")
    broker = f["broker"]
    states = [e for e in events if e["type"] == "broker" and e["broker"] == broker]
    assert [s["state"] for s in states] == ["running", "fenced", "running"]
    assert states[2]["broker_epoch"] > states[0]["broker_epoch"] and states[2]["ts"] >= f["end_ms"]
    diverging = [e for e in events if e["type"] == "fetch" and "diverging_epoch" in e]
    assert diverging and all(e["replica"] == broker and e["diverging_epoch"] == 0 for e in diverging)
    for final in records(truth, "partition"):
        assert final["isr"] == sorted(final["replicas"]), final
    episodes = [r for r in records(truth, "out_of_sync", replica=broker) if r["start_ms"] > f["start_ms"]]
    assert len(episodes) == len(records(truth, "partition"))  # it was a replica of every partition
    assert all(states[2]["ts"] < r["end_ms"] for r in episodes)


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_every_isr_change_is_reported_by_metadata_soon_after(name):
    events, truth = run(name)
    for r in records(truth, "isr_change"):
        assert any(
            r["ts"] <= m["ts"] <= r["ts"] + 200
            and m["isr"] == r["new"]
            and m["leader"] == r["leader"]
            and m["leader_epoch"] == r["leader_epoch"]
            for m in metadata(events, r["topic"], r["partition"])
        ), r


def test_steady_cluster_has_an_empty_truth():
    _, truth = run("steady")
    assert (
        not records(truth, "isr_change") and not records(truth, "out_of_sync") and not records(truth, "fault")
    )
    for hw in records(truth, "hw"):
        values = [v for _, v in hw["points"]]
        assert values == sorted(values) and values[-1] > 0
