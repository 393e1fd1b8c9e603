"""The monitor against the simulator's truth: the same events seen by two leaders.

The simulator's partition leaders are the rules engine driven with Kafka's own `isr-expiration`
schedule (every L/2 from each broker's start, at a random phase); its truth records what they
decided. The monitor (`state.bucket.Bucket`) re-derives the same from the events alone, running
isr-expiration every L/2 aligned to the epoch (t % (L/2) == 0) and evaluating alerts at exact
deadlines. What must therefore agree, and how closely (docs/simulator.md, docs/kafka-rules.md §2-§3, §11):

* When a follower goes out of sync (`now - lcu > L`, LEO behind): at lcu + L + 1 in both, to the
  ms. It depends on the fetches only, not on when isr-expiration runs.
* When the leader removes it from the ISR: at the first isr-expiration run after that, in both,
  but the runs have different phases. Both runs lie in [out of sync, out of sync + L/2], so the
  two shrink times are at most L/2 apart (docs/kafka-rules.md §11: an observer must allow (L, 1.5 L]). The
  monitor also applies the ISR a `metadata` event reports, so it is never later than the report
  of the truth's shrink.
* When a follower rejoins (a fetch reaching the HW), and what the controller does (fencing,
  elections, reassignment): the same event in both, to the ms.

Pure and fast: the scenarios are simulated in memory and fed to a `Bucket` in the order the
streaming adapter uses (streaming/stateful.py: event time, then metadata, broker, fetch, append,
heartbeat). tests/streaming/test_simulated_truth.py runs the same checks on the Spark query.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache

import pytest

from replmon.state.bucket import Bucket
from replmon.state.events import EVENT_FIELDS, TIE_RANK
from replmon.streaming.settings import monitor_config
from replmon.streaming.simulator import scenarios
from replmon.streaming.simulator.model import simulate

SCENARIOS = ("demo", "paused_and_slow", "bursty", "steady")
SEEDS = (0, 1, 2)
LAG_ALERTS = ("ReplicaOutOfSync", "IsrExitImminent", "UnderReplicated")
# Ties in event time, as the streaming adapter breaks them (the contract's order of types).
TYPE_RANK = TIE_RANK
CONTROLLER_REASONS = ("fenced", "election", "reassignment")


# ---- running the monitor ------------------------------------------------------------------------


def as_tuple(event: dict, raw: str | None = None) -> tuple:
    """One contract event as the EVENT_FIELDS tuple the streaming adapter builds."""
    row = dict.fromkeys(EVENT_FIELDS)
    row.update((k, v) for k, v in event.items() if k in row)
    for name in ("replicas", "isr", "adding_replicas"):
        if row[name] is not None:
            row[name] = tuple(row[name])
    row["raw"] = raw if raw is not None else json.dumps(event, separators=(",", ":"))
    return tuple(row[f] for f in EVENT_FIELDS)


@dataclass(frozen=True)
class Monitored:
    alerts: list[dict]
    partition_status: list[dict]
    replica_status: list[dict]
    quarantine: list[dict]
    activity: list[dict] = field(default_factory=list)  # for the cluster step (state/cluster.py)
    series_point: list[dict] = field(default_factory=list)  # healthy partitions' offsets


def run_monitor(
    events: list[dict], lag_ms: int, status_every_ms: int = 1000, raws: list[str] | None = None
) -> Monitored:
    """Feed the events to one Bucket (all partitions in it), in event-time order, in slices of
    `status_every_ms` of event time with the statuses taken after each slice (as micro-batches
    would), then let time run out (`advance`) as the end of a stream does."""
    cfg = monitor_config(replica_lag_time_max_ms=lag_ms)
    bucket, alerts, quarantine, partitions, replicas = Bucket(0, 1), [], [], [], []
    activity: list = []
    points: list = []
    raws = raws or [None] * len(events)
    order = sorted(
        range(len(events)), key=lambda i: (events[i]["ts"], TYPE_RANK[events[i]["type"]])
    )  # stable
    chunk, chunk_end = [], None
    for i in order:
        ts = events[i]["ts"]
        if chunk_end is not None and ts >= chunk_end:
            bucket.process(chunk, cfg, alerts, quarantine)
            bucket.statuses(cfg, partitions, replicas, points=points)
            activity += bucket.activity_reports()
            chunk = []
        if chunk_end is None or ts >= chunk_end:
            chunk_end = (ts // status_every_ms + 1) * status_every_ms
        chunk.append(as_tuple(events[i], raws[i]))
    bucket.process(chunk, cfg, alerts, quarantine)
    bucket.advance(cfg, alerts)
    bucket.statuses(cfg, partitions, replicas, force=True, points=points)
    activity += bucket.activity_reports()
    return Monitored(alerts, partitions, replicas, quarantine, activity, points)


@dataclass(frozen=True)
class ScenarioRun:
    name: str
    events: list[dict]
    truth: list[dict]
    lag_ms: int
    monitored: Monitored

    @property
    def alerts(self) -> list[dict]:
        return self.monitored.alerts


@cache
def scenario_run(name: str, seed: int = 0) -> ScenarioRun:
    spec = scenarios.get(name)
    events, truth = simulate(spec, seed=seed)
    return ScenarioRun(
        name, events, truth, spec.replica_lag_time_max_ms, run_monitor(events, spec.replica_lag_time_max_ms)
    )


# ---- reading the truth ----------------------------------------------------------------------------


def records(truth, kind, **match) -> list[dict]:
    return [r for r in truth if r["kind"] == kind and all(r.get(k) == v for k, v in match.items())]


def subject(r: dict, replica: int | None = None) -> str:
    base = f"{r['cluster']}/{r['topic']}-{r['partition']}"
    return base if replica is None else f"{base}/{replica}"


def firings(alerts, name, subj=None) -> list[dict]:
    return [
        a
        for a in alerts
        if a["name"] == name and a["status"] == "firing" and (subj is None or a["subject"] == subj)
    ]


def episodes_of(alerts, name, subj) -> list[tuple[int, int | None]]:
    """(started_ms, resolved ts or None) of each episode of one alert on one subject."""
    resolved = {a["alert_id"]: a["ts"] for a in alerts if a["status"] == "resolved"}
    return [(a["started_ms"], resolved.get(a["alert_id"])) for a in firings(alerts, name, subj)]


def metadata_of(events, topic, partition) -> list[dict]:
    return [
        e for e in events if e["type"] == "metadata" and e["topic"] == topic and e["partition"] == partition
    ]


def ever_in_isr_before(events, truth, r, replica, ts) -> bool:
    """Whether `replica` was in the partition's committed ISR at any time before ts (the first
    metadata is the initial ISR; the truth records every change after it)."""
    first = metadata_of(events, r["topic"], r["partition"])[0]
    return replica in first["isr"] or any(
        replica in c["new"]
        for c in records(truth, "isr_change", topic=r["topic"], partition=r["partition"])
        if c["ts"] < ts
    )


def removed_by_controller(truth, ep) -> dict | None:
    """The controller change (fencing, election) that took the episode's replica out of the ISR
    at or before the episode started, the replica staying out until then."""
    changes = records(truth, "isr_change", topic=ep["topic"], partition=ep["partition"])
    last = None
    for c in changes:
        if c["ts"] > ep["start_ms"]:
            break
        if ep["replica"] in c["old"] and ep["replica"] not in c["new"]:
            last = c
        elif ep["replica"] in c["new"]:
            last = None
    return last if last is not None and last["reason"] in CONTROLLER_REASONS else None


def replication_factor_at(events, topic, partition, ts) -> int:
    """Replicas minus adding replicas (Kafka's factor for UnderReplicated) as last reported by ts."""
    meta = [m for m in metadata_of(events, topic, partition) if m["ts"] <= ts][-1]
    return len(meta["replicas"]) - len(meta.get("adding_replicas") or ())


def under_replicated_intervals(events, truth, topic, partition) -> list[dict]:
    """The truth's intervals in which the committed ISR is short of the replication factor."""
    out, open_ = [], None
    for c in records(truth, "isr_change", topic=topic, partition=partition):
        short = len(c["new"]) < replication_factor_at(events, topic, partition, c["ts"])
        if short and open_ is None:
            open_ = {"start": c["ts"], "reason": c["reason"], "change": c, "end": None}
        elif not short and open_ is not None:
            open_["end"] = c["ts"]
            out.append(open_)
            open_ = None
    if open_ is not None:
        out.append(open_)
    return out


# ---- the checks (also run on the Spark query's output) ------------------------------------------


def check_alert_lifecycle(alerts) -> None:
    """Each episode fires once, may be updated (a root's cause or counts: state/cluster.py) while
    it is open, and resolves at most once, after it fired; ids never repeat a firing or a resolve,
    and an update never comes before the firing or after the resolve (nor twice at one time)."""
    seen = set()
    fired = {}
    for a in sorted(alerts, key=lambda r: (r["ts"], r["status"] != "firing", r["status"] == "resolved")):
        key = (a["alert_id"], a["status"], a["ts"] if a["status"] == "updated" else None)
        if a["status"] == "updated":
            assert (a["alert_id"], "resolved", None) not in seen, f"updated after its resolve: {a}"
        assert key not in seen, f"{a['status']} twice: {a}"
        seen.add(key)
        if a["status"] == "firing":
            assert a["ts"] == a["started_ms"], a
            fired[a["alert_id"]] = a
        else:
            assert a["alert_id"] in fired, f"{a['status']} without firing: {a}"
            first = fired[a["alert_id"]]
            assert (a["name"], a["subject"], a["started_ms"]) == (
                first["name"],
                first["subject"],
                first["started_ms"],
            ), a
            assert a["ts"] >= a["started_ms"], a


def check_out_of_sync_episodes(events, truth, alerts) -> None:
    """Every out-of-sync episode of the truth is a ReplicaOutOfSync episode, starting at the same
    ms (lcu + L + 1, or the election that reset the follower), and the other way round.

    Two cases are not a new firing at the episode start, by design of the alert:
    * a replica that has never been in the ISR (a reassignment adding it) is catching up, not
      out of sync: no ReplicaOutOfSync at all (its replica_status says `bootstrapping`);
    * a replica the controller already took out of the ISR (a fenced broker) is reported out of
      sync from that moment, which is before its lcu + L + 1: the episode is already open then.
    A ReplicaOutOfSync resolves when the replica is caught up *and* back in the ISR: at the end
    of the truth's episode, or at the expansion that re-adds it if it was removed meanwhile.
    """
    matched = set()
    for ep in records(truth, "out_of_sync"):
        subj = subject(ep, ep["replica"])
        mine = episodes_of(alerts, "ReplicaOutOfSync", subj)
        if not ever_in_isr_before(events, truth, ep, ep["replica"], ep["start_ms"]):
            assert not [s for s, _ in mine if ep["start_ms"] <= s <= (ep["end_ms"] or s)], (ep, mine)
            continue
        exact = [(s, e) for s, e in mine if s == ep["start_ms"]]
        removal = removed_by_controller(truth, ep)
        if exact:
            (episode,) = exact
        else:
            assert removal is not None, f"no ReplicaOutOfSync firing at the episode start: {ep}, got {mine}"
            (episode,) = [(s, e) for s, e in mine if s == removal["ts"]] or [(None, None)]
            assert episode[0] is not None, f"no ReplicaOutOfSync from the controller's removal: {ep}, {mine}"
        matched.add((subj, episode[0]))
        assert episode[1] is not None or ep["end_ms"] is None, (ep, episode)
        if ep["end_ms"] is not None:
            later = [
                c
                for c in records(truth, "isr_change", topic=ep["topic"], partition=ep["partition"])
                if c["ts"] >= episode[0]
            ]
            rejoin = [c["ts"] for c in later if ep["replica"] in c["new"] and ep["replica"] not in c["old"]]
            was_removed = any(
                c["ts"] <= ep["end_ms"] and ep["replica"] in c["old"] and ep["replica"] not in c["new"]
                for c in later
            )
            expected_end = rejoin[0] if was_removed or removal is not None else ep["end_ms"]
            assert episode[1] == expected_end, (ep, episode, rejoin)
    extra = [a for a in firings(alerts, "ReplicaOutOfSync") if (a["subject"], a["started_ms"]) not in matched]
    assert not extra, f"ReplicaOutOfSync with no out-of-sync episode in the truth: {extra}"


def check_isr_changes(events, truth, alerts, lag_ms) -> None:
    """UnderReplicated follows the committed ISR: its episodes are the truth's under-replicated
    intervals. One started by the leader's shrink starts at the monitor's own isr-expiration run,
    which may be up to L/2 away from the simulated leader's (different phase), but never before
    the removed follower is out of sync, never more than L/2 after, and never after the metadata
    that reports the truth's shrink. One started by the controller (fencing, election) starts at
    the same ms (the metadata event carries it at that instant). The ISR becomes full again at a
    fetch, the same in both: the episode resolves at that ms."""
    half = lag_ms // 2
    keys = {(r["cluster"], r["topic"], r["partition"]) for r in records(truth, "partition")}
    for cluster, topic, partition in sorted(keys):
        truth_intervals = under_replicated_intervals(events, truth, topic, partition)
        subj = f"{cluster}/{topic}-{partition}"
        mine = episodes_of(alerts, "UnderReplicated", subj)
        assert len(mine) == len(truth_intervals), (subj, mine, truth_intervals)
        for (start, end), want in zip(mine, truth_intervals, strict=True):
            change = want["change"]
            if want["reason"] == "shrink":
                removed = set(change["old"]) - set(change["new"])
                starts = [
                    ep["start_ms"]
                    for ep in records(truth, "out_of_sync", topic=topic, partition=partition)
                    if ep["replica"] in removed
                    and ep["start_ms"] <= change["ts"]
                    and (ep["end_ms"] is None or ep["end_ms"] > change["ts"])
                ]
                out_of_sync_at = min(starts)
                reported = min(
                    m["ts"]
                    for m in metadata_of(events, topic, partition)
                    if m["ts"] >= change["ts"] and m["isr"] == change["new"]
                )
                assert out_of_sync_at <= start <= out_of_sync_at + half, (subj, start, out_of_sync_at)
                assert abs(start - change["ts"]) <= half, (subj, start, change)
                assert start <= reported, (subj, start, reported)
            else:
                assert start == want["start"], (subj, start, want)
            assert end == want["end"], (subj, (start, end), want)


def check_faults_visible(truth, alerts, replica_status=None) -> None:
    """Every scheduled fault shows in an alert about its subject (and in replica_status)."""
    cluster = records(truth, "partition")[0]["cluster"]
    for f in records(truth, "fault"):
        start, end = f["start_ms"], f["end_ms"]
        kind = f["fault"]
        if kind in ("paused_follower", "slow_follower"):
            subj = subject(f, f["replica"])
            names = (
                ("ReplicaOutOfSync",)
                if kind == "paused_follower"
                else ("IsrExitImminent", "ReplicaOutOfSync")
            )
            assert [a for n in names for a in firings(alerts, n, subj) if start <= a["ts"] <= end], (f, subj)
        elif kind == "broker_crash":
            # Every partition loses the crashed broker from its ISR: fenced by the controller.
            assert [a for a in firings(alerts, "UnderReplicated") if start <= a["ts"] <= end], f
            assert [
                a
                for a in firings(alerts, "ReplicaOutOfSync")
                if a["replica"] == f["broker"] and start <= a["ts"] <= end
            ], f
            if replica_status is not None:
                assert [
                    s
                    for s in replica_status
                    if s["replica"] == f["broker"] and s["state"] == "fenced" and start <= s["ts"] <= end
                ], f
        elif kind == "bootstrap_replica":
            subj = subject(f, f["replica"])
            assert not firings(alerts, "ReplicaOutOfSync", subj), f
            if replica_status is not None:
                assert [
                    s
                    for s in replica_status
                    if (s["topic"], s["partition"], s["replica"])
                    == (f["topic"], f["partition"], f["replica"])
                    and s["state"] == "bootstrapping"
                    and s["ts"] >= start
                ], f
        elif kind == "bursty_producer":
            # Bursts are not a fault of the followers: no lag alert about the partition while they
            # go on (in the demo the same partition later loses its leader to the broker crash).
            prefix = subject(f)
            assert not [
                a
                for n in LAG_ALERTS
                for a in firings(alerts, n)
                if (a["subject"] == prefix or a["subject"].startswith(prefix + "/")) and a["ts"] <= end
            ], f
        else:
            raise AssertionError(f"unknown fault {kind} in the truth of cluster {cluster}")


def check_final_state(truth, partition_status, series_point=()) -> None:
    """Each partition ends as the truth's leader left it: leader, epoch, assignment, ISR, HW, LEO
    (the HW and LEO of a healthy partition from its newest status or series point)."""
    last = {}
    for s in sorted(partition_status, key=lambda s: s["ts"]):
        last[(s["cluster"], s["topic"], s["partition"])] = s
    for p in sorted(series_point, key=lambda p: p["ts"]):
        key = (p["cluster"], p["topic"], p["partition"])
        if p["replica"] is None and p["ts"] >= last[key]["ts"]:
            last[key] = {**last[key], "ts": p["ts"], "hw": p["hw"], "leader_leo": p["leader_leo"]}
    for r in records(truth, "partition"):
        s = last[(r["cluster"], r["topic"], r["partition"])]
        got = (s["leader"], s["leader_epoch"], sorted(s["replicas"]), s["isr"], s["hw"], s["leader_leo"])
        assert got == (
            r["leader"],
            r["leader_epoch"],
            sorted(r["replicas"]),
            r["isr"],
            r["hw"],
            r["leader_leo"],
        ), (r, s)


def check_against_truth(events, truth, alerts, lag_ms, replica_status=None) -> None:
    check_alert_lifecycle(alerts)
    check_out_of_sync_episodes(events, truth, alerts)
    check_isr_changes(events, truth, alerts, lag_ms)
    check_faults_visible(truth, alerts, replica_status)


# ---- the tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", SCENARIOS)
def test_monitor_agrees_with_the_truth(name, seed):
    run = scenario_run(name, seed)
    assert run.monitored.quarantine == []  # the simulator writes nothing the monitor must set aside
    check_against_truth(run.events, run.truth, run.alerts, run.lag_ms, run.monitored.replica_status)
    check_final_state(run.truth, run.monitored.partition_status, run.monitored.series_point)


@pytest.mark.parametrize("seed", SEEDS)
def test_bursts_far_above_4000_messages_raise_no_lag_alert(seed):
    # 100,000-message bursts lag the followers by tens of thousands of messages for a second or
    # two: the time rule (KAFKA-1546) never calls them out of sync, let alone imminent.
    run = scenario_run("bursty", seed)
    assert [a for a in run.alerts if a["name"] in LAG_ALERTS] == []


@pytest.mark.parametrize("name", ["steady", "bursty"])
def test_a_healthy_cluster_raises_no_alert_at_all(name):
    assert scenario_run(name).alerts == []


def test_every_fault_of_the_demo_is_in_the_truth_and_checked():
    faults = {f["fault"] for f in records(scenario_run("demo").truth, "fault")}
    assert faults == {
        "paused_follower",
        "slow_follower",
        "bursty_producer",
        "bootstrap_replica",
        "broker_crash",
    }


def test_the_bootstrapping_replica_is_never_out_of_sync_and_its_status_says_so():
    run = scenario_run("demo")
    (f,) = records(run.truth, "fault", fault="bootstrap_replica")
    mine = [
        s
        for s in run.monitored.replica_status
        if (s["topic"], s["partition"], s["replica"]) == (f["topic"], f["partition"], f["replica"])
    ]
    (join,) = [
        c
        for c in records(run.truth, "isr_change", topic=f["topic"], partition=f["partition"])
        if f["replica"] in c["new"] and f["replica"] not in c["old"] and c["reason"] == "expand"
    ][:1]
    before = [s["state"] for s in mine if s["ts"] < join["ts"]]
    assert before and set(before) == {"bootstrapping"}
    assert mine[-1]["in_isr"] is True and mine[-1]["state"] == "caught_up"


def test_same_events_same_alerts():
    run = scenario_run("paused_and_slow")
    again = run_monitor(run.events, run.lag_ms)
    assert again.alerts == run.alerts and again.alerts


@pytest.mark.parametrize("name", ["demo", "paused_and_slow", "bursty", "steady"])
def test_nothing_is_left_firing_when_the_cluster_ends_healthy(name):
    # Every scenario ends with every follower caught up and in the ISR (no open episode in the
    # truth, every ISR full), so every alert episode must have been resolved by then.
    run = scenario_run(name)
    assert not [r for r in records(run.truth, "out_of_sync") if r["end_ms"] is None]
    assert all(sorted(r["isr"]) == sorted(r["replicas"]) for r in records(run.truth, "partition"))
    resolved = {a["alert_id"] for a in run.alerts if a["status"] == "resolved"}
    assert [
        (a["name"], a["subject"], a["started_ms"])
        for a in run.alerts
        if a["status"] == "firing" and a["alert_id"] not in resolved
    ] == []
