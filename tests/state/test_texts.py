"""Alert texts (state/texts.py): every template renders, durations never read as within a
limit they exceed, and every time a text prints is the time of the fact it names."""

import string

import pytest

from replmon.state import texts
from replmon.state.cluster import ClusterStep
from replmon.state.events import EVENT_FIELDS
from replmon.state.fetcher import Member, stalled_since
from replmon.state.root_cause import root_text
from tests.state.test_cluster import CFG, T, act
from tests.state.test_cluster import alert as cluster_alert
from tests.state.test_monitor import T0, ev, meta, run, steady


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


# ---- every time a text prints is the time of the fact it names ----------------------------------
# Each case builds its record through the code that makes it, with the times of the facts apart
# (seconds apart, as fmt_clock prints them), and reads the time out of the text.


def _clock(text: str, after: str) -> str:
    """The HH:MM:SS printed right after `after` in `text`."""
    assert after in text, f"{after!r} not in {text!r}"
    return text.split(after, 1)[1][:8]


def _broker_root(share_cause: str, at: int, runs: dict) -> list:
    """The cluster step's BrokerUnavailable records for broker 3 of cluster c, given a bucket's
    share (the controller's decision, `at` ms after T) or None, and the brokers' activity."""
    step = ClusterStep(CFG)
    shares = []
    if share_cause is not None:
        share = cluster_alert(
            "BrokerUnavailable", at, topic=None, replica=None, cause=share_cause, severity="critical"
        )
        share.update(subject="c/broker/3", broker=3, partition=None, topic=None, aid="bucket-share")
        shares.append(share)
    out = step.step(shares, [act(0, runs)])
    return [a for a in out if a["name"] == "BrokerUnavailable" and a["status"] != "resolved"]


def test_broker_silent_says_when_it_was_last_heard_from():
    # Broker 3's last activity is at +10 s; silent after 3 s, so its episode starts at +13.001 s
    # and is released at +18.001 s: it went silent at +10 s (T + 10 s = 00:16:50).
    (root,) = _broker_root(None, 0, {1: [(0, 40_000)], 3: [(0, 10_000)]})
    assert (root["cause"], root["started_ms"] - T) == ("broker_silent", 13_001)
    assert _clock(root["reason"], "went silent at ") == texts.fmt_clock(T + 10_000) == "00:16:50"


def test_broker_fenced_after_it_went_silent_says_when_it_was_fenced():
    # Silent from +13.001 s (last heard at +10 s), fenced by the controller at +20 s: the update
    # says it was fenced at +20 s (00:17:00), not at the episode's start (00:16:53).
    first, update = _broker_root("broker_fenced", 20_000, {1: [(0, 40_000)], 3: [(0, 10_000)]})
    assert (update["status"], update["cause"], update["started_ms"] - T) == (
        "updated",
        "broker_fenced",
        13_001,
    )
    assert _clock(first["reason"], "went silent at ") == "00:16:50"
    assert _clock(update["reason"], "was fenced at ") == texts.fmt_clock(T + 20_000) == "00:17:00"


@pytest.mark.parametrize(
    "cause, says",
    [
        ("broker_fenced", "was fenced at "),
        ("broker_shutting_down", "is in controlled shutdown since "),
    ],
)
def test_a_controller_decision_says_when_it_was_made_not_when_it_was_released(cause, says):
    # The controller's decision at +10 s (00:16:50) is released group_wait (5 s) later (00:16:55).
    (root,) = _broker_root(cause, 10_000, {1: [(0, 40_000)], 3: [(0, 40_000)]})
    assert root["cause"] == cause
    assert _clock(root["reason"], says) == texts.fmt_clock(T + 10_000) == "00:16:50"


@pytest.mark.parametrize(
    "cause, says",
    [
        ("broker_fenced", "was fenced at "),
        ("broker_shutting_down", "is in controlled shutdown since "),
    ],
)
def test_a_buckets_root_says_when_the_broker_event_came(cause, says):
    # A bucket's share is stamped with the broker event's time (root_cause.broker_root); merged at
    # a later batch time (ts), the text names the event's time.
    record = {
        "name": "BrokerUnavailable",
        "status": "firing",
        "broker": 3,
        "cluster": "c",
        "cause": cause,
        "started_ms": T + 10_000,
        "ts": T + 12_000,
    }
    assert _clock(root_text(record, {}), says) == "00:16:50"


def test_a_fetcher_stall_says_when_its_partitions_had_gone_unfetched_for_the_stuck_limit():
    # The stall starts at the group's last fetch + stuck_after_ms + 1 (fetcher.stalled_since):
    # that is the time printed, and the text says what it is.
    since = stalled_since(
        [Member("t-0", T + 1000, T + 9000), Member("t-1", T + 2000, T + 9000)], T + 9000, 5000, True
    )
    assert since == T + 2000 + 5000 + 1
    record = {
        "name": "ReplicaFetcherStalled",
        "status": "firing",
        "broker": 3,
        "leader": 1,
        "fetcher_id": 0,
        "partitions": ["t-0", "t-1"],
        "started_ms": since,
        "ts": T + 9000,
    }
    text = root_text(record, {})
    assert _clock(text, "is stalled: by ") == texts.fmt_clock(T + 7001) == "00:16:47"
    assert "for longer than the stuck limit" in text


def _fired(alerts: list, name: str) -> dict:
    return next(a for a in alerts if a["name"] == name and a["status"] == "firing")


def _last(events: list, ts_before: int, **match) -> int:
    """The time of the last event before `ts_before` whose fields have the values of `match`."""
    fields = {f: i for i, f in enumerate(EVENT_FIELDS)}
    return max(
        e[fields["ts"]]
        for e in events
        if e[fields["ts"]] < ts_before and all(e[fields[k]] == v for k, v in match.items())
    )


@pytest.mark.parametrize("name", ["IsrExitImminent", "ReplicaOutOfSync"])
def test_a_lagging_replica_says_when_it_last_fetched(name):
    # Replica 3 fetches 50 messages behind, never at the LEO nor at the previous fetch's LEO, so
    # it has not been caught up since the election (T0, 00:00:00); it stops at +7 s. Imminent at
    # L/2 + 1 (+5.001 s, last fetch +4.902 s), out of sync at L + 1 (+10.001 s, last fetch
    # +6.902 s): the text names its last fetch, not the election nor the alert's time.
    events = [meta(T0), *steady(T0 + 100, T0 + 12_000, stop=T0 + 7000, slow=50)]
    _, alerts, _ = run(events)
    fired = _fired(alerts, name)
    last_fetch = _last(events, fired["ts"], type="fetch", replica=3)
    assert (fired["cause"], fired["ts"] - T0) == (
        "lag",
        {"IsrExitImminent": 5001, "ReplicaOutOfSync": 10_001}[name],
    )
    assert texts.fmt_clock(last_fetch) not in (texts.fmt_clock(T0), texts.fmt_clock(fired["ts"]))
    assert _clock(fired["reason"], "no fetch since ") == texts.fmt_clock(last_fetch)


def test_a_replica_the_controller_took_out_says_when_it_last_fetched():
    # Replica 3 fetches at the LEO until +3 s (00:00:02, its last fetch +2.902 s); the cluster's
    # report at +6 s takes it out while it is still caught up (within L): the controller's doing.
    events = [meta(T0), *steady(T0 + 100, T0 + 8000, stop=T0 + 3000), meta(T0 + 6000, isr=(1, 2))]
    events.sort(key=lambda e: e[EVENT_FIELDS.index("ts")])
    _, alerts, _ = run(events)
    fired = _fired(alerts, "ReplicaOutOfSync")
    assert (fired["cause"], fired["ts"] - T0) == ("controller", 6000)
    assert _clock(fired["reason"], "no fetch since ") == texts.fmt_clock(T0 + 2902) == "00:00:02"


@pytest.mark.parametrize(
    "state, cause", [("fenced", "broker_fenced"), ("shutting_down", "broker_shutting_down")]
)
def test_a_replica_out_with_its_broker_says_since_when_the_broker_is_unavailable(state, cause):
    # The controller marks broker 3 at +3 s (00:00:03) and reports the shrunk ISR at +6 s.
    events = [meta(T0), *steady(T0 + 100, T0 + 8000, stop=T0 + 3000)]
    events += [ev("broker", T0 + 3000, broker=3, state=state, broker_epoch=7), meta(T0 + 6000, isr=(1, 2))]
    events.sort(key=lambda e: e[EVENT_FIELDS.index("ts")])
    _, alerts, _ = run(events)
    fired = _fired(alerts, "ReplicaOutOfSync")
    assert (fired["cause"], fired["ts"] - T0) == (cause, 6000)
    assert _clock(fired["reason"], "since ") == "00:00:03"


def test_a_silent_partition_says_when_its_leader_last_reported():
    # Replica 3 stops at +3 s, the partition's events at +5 s (last: +4.901 s, 00:00:04), the
    # cluster's heartbeats go on. Imminent at +7.903 s (lcu +2.902 s + L/2 + 1), with nothing from
    # the leader for more than stuck_after_ms (3 s); TelemetryMissing 30 s after the last event.
    events = [meta(T0), *steady(T0 + 100, T0 + 5000, stop=T0 + 3000)]
    events += [ev("heartbeat", T0 + s * 1000) for s in range(5, 60)]
    _, alerts, _ = run(events)
    imminent = _fired(alerts, "IsrExitImminent")
    missing = _fired(alerts, "TelemetryMissing")
    assert (imminent["cause"], imminent["ts"] - T0, missing["ts"] - T0) == ("lag", 7903, 34_902)
    assert _clock(imminent["reason"], "nothing from leader 1 since ") == "00:00:04"
    assert _clock(missing["reason"], "no events for t-0 since ") == "00:00:04"


def test_a_silent_cluster_says_when_it_last_reported():
    # Cluster c1's last event is at +1 s (00:00:01); c2 moves the clock on; fires at +31.001 s.
    events = [ev("heartbeat", T0), ev("heartbeat", T0 + 1000)]
    events += [(*ev("heartbeat", T0 + s * 1000)[:2], "c2", *ev("heartbeat", 0)[3:]) for s in range(2, 45)]
    _, alerts, _ = run(events)
    fired = next(a for a in alerts if a["name"] == "TelemetryMissing" and a["subject"] == "c1")
    assert fired["ts"] - T0 == 31_001
    assert _clock(fired["reason"], "no events from cluster c1 since ") == "00:00:01"
