"""The rolling-restart gate (state/restart_gate.py): what stopping one broker now would do.

RF 3, min.insync.replicas 2, L = 30 s unless a row says otherwise."""

import json
import random

import pytest

from replmon.state.restart_gate import (
    NOT_SAFE,
    SAFE,
    UNKNOWN,
    WATCHED_ALERTS,
    GateConfig,
    GateFacts,
    PartitionView,
    brokers_of,
    effective_isr,
    from_doc,
    indexed_verdict,
    observe,
    stop_outcome,
    to_doc,
    verdict,
)

L = 30_000
NOW = 1_000_000
SHARE = 0.5
CFG = GateConfig(lag_share=SHARE)


def view(
    isr=(1, 2, 3), replicas=(1, 2, 3), min_isr=2, behind=None, stalled=(), reassigning=False, leader=1
) -> PartitionView:
    return PartitionView(
        NOW, tuple(replicas), tuple(isr), min_isr, L, dict(behind or {}), set(stalled), reassigning, leader
    )


@pytest.mark.parametrize(
    "v, expected",
    [
        pytest.param(view(), [1, 2, 3], id="every listed follower caught up: the listed ISR"),
        pytest.param(
            view(behind={2: NOW - 14_000}), [1, 2, 3], id="2 behind for 14 s, under half of L: still counts"
        ),
        pytest.param(view(behind={2: NOW - 15_000}), [1, 2, 3], id="exactly share x L is not past it (>)"),
        pytest.param(
            view(behind={2: NOW - 15_001}),
            [1, 3],
            id="2 behind 15.001 s, past half of L: out before Kafka drops it",
        ),
        pytest.param(view(stalled={3}), [1, 2], id="3 not fetching: out however recently it was caught up"),
        pytest.param(
            view(leader=1, stalled={1}, behind={1: 0}),
            [1, 2, 3],
            id="1 was a stuck follower before it took over: as the leader it is in its own ISR",
        ),
        pytest.param(
            view(isr=(1, 3), behind={2: 0}),
            [1, 3],
            id="2 not listed (Kafka shrank it): not in, whatever its lag",
        ),
    ],
)
def test_effective_isr(v, expected):
    assert effective_isr(v, NOW, SHARE) == expected


@pytest.mark.parametrize(
    "v, broker, expected",
    [
        pytest.param(view(), 1, "at_min_isr", id="healthy RF3/min2: stopping one leaves 2, at min ISR"),
        pytest.param(view(min_isr=1), 1, None, id="min ISR 1: 2 left is above it, nothing to say"),
        pytest.param(
            view(isr=(1, 3)), 1, "under_min_isr", id="2 already out: stopping 1 leaves 3 alone, 1 < 2"
        ),
        pytest.param(
            view(isr=(1, 3)), 2, "self_out_of_sync", id="stopping 2, already out, removes no ISR member"
        ),
        pytest.param(
            view(behind={2: NOW - 20_000}),
            3,
            "under_min_isr",
            id="2 listed but 20 s behind: stopping 3 leaves 1 only",
        ),
        pytest.param(
            view(isr=(1,), min_isr=1), 1, "offline", id="1 is the only ISR member: its stop takes it offline"
        ),
        pytest.param(
            view(isr=(1, 2), min_isr=1, stalled={2}),
            1,
            "offline",
            id="2 listed but stalled: 1 is the only effective one",
        ),
        pytest.param(view(replicas=(1, 2, 3)), 4, None, id="broker 4 holds no replica of it"),
    ],
)
def test_stop_outcome(v, broker, expected):
    assert stop_outcome(v, broker, NOW, SHARE) == expected


def test_a_partition_with_nobody_behind_has_the_outcome_of_the_rule_at_any_time():
    # verdict() skips the clock for a partition none of whose followers is behind or stalled
    # (the common case, ~4x faster at 25k partitions): the same outcome as stop_outcome's, for
    # every shape of ISR, min ISR and replica set, leader up or down, any time
    import itertools

    from replmon.state.restart_gate import _clean_outcome

    shapes = [(1, 2, 3), (1, 2, 3, 4), (2, 3), (1,)]
    for replicas, min_isr, down, now in itertools.product(
        shapes[:2], (1, 2, 3, 4), (False, True), (NOW, 10 * NOW)
    ):
        for k in range(len(replicas) + 1):
            for isr in itertools.combinations(replicas, k):
                v = view(isr=isr, replicas=replicas, min_isr=min_isr, leader=isr[0] if isr else -1)
                for broker in replicas:
                    assert _clean_outcome(v, broker) == stop_outcome(v, broker, now, SHARE, down), (v, broker)


def facts_of(**views) -> GateFacts:
    facts = GateFacts()
    facts.partitions = dict(views)
    return facts


def test_healthy_cluster_every_broker_safe_at_min_isr():
    facts = facts_of(**{"orders-0": view(), "orders-1": view()})
    for broker in (1, 2, 3):
        v = verdict(facts, broker, NOW, {}, CFG)
        # at min ISR is what a rolling restart of RF3/min2 always does: told, never blocking
        assert v["verdict"] == SAFE, v
        assert v["reasons"]["at_min_isr"]["count"] == 2
        assert v["reasons"]["at_min_isr"]["blocks"] is False


def test_a_shrunk_broker_makes_its_partners_not_safe_and_itself_safe():
    facts = facts_of(**{f"orders-{p}": view(isr=(1, 3)) for p in range(3)})
    v1 = verdict(facts, 1, NOW, {2: ("broker_silent", "ep2")}, CFG)
    assert v1["verdict"] == NOT_SAFE
    assert v1["reasons"]["under_min_isr"]["examples"] == ["orders-0", "orders-1", "orders-2"]
    assert v1["reasons"]["brokers_unavailable"]["examples"] == ["2 (broker_silent)"]
    v2 = verdict(facts, 2, NOW, {2: ("broker_silent", "ep2")}, CFG)
    # its own outage and its own out-of-sync replicas do not block stopping it
    assert v2["verdict"] == SAFE, v2
    assert v2["reasons"]["self_out_of_sync"]["count"] == 3
    assert v2["reasons"]["self_unavailable"]["examples"] == ["2 (broker_silent)"]


def test_a_lagging_listed_follower_is_named_in_its_partners_reasons():
    facts = facts_of(**{"orders-0": view(behind={2: NOW - 16_200}), "orders-1": view()})
    v = verdict(facts, 3, NOW, {}, CFG)
    assert v["verdict"] == NOT_SAFE
    assert v["reasons"]["under_min_isr"]["examples"] == ["orders-0 (2 lagging 16.2 s)"]
    assert v["reasons"]["followers_out"]["examples"] == ["orders-0/2 (lagging)"]


@pytest.mark.parametrize(
    "alert, blocks_broker_1",
    [
        # another broker's replica out of sync: the next stop may be one too many
        (["ReplicaOutOfSync", 2, "c/orders-0/2", None], True),
        # broker 1's own replica out of sync: stopping it removes no in-sync replica
        (["ReplicaOutOfSync", 1, "c/orders-0/1", None], False),
        # writes already refused somewhere: no restart on top of that
        (["UnderMinIsr", None, "c/orders-0", None], True),
        (["OfflinePartition", None, "c/orders-0", None], True),
    ],
)
def test_open_alerts_anywhere_block(alert, blocks_broker_1):
    facts = facts_of(**{"orders-0": view()})
    facts.open_alerts = {"a1": alert}
    assert (verdict(facts, 1, NOW, {}, CFG)["verdict"] == NOT_SAFE) is blocks_broker_1


def test_a_paused_leader_is_not_safe_to_stop_for_its_partners_but_its_own_stop_is():
    """Broker 2 leads orders-0 and is paused: its followers fetch nothing (stalled), and Kafka
    still lists them. The controller elects from the listed ISR, so they are not 'out'; the
    alerts its outage explains (its followers' ReplicaOutOfSync) do not block stopping it."""
    facts = facts_of(**{"orders-0": view(leader=2, stalled={1, 3})})
    facts.open_alerts = {"a": ["ReplicaOutOfSync", 3, "c/orders-0/3", "ep2"]}
    down = {2: ("broker_silent", "ep2")}
    own = verdict(facts, 2, NOW, down, CFG)
    assert own["verdict"] == SAFE, own
    assert "offline" not in own["reasons"] and own["reasons"]["at_min_isr"]["examples"] == ["orders-0"]
    partner = verdict(facts, 1, NOW, down, CFG)
    assert partner["verdict"] == NOT_SAFE
    assert set(partner["reasons"]) >= {"brokers_unavailable", "replicas_out_of_sync"}


def test_a_reassignment_anywhere_blocks():
    facts = facts_of(**{"orders-0": view(), "other-0": view(replicas=(4, 5, 6), reassigning=True)})
    v = verdict(facts, 1, NOW, {}, CFG)
    assert v["verdict"] == NOT_SAFE
    assert v["reasons"]["reassignment"]["examples"] == ["other-0"]


def test_nothing_seen_is_unknown_never_safe():
    assert verdict(GateFacts(), 1, NOW, {}, CFG)["verdict"] == UNKNOWN


def test_examples_are_capped_but_counts_are_whole():
    facts = facts_of(**{f"t-{p:02d}": view(isr=(1, 3)) for p in range(25)})
    r = verdict(facts, 1, NOW, {}, CFG)["reasons"]["under_min_isr"]
    assert r["count"] == 25 and len(r["examples"]) == 10 and r["examples"][0] == "t-00"


def status(p=0, ts=NOW, isr=(1, 2, 3), reported=None, **kw):
    return {
        "cluster": "c",
        "topic": "orders",
        "partition": p,
        "ts": ts,
        "replicas": [1, 2, 3],
        "isr": list(isr),
        "reported_isr": reported,
        "min_insync_replicas": 2,
        "replica_lag_time_max_ms": L,
        **kw,
    }


def replica(r, ts=NOW, caught_up=True, lcu=NOW, state="caught_up", cause=None, lag_messages=0):
    return {
        "lag_messages": lag_messages,
        "cluster": "c",
        "topic": "orders",
        "partition": 0,
        "replica": r,
        "ts": ts,
        "caught_up": caught_up,
        "last_caught_up_ms": lcu,
        "state": state,
        "out_of_isr_cause": cause,
    }


def test_observe_folds_statuses_and_never_rolls_back():
    facts = GateFacts()
    observe(
        facts,
        [status(isr=(1, 2, 3), reported=[1, 2, 3])],
        [replica(2, caught_up=False, lcu=NOW - 20_000)],
        [],
    )
    v = facts.partitions["orders-0"]
    assert v.isr == (1, 2, 3) and v.behind == {2: NOW - 20_000}
    # Kafka's listed ISR (the metadata's) wins over the derived one while both are known
    observe(facts, [status(ts=NOW + 1000, isr=(1, 2, 3), reported=[1, 3])], [], [])
    assert facts.partitions["orders-0"].isr == (1, 3)
    assert facts.partitions["orders-0"].behind == {2: NOW - 20_000}, "a follower with no new status stays"
    observe(facts, [status(ts=NOW, isr=(1, 2, 3))], [], [])  # a replayed older status
    assert facts.partitions["orders-0"].isr == (1, 3)
    observe(facts, [], [replica(2, ts=NOW + 2000), replica(3, ts=NOW + 2000, state="stuck")], [])
    assert facts.partitions["orders-0"].behind == {} and facts.partitions["orders-0"].stalled == {3}
    # Kafka's isCaughtUp holds for L after the last catch-up: 100 messages behind for 4 s is
    # still caught_up, yet behind the leader's LEO (slow, past alerts.caught_up_grace_ms), and its 4 s count
    observe(
        facts,
        [],
        [replica(2, ts=NOW + 3000, caught_up=True, lcu=NOW - 1000, lag_messages=100, state="slow")],
        [],
    )
    assert facts.partitions["orders-0"].behind == {2: NOW - 1000}
    # 5 messages behind, caught up 500 ms ago: the engine's caught_up, which its partition's
    # next status will say it no longer is
    observe(facts, [], [replica(2, ts=NOW + 4000, caught_up=True, lcu=NOW + 3500, lag_messages=5)], [])
    assert facts.partitions["orders-0"].behind == {}


def test_observe_tracks_watched_alerts_until_resolved():
    facts = GateFacts()
    firing = {
        "alert_id": "x",
        "name": "UnderMinIsr",
        "status": "firing",
        "replica": None,
        "subject": "c/orders-0",
    }
    observe(facts, [], [], [firing, {**firing, "alert_id": "y", "name": "UnderReplicated"}])
    assert facts.open_alerts == {"x": ["UnderMinIsr", None, "c/orders-0", None]}
    observe(facts, [], [], [{**firing, "status": "resolved"}])
    assert facts.open_alerts == {}


def test_the_view_survives_its_document():
    facts = facts_of(**{"orders-0": view(isr=(1, 3), behind={2: 5}, stalled={2}, reassigning=True)})
    facts.open_alerts = {"x": ["UnderMinIsr", None, "c/orders-0", "ep2"]}
    again = from_doc(to_doc(facts))
    assert again == facts
    assert from_doc(None) == GateFacts()


def test_the_cluster_step_keeps_the_view_and_gives_a_verdict_per_broker():
    from replmon.state.cluster import ClusterConfig, ClusterStep

    cfg = ClusterConfig(silent_after_ms=3000, group_wait_ms=5000, slack_ms=1000, lag_share=SHARE)
    activity = [
        {
            "cluster": "c",
            "bucket": 0,
            "brokers": {str(b): {"segments": [[NOW - 500, NOW]]} for b in (1, 2, 3)},
        }
    ]
    step = ClusterStep(cfg)
    step.step([], activity, statuses=([status(reported=[1, 3])], []))
    # the state goes through its document between batches, as the bridge keeps it
    again = ClusterStep.from_doc(cfg, step.to_doc())
    verdicts = {v["broker"]: v for v in again.restart_verdicts()}
    assert sorted(verdicts) == [1, 2, 3]
    assert verdicts[1]["verdict"] == NOT_SAFE and verdicts[1]["clock_ms"] == NOW
    assert verdicts[1]["reasons"]["under_min_isr"]["examples"] == ["orders-0"]
    assert verdicts[2]["verdict"] == SAFE and "self_out_of_sync" in verdicts[2]["reasons"]
    assert verdicts[1]["cluster"] == "c"


@pytest.mark.parametrize("seed", range(4))
def test_the_indexed_verdict_and_document_are_those_of_a_scan_of_every_partition(seed):
    """The cluster step asks `indexed_verdict`, which looks only at partitions someone is behind
    or stalled in, and counts the others as `observe` changes them. Over random batches of
    statuses (ISRs shrinking and growing, followers falling behind, stalling and catching up,
    reassignments, outages, open alerts), and through a save and load, it says exactly what
    `verdict` says by looking at every partition, and the document's rows are every view's."""
    rng = random.Random(seed)
    brokers = (1, 2, 3, 4, 5)
    replicas = {p: rng.sample(brokers, 3) for p in range(60)}
    facts = GateFacts()
    for batch in range(30):
        now = NOW + batch * 4000
        parts, followers = [], []
        for p in rng.sample(sorted(replicas), rng.randint(0, 25)):
            reps = replicas[p]
            isr = [b for b in reps if rng.random() < 0.8]
            parts.append(
                status(
                    p,
                    ts=now,
                    isr=isr or reps[:1],
                    replicas=reps,
                    leader=reps[0],
                    min_insync_replicas=rng.choice((1, 2, 2, 3)),
                )
            )
        for p in rng.sample(sorted(replicas), rng.randint(0, 20)):
            for b in replicas[p][1:]:
                if rng.random() < 0.5:
                    behind = rng.random() < 0.4
                    followers.append(
                        {
                            **replica(
                                b,
                                ts=now,
                                caught_up=not behind,
                                lcu=now - rng.randint(0, 3 * L),
                                state="stuck" if rng.random() < 0.1 else "caught_up",
                                cause="reassignment" if rng.random() < 0.05 else None,
                                lag_messages=rng.choice((0, 0, 5)),
                            ),
                            "partition": p,
                        }
                    )
        alerts = [
            {
                "alert_id": f"a{rng.randint(0, 6)}",
                "name": rng.choice((*WATCHED_ALERTS, "UnderReplicated")),
                "replica": rng.choice(brokers),
                "subject": f"c/orders-{rng.randint(0, 59)}",
                "status": rng.choice(("firing", "resolved")),
                "caused_by": rng.choice((None, "ep1")),
            }
            for _ in range(rng.randint(0, 2))
        ]
        observe(facts, parts, followers, alerts)
        if batch % 7 == 6:  # through its document, as a restarted query reads it
            facts = from_doc(json.loads(json.dumps(to_doc(facts))))
        down = dict.fromkeys(rng.sample(brokers, rng.choice((0, 0, 1))), ("fenced", "ep1"))
        for b in brokers:
            assert indexed_verdict(facts, b, now, down, CFG) == verdict(facts, b, now, down, CFG), (batch, b)
        assert brokers_of(facts) == {b for v in facts.partitions.values() for b in v.replicas}
        rows = json.loads(to_doc(facts)["partitions"])
        assert [r[0] for r in rows] == list(facts.partitions)
        assert from_doc({"partitions": rows, "open_alerts": {}}).partitions == facts.partitions


def test_a_busy_healthy_partition_stays_in_the_effective_isr_between_its_statuses():
    """A busy partition's followers fetch 60 ms after each append, so at the end of each batch
    the leader is 10 messages ahead: caught up by every rule, but `lag_messages` 10 in the status
    that goes out when its health is first known. It stays healthy, so no status follows for the
    minute (the refresh is 5 min away); its followers must not age into 'lagging' meanwhile."""
    from replmon.state.bucket import Bucket
    from replmon.streaming.settings import monitor_config
    from tests.state.test_monitor import T0, ev, meta

    cfg = monitor_config(replica_lag_time_max_ms=10_000)
    events, leo = [meta(T0)], 0
    for t in range(T0 + 50, T0 + 60_000, 100):
        leo += 10
        events.append(ev("append", t, leader_leo=leo))
        events += [ev("fetch", t + 60, replica=r, fetch_offset=leo, leader_leo=leo) for r in (2, 3)]
    bucket, alerts, facts, sent = Bucket(0, 1), [], GateFacts(), []
    for s in range(60):
        lo, hi = T0 + s * 1000, T0 + (s + 1) * 1000
        bucket.process([e for e in events if lo <= e[1] < hi], cfg, alerts, [])
        bucket.advance(cfg, alerts)
        partitions: list = []
        followers: list = []
        bucket.statuses(cfg, partitions, followers, points=[])
        observe(facts, partitions, followers, [])
        sent += followers
    assert alerts == []
    assert sent and any(r["lag_messages"] > 0 and r["state"] == "caught_up" for r in sent), sent
    assert all(r["ts"] < T0 + 10_000 for r in sent), "statuses after the first ones: nothing left to test"
    name = "t-0"
    assert facts.partitions[name].behind == {}
    now = T0 + 59_950
    for broker in (1, 2, 3):
        v = indexed_verdict(facts, broker, now, {}, CFG)
        assert v["verdict"] == SAFE and "followers_out" not in v["reasons"], v
