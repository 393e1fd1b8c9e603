"""The annotation consumer on a real redis-server and the contract fake of Grafana's HTTP API.

Alerts are written by the real RedisSink, so the consumer reads the stream exactly as the
streaming query leaves it. Sleeps are recorded, not slept, except where Redis's own idle time
must pass (XAUTOCLAIM), and those waits are bounded.
"""

from __future__ import annotations

import json
import time

import pytest
from pydantic import SecretStr, ValidationError

from replmon.sinks.grafana import GrafanaAuthError, GrafanaSettings, connect
from replmon.sinks.grafana_annotation_api import AnnotationApi
from replmon.sinks.grafana_annotation_consumer import (
    AnnotationConsumer,
    AnnotationConsumerSettings,
)
from replmon.sinks.keys import Keys
from replmon.sinks.redis_sink import RedisSink
from replmon.streaming import cli
from tests.redis_server import RedisServer
from tests.sinks import records as r
from tests.sinks.fake_grafana import FakeGrafana

KEYS = Keys()


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def consumer(
    redis_client,
    grafana: FakeGrafana,
    name: str = "m1",
    token: str = "glsa_test",
    sleeps: Sleeps | None = None,
    **overrides,
) -> AnnotationConsumer:
    settings = AnnotationConsumerSettings(
        **{
            "consumer": name,
            "block_ms": 50,
            "retries": 2,
            "backoff_initial_s": 0.01,
            "backoff_max_s": 0.05,
            **overrides,
        }
    )
    g = GrafanaSettings(url=grafana.url, token=SecretStr(token), timeout_s=2)
    return AnnotationConsumer(
        redis_client,
        AnnotationApi(connect(g), g.url),
        settings,
        sleep=sleeps if sleeps is not None else Sleeps(),
    )


def write_alerts(redis_client, *alerts: dict, batch_id: int = 1) -> None:
    RedisSink(redis_client).write_batch(batch_id, list(alerts), [], [], [])


def drain(c: AnnotationConsumer, polls: int = 10):
    """Poll until nothing is left to read (bounded), returning the reports."""
    reports = []
    for _ in range(polls):
        reports.append(c.poll_once(block=False))
        if reports[-1].read == 0:
            return reports
    raise AssertionError(f"still reading after {polls} polls: {reports}")


def total(reports, field: str) -> int:
    return sum(getattr(x, field) for x in reports)


def the_one_annotation(grafana: FakeGrafana, alert_id: str = "a1") -> dict:
    found = [a for a in grafana.annotations.values() if f"alert_id:{alert_id}" in a["tags"]]
    assert len(found) == 1, f"alert {alert_id} has {len(found)} annotations: {found}"
    return found[0]


FIRING = r.alert(ts=10_000, started_ms=10_000)
RESOLVED = r.alert(status="resolved", ts=45_000, started_ms=10_000, reason="replica 3 caught up again")


def test_firing_then_resolve_is_one_region_annotation_once_across_a_restart_and_an_outage(redis_client):
    """The issue's 'done when': one annotation, once, after a consumer restart and a Grafana outage."""
    with FakeGrafana() as grafana:
        write_alerts(redis_client, FIRING)
        first = consumer(redis_client, grafana)
        assert total(drain(first), "created") == 1
        del first  # the process stops; a new one with the same member name starts

        write_alerts(redis_client, RESOLVED, batch_id=2)
        write_alerts(redis_client, FIRING, RESOLVED, batch_id=1)  # a replayed batch: the sink skips it
        with grafana.outage():
            sleeps = Sleeps()
            restarted = consumer(redis_client, grafana, sleeps=sleeps)
            report = restarted.poll_once(block=False)
            assert report.outage and report.read == 1 and report.closed == 0
            assert len(sleeps) == 2  # bounded retries: 3 attempts, 2 backoffs
            pending = redis_client.xpending(KEYS.alerts_stream(), "grafana-annotations")
            assert pending["pending"] == 1  # the resolve waits in Redis, not in memory
        reports = drain(restarted)
        assert total(reports, "closed") == 1

        again = consumer(redis_client, grafana)  # another restart, nothing left to do
        assert total(drain(again), "read") == 0

    annotation = the_one_annotation(grafana)
    assert (annotation["time"], annotation["timeEnd"]) == (10_000, 45_000)
    assert annotation["text"].endswith("resolved: replica 3 caught up again")
    assert set(annotation["tags"]) >= {
        "replmon",
        "alert:ReplicaOutOfSync",
        "cluster:c1",
        "topic:orders",
        "partition:0",
        "replica:3",
        "severity:warning",
        "alert_id:a1",
    }
    assert grafana.annotation_calls().count("POST /api/annotations") == 1
    assert grafana.violations == []


def test_replaying_the_whole_stream_with_the_mapping_lost_finds_the_annotation_by_tag(redis_client):
    with FakeGrafana() as grafana:
        write_alerts(redis_client, FIRING, RESOLVED)
        drain(consumer(redis_client, grafana))
        for key in redis_client.scan_iter(match="replmon:grafana:annotation:*"):
            redis_client.delete(key)  # e.g. the mapping expired, or a crash between create and save
        replay = consumer(redis_client, grafana, group="a-new-group")  # reads the stream from 0
        reports = drain(replay)
    assert (total(reports, "created"), total(reports, "unchanged")) == (0, 2)
    annotation = the_one_annotation(grafana)
    assert (annotation["time"], annotation["timeEnd"]) == (10_000, 45_000)


def test_a_resolve_that_arrives_first_creates_the_region_and_the_late_firing_changes_nothing(redis_client):
    with FakeGrafana() as grafana:
        RedisSink(redis_client).write_batch(1, [RESOLVED], [], [], [])
        redis_client.xadd(KEYS.alerts_stream(), {k: str(v) for k, v in FIRING.items()})  # late, out of order
        reports = drain(consumer(redis_client, grafana))
    assert (total(reports, "created"), total(reports, "unchanged")) == (1, 1)
    annotation = the_one_annotation(grafana)
    assert (annotation["time"], annotation["timeEnd"]) == (10_000, 45_000)


def test_a_crashed_member_s_entries_are_taken_over_after_claim_idle_ms(redis_client):
    with FakeGrafana() as grafana:
        write_alerts(redis_client, FIRING)
        crashed = consumer(redis_client, grafana, name="crashed")
        crashed._ensure_group()
        assert len(crashed._read_new(block=False)) == 1  # delivered, then the process dies
        survivor = consumer(redis_client, grafana, name="survivor", claim_idle_ms=100)
        assert survivor.poll_once(block=False).read == 0  # not idle long enough yet
        deadline = time.monotonic() + 5
        while (report := survivor.poll_once(block=False)).read == 0:
            assert time.monotonic() < deadline, "never reclaimed"
            time.sleep(0.05)
    assert report.created == 1
    the_one_annotation(grafana)
    assert redis_client.xpending(KEYS.alerts_stream(), "grafana-annotations")["pending"] == 0


def test_several_members_share_the_work_and_each_episode_is_annotated_once(redis_client):
    alerts = [
        a
        for i in range(8)
        for a in (
            r.alert(alert_id=f"x{i}", ts=1_000 + i, started_ms=1_000 + i),
            r.alert(alert_id=f"x{i}", status="resolved", ts=9_000 + i, started_ms=1_000 + i),
        )
    ]
    with FakeGrafana() as grafana:
        write_alerts(redis_client, *alerts)
        members = [consumer(redis_client, grafana, name=f"m{i}", count=3) for i in range(3)]
        reads = [0, 0, 0]
        for _ in range(10):
            for i, m in enumerate(members):
                reads[i] += m.poll_once(block=False).read
    assert sum(reads) == 16 and all(reads), reads
    assert len(grafana.annotations) == 8
    for i in range(8):
        annotation = the_one_annotation(grafana, f"x{i}")
        assert (annotation["time"], annotation["timeEnd"]) == (1_000 + i, 9_000 + i)


def test_a_503_is_an_outage_and_nothing_is_acknowledged(redis_client):
    with FakeGrafana() as grafana:
        write_alerts(redis_client, FIRING)
        grafana.unavailable = True
        c = consumer(redis_client, grafana)
        report = c.poll_once(block=False)
        assert report.outage and report.created == 0
        assert grafana.annotation_calls() == ["GET /api/annotations"] * 3
        grafana.unavailable = False
        assert total(drain(c), "created") == 1


def test_a_record_grafana_can_never_take_is_quarantined_and_the_stream_goes_on(redis_client):
    huge = r.alert(alert_id="huge", reason="x" * 5_000)
    with FakeGrafana(max_body_bytes=2_000) as grafana:
        redis_client.xadd(
            KEYS.alerts_stream(), {"alert_id": "bad", "name": "X", "status": "firing", "ts": "?"}
        )
        write_alerts(redis_client, huge, FIRING)
        reports = drain(consumer(redis_client, grafana))
    assert total(reports, "quarantined") == 2  # the unreadable ts, and the 413 for the huge text
    assert total(reports, "created") == 1
    the_one_annotation(grafana, "a1")
    reasons = [f[b"reason"].decode() for _, f in redis_client.xrange(KEYS.quarantine_stream())]
    assert "no integer ts" in reasons[0] and "(413)" in reasons[1]
    assert all(
        f[b"stage"] == b"grafana-annotations" for _, f in redis_client.xrange(KEYS.quarantine_stream())
    )
    assert redis_client.get(KEYS.quarantine_count()) == b"2"
    assert redis_client.xpending(KEYS.alerts_stream(), "grafana-annotations")["pending"] == 0


def test_annotations_can_belong_to_one_dashboard(redis_client):
    with FakeGrafana() as grafana:
        grafana.dashboards["replmon-overview"] = {"dashboard": {}, "folderUid": None, "version": 1}
        write_alerts(redis_client, FIRING)
        drain(consumer(redis_client, grafana, dashboard_uid="replmon-overview"))
    assert the_one_annotation(grafana)["dashboardUID"] == "replmon-overview"


def test_a_wrong_token_stops_the_consumer_with_a_clear_error_and_acknowledges_nothing(redis_client):
    with FakeGrafana(token="the-right-one") as grafana:
        write_alerts(redis_client, FIRING)
        c = consumer(redis_client, grafana, token="glsa_old_value")
        with pytest.raises(GrafanaAuthError, match="401 Unauthorized") as failure:
            c.poll_once(block=False)
    assert "glsa_old_value" not in str(failure.value)
    assert redis_client.xpending(KEYS.alerts_stream(), "grafana-annotations")["pending"] == 1


def test_a_read_only_token_is_a_403_naming_the_permission(redis_client):
    with FakeGrafana(read_only=True) as grafana:
        write_alerts(redis_client, FIRING)
        with pytest.raises(GrafanaAuthError, match="annotations:write"):
            consumer(redis_client, grafana).poll_once(block=False)


def test_the_mapping_in_redis_saves_the_lookup_and_expires(redis_client):
    with FakeGrafana() as grafana:
        write_alerts(redis_client, FIRING, RESOLVED)
        drain(consumer(redis_client, grafana, mapping_ttl_s=3600))
    key = KEYS.grafana_annotation("a1")
    stored = json.loads(redis_client.get(key))
    assert stored["id"] == the_one_annotation(grafana)["id"] and stored["time_end"] == 45_000
    assert 0 < redis_client.ttl(key) <= 3600
    # the resolve used the mapping: one search (for the firing), one create, one patch
    assert grafana.annotation_calls() == [
        "GET /api/annotations",
        "POST /api/annotations",
        "PATCH /api/annotations/1",
    ]


def test_settings_are_strict():
    with pytest.raises(ValidationError, match="start_id"):
        AnnotationConsumerSettings(start_id="latest")
    with pytest.raises(ValidationError, match="extra"):
        AnnotationConsumerSettings(batch=10)
    with pytest.raises(ValidationError, match="key prefix"):
        AnnotationConsumerSettings(key_prefix="a:b")
    assert "s3cret" not in repr(AnnotationConsumerSettings(redis_password=SecretStr("s3cret")))


def test_the_command_runs_once_and_exits_2_on_a_bad_setting(redis_server, redis_client, monkeypatch, capsys):
    with FakeGrafana() as grafana:
        write_alerts(redis_client, FIRING, RESOLVED)
        monkeypatch.setenv("REPLMON_GRAFANA__URL", grafana.url)
        monkeypatch.setenv("REPLMON_GRAFANA__TOKEN", "glsa_test")
        monkeypatch.setenv("REPLMON_ANNOTATIONS__REDIS_URL", redis_server.url)
        assert cli.main(["grafana-annotations", "--once"]) == 0  # as `replmon grafana-annotations --once`
        monkeypatch.setenv("REPLMON_ANNOTATIONS__BLOCK_MS", "-1")
        assert cli.main(["grafana-annotations", "--once"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("replmon grafana-annotations: invalid settings") and "block_ms" in err
    assert the_one_annotation(grafana)["timeEnd"] == 45_000


def test_a_config_files_redis_section_replaces_the_consumers_own(
    redis_server, redis_client, monkeypatch, tmp_path
):
    # `replmon grafana-annotations --config FILE`: the settings' redis.url (and prefix) win
    # over REPLMON_ANNOTATIONS__REDIS_URL, which here names a port nothing listens on.
    from tests.redis_server import free_port

    with FakeGrafana() as grafana:
        write_alerts(redis_client, FIRING, RESOLVED)
        monkeypatch.setenv("REPLMON_GRAFANA__URL", grafana.url)
        monkeypatch.setenv("REPLMON_GRAFANA__TOKEN", "glsa_test")
        monkeypatch.setenv("REPLMON_ANNOTATIONS__REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
        config = tmp_path / "replmon.toml"
        config.write_text(f'[redis]\nurl = "{redis_server.url}"\nprefix = "{KEYS.prefix}"\n')
        assert cli.main(["grafana-annotations", "--once", "--config", str(config)]) == 0
    assert the_one_annotation(grafana)["timeEnd"] == 45_000


def test_the_consumer_outlives_a_redis_outage():
    """Its own Redis going away is waited out with bounded backoff, then work resumes."""
    server = RedisServer()
    polls = []
    try:
        with FakeGrafana() as grafana:
            client = server.client()
            write_alerts(client, FIRING)
            sleeps = Sleeps()
            c = consumer(client, grafana, sleeps=sleeps, backoff_max_s=0.04)
            server.stop()  # Redis goes away before the first read
            c.run(should_stop=lambda: polls.append(1) or len(polls) > 4)
            assert len(sleeps) == 4 and max(sleeps) <= 0.04  # backed off, bounded, never raised
            assert grafana.annotations == {}
    finally:
        server.stop()


def test_the_engine_s_own_alert_records_become_tagged_regions(redis_client):
    """Records as state/alerts.py makes them (root cause, caused_by, broker), through the real sink."""
    from replmon.state.alerts import AlertBook

    book, out = AlertBook(), []
    book.update(
        out,
        "BrokerUnavailable",
        "c1/broker/2",
        True,
        10_000,
        ("c1", None, None, 2),
        "broker 2 is fenced",
        cause="broker_fenced",
    )
    root_id = book.alert_id_of("BrokerUnavailable", "c1/broker/2")
    book.update(
        out,
        "ReplicaOutOfSync",
        "c1/orders-0/2",
        True,
        10_000,
        ("c1", "orders", 0, 2),
        "replica 2 left the ISR: its broker is fenced",
        caused_by=root_id,
        cause="broker_fenced",
    )
    book.update(
        out,
        "ReplicaOutOfSync",
        "c1/orders-0/2",
        False,
        50_000,
        ("c1", "orders", 0, 2),
        "replica 2 is back in the ISR",
    )
    book.update(
        out, "BrokerUnavailable", "c1/broker/2", False, 40_000, ("c1", None, None, 2), "running again"
    )
    with FakeGrafana() as grafana:
        write_alerts(redis_client, *out)
        reports = drain(consumer(redis_client, grafana))
    assert (total(reports, "created"), total(reports, "closed")) == (2, 2)
    root = the_one_annotation(grafana, root_id)
    assert {"alert:BrokerUnavailable", "broker:2", "cause:broker_fenced", "root-cause"} <= set(root["tags"])
    assert not any(t.startswith(("topic:", "replica:", "caused_by:")) for t in root["tags"])
    assert (root["time"], root["timeEnd"]) == (10_000, 40_000)
    [caused] = [a for a in grafana.annotations.values() if a["id"] != root["id"]]
    assert {f"caused_by:{root_id}", "topic:orders", "partition:0", "replica:2", "broker:2"} <= set(
        caused["tags"]
    )
    assert "root-cause" not in caused["tags"] and (caused["time"], caused["timeEnd"]) == (10_000, 50_000)


def test_entries_trimmed_while_pending_are_acknowledged_and_a_deleted_stream_is_followed(redis_client):
    with FakeGrafana() as grafana:
        write_alerts(redis_client, FIRING)
        c = consumer(redis_client, grafana)
        with grafana.outage():
            assert c.poll_once(block=False).outage
        [(entry_id, _)] = redis_client.xrange(KEYS.alerts_stream())
        redis_client.xdel(KEYS.alerts_stream(), entry_id)  # e.g. MAXLEN trimming during a long outage
        assert total(drain(c), "trimmed") == 1
        assert redis_client.xpending(KEYS.alerts_stream(), "grafana-annotations")["pending"] == 0
        redis_client.delete(KEYS.alerts_stream())  # the group goes with it
        assert c.poll_once(block=False).read == 0  # noticed, not fatal
        write_alerts(redis_client, r.alert(alert_id="a2", ts=60_000, started_ms=60_000))
        assert total(drain(c), "created") == 1
    the_one_annotation(grafana, "a2")
    assert not any("alert_id:a1" in a["tags"] for a in grafana.annotations.values())
