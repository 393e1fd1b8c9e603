"""On-call channels end to end on real services: the demo's alerts (the pure monitor, as the
query's bridge would receive them) through the OutputRouter into a real Redis and a real
Prometheus Alertmanager (Debian's package, started by deploy/local/alertmanager.sh), with a
silence added by `replmon silence` on the way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pyarrow as pa
import pytest

from replmon.sinks.alertmanager import AlertmanagerSettings, AlertmanagerSink
from replmon.sinks.redis_sink import RedisSink, RedisSinkSettings
from replmon.sinks.silences import SilenceStore
from replmon.streaming import cli
from replmon.streaming.bridge import OutputRouter
from tests.state.test_monitor_vs_truth import run_monitor
from tests.state.test_root_cause import RESTART_AT, T0, demo_events

from .conftest import ROOT

SCRIPT = ROOT / "deploy" / "local" / "alertmanager.sh"


@pytest.fixture(scope="module")
def alertmanager_url():
    env = dict(os.environ, REPLMON_PYTHON=sys.executable)
    up = subprocess.run(
        ["bash", str(SCRIPT), "up"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert up.returncode == 0, up.stderr
    line = next(x for x in up.stdout.splitlines() if x.startswith("REPLMON_ALERTMANAGER__URL="))
    return line.split("=", 1)[1]


def am_alerts(url: str, cluster: str) -> list[dict]:
    q = urllib.request.quote(f'cluster="{cluster}"')
    with urllib.request.urlopen(f"{url}/api/v2/alerts?filter={q}", timeout=5) as r:
        return json.loads(r.read())


def post_marker(url: str, cluster: str) -> None:
    """An alert of the test's own, posted after replmon's: once Alertmanager shows it, it has
    applied every post before it (the positive marker for an alert that must not be there)."""
    body = json.dumps([{"labels": {"alertname": "TestMarker", "cluster": cluster}}]).encode()
    req = urllib.request.Request(
        f"{url}/api/v2/alerts", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200, r.status


def wait_for(predicate, timeout_s=10.0):
    """Alertmanager applies posted alerts asynchronously; poll with a bound."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


class Batch:
    """What foreachBatch hands the router: a frame of (kind, payload): the buckets' alerts and
    their brokers' activity (for the cluster step, streaming/bridge.py)."""

    def __init__(self, records):
        alerts, activity = records
        self.table = pa.table(
            {
                "kind": ["alerts"] * len(alerts) + ["activity"] * len(activity),
                "payload": [json.dumps(a) for a in (*alerts, *activity)],
            }
        )

    def toArrow(self):
        return self.table


def demo_batches(cluster: str):
    """The demo's alert records, renamed to a cluster of the test's own (Alertmanager keeps
    state across tests), split at the broker's restart."""
    events, lag_ms = demo_events()
    monitored = run_monitor(events, lag_ms)
    alerts = [dict(a, cluster=cluster) for a in monitored.alerts]
    activity = [dict(r, cluster=cluster) for r in monitored.activity]
    cut = T0 + RESTART_AT

    def before(report):
        return max(e for b in report["brokers"].values() for _, e in b.get("segments", [[0, 0]])) < cut

    return (
        ([a for a in alerts if a["ts"] < cut], [r for r in activity if before(r)]),
        ([a for a in alerts if a["ts"] >= cut], [r for r in activity if not before(r)]),
    )


def notified(redis_client, prefix):
    return [
        {k.decode(): v.decode() for k, v in fields.items()}
        for _, fields in redis_client.xrange(f"{prefix}:alerts:notify")
    ]


def router(redis_client, prefix, url):
    sink = RedisSink(redis_client, RedisSinkSettings(prefix=prefix))
    am = AlertmanagerSink(AlertmanagerSettings(url=url))
    return OutputRouter(None, sink, alertmanager=am, silences=SilenceStore(redis_client, prefix)), am


def test_broker_crash_pages_once_then_resolves(redis_client, alertmanager_url):
    cluster, prefix = "it-am-crash", "itam1"
    during, after = demo_batches(cluster)
    route, am = router(redis_client, prefix, alertmanager_url)
    route(Batch(during), 0)
    firing = wait_for(lambda: am_alerts(alertmanager_url, cluster))
    assert [(a["labels"]["alertname"], a["labels"]["broker"], a["labels"]["severity"]) for a in firing] == [
        ("BrokerUnavailable", "3", "critical")
    ], "one root-cause page on the on-call channel"
    assert "8 partitions under-replicated" in firing[0]["annotations"]["summary"]
    stream = notified(redis_client, prefix)
    crash = [e for e in stream if e["status"] == "firing" and int(e["ts"]) >= T0 + 100_000]
    assert [e["name"] for e in crash] == ["BrokerUnavailable"]
    everything = redis_client.xlen(f"{prefix}:alerts")
    assert everything > len(stream), "consequences are recorded in the full alert stream"
    route(Batch(after), 1)
    assert wait_for(lambda: not am_alerts(alertmanager_url, cluster)), "resolved in Alertmanager"
    assert am.firing() == []


def test_broker_maintenance_silence_end_to_end(
    redis_client,
    redis_server,
    alertmanager_url,
    monkeypatch,
    capsys,
):
    cluster, prefix = "it-am-silence", "itam2"
    monkeypatch.setenv("REPLMON_REDIS__PREFIX", prefix)
    assert (
        cli.main(
            [
                "silence",
                "--redis-url",
                f"redis://127.0.0.1:{redis_server.port}/0",
                "add",
                "--broker",
                "3",
                "--cluster",
                cluster,
                "--for",
                "30m",
                "--comment",
                "disk swap",
            ]
        )
        == 0
    )
    silence_id = capsys.readouterr().out.split()[0]
    during, _ = demo_batches(cluster)
    route, _ = router(redis_client, prefix, alertmanager_url)
    route(Batch(during), 0)
    records = [
        {k.decode(): v.decode() for k, v in f.items()} for _, f in redis_client.xrange(f"{prefix}:alerts")
    ]
    root = next(r for r in records if r["name"] == "BrokerUnavailable")
    assert json.loads(root["silenced_by"]) == [silence_id] and root["notify"] == "false"
    assert not any(e["name"] == "BrokerUnavailable" for e in notified(redis_client, prefix))
    post_marker(alertmanager_url, cluster)
    shown = wait_for(lambda: am_alerts(alertmanager_url, cluster))
    assert [a["labels"]["alertname"] for a in shown] == ["TestMarker"], "silenced: not sent to Alertmanager"
    assert SilenceStore(redis_client, prefix).expire(silence_id)


def test_firing_alerts_are_resent_before_alertmanager_forgets_them(alertmanager_url):
    cluster = "it-am-resend"
    am = AlertmanagerSink(AlertmanagerSettings(url=alertmanager_url, resend_interval_s=0.2))
    alert = {
        "alert_id": "r1",
        "name": "UnderMinIsr",
        "status": "firing",
        "severity": "critical",
        "cluster": cluster,
        "topic": "t",
        "partition": 0,
        "replica": None,
        "broker": None,
        "subject": f"{cluster}/t-0",
        "started_ms": int(time.time() * 1000),
        "ts": 0,
        "reason": "r",
        "cause": "min_isr",
        "caused_by": None,
        "notify": True,
    }
    am.send([alert])
    first = wait_for(lambda: am_alerts(alertmanager_url, cluster))
    am.start()
    try:
        later = wait_for(
            lambda: [
                a for a in am_alerts(alertmanager_url, cluster) if a["updatedAt"] > first[0]["updatedAt"]
            ],
            timeout_s=5,
        )
    finally:
        am.close()
    assert later, "the background resend refreshed the alert"
    am.send([dict(alert, status="resolved", ts=int(time.time() * 1000))])
    assert wait_for(lambda: not am_alerts(alertmanager_url, cluster))


def test_a_restart_keeps_resending_what_the_last_run_notified(redis_client, alertmanager_url):
    cluster, prefix = "it-am-restart", "itam3"
    during, _ = demo_batches(cluster)
    route, first_run = router(redis_client, prefix, alertmanager_url)
    route(Batch(during), 0)
    assert wait_for(lambda: am_alerts(alertmanager_url, cluster))
    # a new process: it learns the firing notified alerts from Redis, as `replmon run` does
    second_run = AlertmanagerSink(AlertmanagerSettings(url=alertmanager_url))
    stored = [json.loads(v) for v in redis_client.hvals(f"{prefix}:alerts:notify:firing")]
    assert second_run.restore(stored) == 1
    assert second_run.firing() == first_run.firing()
    assert second_run.resend() == 1
