"""Settings are strict, validated before Spark starts, and never show secrets."""

from __future__ import annotations

import pytest

from replmon.streaming.settings import Settings, SettingsError, load_settings


def test_defaults_need_no_configuration(monkeypatch):
    monkeypatch.delenv("REPLMON_CONFIG", raising=False)
    s = load_settings()
    assert s.rules.replica_lag_time_max_ms == 30000  # Kafka's default since 2.5 (KIP-537)
    assert s.monitor_config().replica_lag_time_max_ms == 30000


def test_unknown_key_fails_naming_it(monkeypatch):
    monkeypatch.setenv("REPLMON_RULES__REPLICA_LAG_TIME_MAX", "10")  # misspelt
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "rules.replica_lag_time_max" in str(err.value)


def test_bad_value_fails_naming_the_setting(monkeypatch):
    monkeypatch.setenv("REPLMON_RULES__MIN_INSYNC_REPLICAS", "0")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "rules.min_insync_replicas" in str(err.value)
    assert err.value.code != 0


def test_toml_file_is_read(tmp_path, monkeypatch):
    f = tmp_path / "replmon.toml"
    f.write_text(
        '[rules]\nreplica_lag_time_max_ms = 10000\nrule_set = "v0_8"\n'
        '[kafka]\nbootstrap_servers = "127.0.0.1:19092"\n'
        '[kafka.options]\n"sasl.jaas.config" = "secret-jaas"\n'
        '"security.protocol" = "SASL_SSL"\n"sasl.mechanism" = "PLAIN"\n'
    )
    monkeypatch.delenv("REPLMON_CONFIG", raising=False)
    s = load_settings(str(f))
    assert "REPLMON_CONFIG" not in __import__("os").environ
    assert s.rules.replica_lag_time_max_ms == 10000 and s.rules.rule_set == "v0_8"
    assert "secret-jaas" not in repr(s) and "secret-jaas" not in str(s.model_dump())


def test_missing_settings_file_is_a_clear_error():
    with pytest.raises(SettingsError, match="not found"):
        load_settings("/nonexistent/replmon.toml")


def test_kafka_options_reach_spark_prefixed_and_secret_values_only_there():
    from replmon.streaming.sources import kafka_options

    s = Settings(
        kafka={
            "bootstrap_servers": "b:9092",
            "options": {"security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": "pw"},
        }
    )
    opts = kafka_options(s.kafka)
    assert opts["kafka.security.protocol"] == "SASL_SSL"
    assert opts["kafka.sasl.jaas.config"] == "pw"
    assert opts["subscribe"] == "replmon.fetch-metrics" and opts["failOnDataLoss"] == "true"
    assert "pw" not in repr(s)
