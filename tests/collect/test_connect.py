"""Which options each of replmon collect's two connections takes (streaming/collect/cli.py,
streaming/collect/connect.py), decided before anything connects. The connections themselves are
tested on real secured listeners: tests/integration/test_kafka_security.py."""

from __future__ import annotations

import json

import pytest

from replmon.streaming.cli import build_parser, main
from replmon.streaming.cli_flags import UsageError
from replmon.streaming.collect.cli import clusters, metrics_destination
from replmon.streaming.settings import load_settings

SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="s3cret-pw";'
SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM}
BASE = ["collect", "--cluster", "c", "--bootstrap", "monitored:9092", "--request-log", "1=x"]


@pytest.fixture(autouse=True)
def no_settings_from_outside(monkeypatch):
    for name in ("REPLMON_CONFIG", "REPLMON_KAFKA__BOOTSTRAP_SERVERS", "REPLMON_KAFKA__OPTIONS"):
        monkeypatch.delenv(name, raising=False)


def both(argv, monkeypatch, **env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = build_parser().parse_args(argv)
    settings = load_settings(None)
    bootstrap, _ = metrics_destination(args, settings)
    return clusters(args, settings, bootstrap)


def test_each_cluster_takes_its_own_section(monkeypatch):
    monitored, metrics = both(
        [*BASE, "--metrics-bootstrap", "metrics:9093"],
        monkeypatch,
        REPLMON_MONITORED__OPTIONS=json.dumps(SASL),
        REPLMON_KAFKA__OPTIONS=json.dumps({"security.protocol": "SSL"}),
        REPLMON_MONITORED__STARTUP_TIMEOUT_MS="7000",
    )
    assert (monitored.bootstrap, monitored.setting, monitored.protocol) == (
        "monitored:9092",
        "monitored",
        "SASL_PLAINTEXT",
    )
    assert monitored.config["sasl_plain_username"] == "u" and monitored.timeout_ms == 7000
    assert (metrics.bootstrap, metrics.setting, metrics.protocol) == ("metrics:9093", "kafka", "SSL")
    assert metrics.bootstrap_flag == "--metrics-bootstrap" and metrics.timeout_ms == 30_000
    assert "s3cret-pw" not in repr(monitored), "a Cluster's repr leaves its configuration out"


def test_a_metrics_topic_on_the_monitored_cluster_uses_its_options(monkeypatch):
    monitored, metrics = both(BASE, monkeypatch, REPLMON_MONITORED__OPTIONS=json.dumps(SASL))
    assert metrics.bootstrap == "monitored:9092" and metrics.config == monitored.config
    assert metrics.setting == "monitored"


def test_kafka_options_that_would_not_apply_are_refused(monkeypatch):
    with pytest.raises(UsageError, match=r"kafka\.options are set but would not take effect"):
        both(BASE, monkeypatch, REPLMON_KAFKA__OPTIONS=json.dumps(SASL))


def test_an_option_kafka_python_cannot_apply_stops_the_start_naming_it(monkeypatch, capsys):
    # Before any connection: monitored:9092 does not resolve, and the message is not about it.
    monkeypatch.setenv("REPLMON_MONITORED__OPTIONS", json.dumps({**SASL, "fetch.max.bytes": "1"}))
    assert main(BASE) == 2
    err = capsys.readouterr().err
    assert err.startswith("replmon collect: invalid settings\n"), err
    assert "monitored.options.fetch.max.bytes: replmon collect's Kafka client (kafka-python)" in err
    assert "s3cret-pw" not in err and "Traceback" not in err


def test_a_malformed_option_name_is_refused_as_for_run(monkeypatch, capsys):
    monkeypatch.setenv("REPLMON_MONITORED__OPTIONS__SASL_JAAS_CONFIG", SCRAM)
    assert main(BASE) == 2
    err = capsys.readouterr().err
    assert "give them all as JSON in REPLMON_MONITORED__OPTIONS" in err and "s3cret-pw" not in err
