"""Strict settings from the environment: every REPLMON_* variable is read by something, and
Kafka client options keep their dotted names (or fail, never silently drop security)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from replmon.streaming.environment import TOOLING_PREFIXES, TOOLING_VARIABLES, unknown_variables
from replmon.streaming.kafka_security import option_problems
from replmon.streaming.settings import Settings, SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "name,ok,why",
    [
        ("REPLMON_STREAM__LATENESS_MS", True, "a section field"),
        ("replmon_stream__lateness_ms", True, "names are case-insensitive, as the settings read them"),
        ("REPLMON_KAFKA__OPTIONS", True, "kafka options as JSON"),
        ("REPLMON_OUTPUT_DIR", True, "a top-level field"),
        ("REPLMON_STREAM", True, "a whole section as JSON"),
        ("REPLMON_PORT_OFFSET", True, "used by deploy/local/services.sh"),
        ("REPLMON_GRAFANA__URL", True, "the Grafana publisher's own settings"),
        ("REPLMON_GRAFANA_URL", True, "its flat name of an earlier release, read with a warning"),
        ("REPLMON_ANNOTATIONS__GROUP", True, "the annotation consumer's own settings"),
        ("REPLMON_ANNOTATIONS__NOPE", False, "not an annotation consumer setting"),
        ("REPLMON_FOO", False, "nothing reads it"),
        ("REPLMON_STREM__LATENESS_MS", False, "a misspelt section"),
        ("REPLMON_STREAM__LATENES_MS", False, "a misspelt field"),
        ("REPLMON_KAFKA__OPTIONS__SASL_JAAS_CONFIG", False, "would become sasl_jaas_config"),
        ("REPLMON_GRAFANA_NOPE", False, "not a Grafana publisher setting"),
        ("REPLMON_GRAFANA__NOPE", False, "not a Grafana publisher setting either"),
        ("OTHER_VAR", True, "not ours"),
    ],
)
def test_environment_variables(name, ok, why):
    assert (unknown_variables({name: "1"}, Settings) == []) == ok, why


def test_an_unknown_variable_stops_the_run_naming_it_and_the_likely_one(monkeypatch):
    monkeypatch.setenv("REPLMON_STREM__LATENESS_MS", "5")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "REPLMON_STREM__LATENESS_MS" in str(err.value)
    assert "REPLMON_STREAM__LATENESS_MS" in str(err.value)


def test_a_security_option_from_the_environment_keeps_its_dotted_name(monkeypatch):
    monkeypatch.setenv(
        "REPLMON_KAFKA__OPTIONS",
        '{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": "s3cret"}',
    )
    s = load_settings()
    assert {k: v.get_secret_value() for k, v in s.kafka.options.items()} == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "s3cret",
    }


def test_the_underscore_form_is_refused_with_the_json_form(monkeypatch):
    monkeypatch.setenv("REPLMON_KAFKA__OPTIONS__SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    with pytest.raises(SettingsError, match="REPLMON_KAFKA__OPTIONS='"):
        load_settings()


@pytest.mark.parametrize(
    "options,problem,why",
    [
        ({}, None, "plaintext by default"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "x"},
            None,
            "a complete SASL_SSL setup",
        ),
        (
            {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/t"},
            None,
            "the kafka. prefix is accepted",
        ),
        (
            {"security.protocol": "sasl_ssl", "sasl.jaas.config": "x", "sasl.mechanism": "scram-sha-256"},
            None,
            "Kafka reads protocol and mechanism case-insensitively",
        ),
        ({"security_protocol": "SASL_SSL"}, "not a Kafka client option name", "underscores"),
        ({"sasl.jaas.config": "x"}, "connection not authenticated", "SASL options over PLAINTEXT"),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "ssl.truststore.location": "/t",
                "sasl.jaas.config": "x",
                "sasl.mechanism": "PLAIN",
            },
            "not encrypted",
            "SSL options, no TLS",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
            "sasl.jaas.config: required",
            "no credentials",
        ),
        ({"security.protocol": "TLS"}, "is not one of", "an unknown protocol"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM", "sasl.jaas.config": "x"},
            "is not one of",
            "an unknown mechanism",
        ),
        ({"value.deserializer": "x"}, "always reads bytes", "Spark sets it"),
        ({"bootstrap.servers": "h:1"}, "kafka.bootstrap_servers", "replmon's own setting"),
    ],
)
def test_kafka_options(options, problem, why):
    problems = option_problems(options)
    if problem is None:
        assert problems == [], why
    else:
        assert any(problem in p for p in problems), (why, problems)
        assert not any(v in p for p in problems for v in ("x", "/t") if len(v) > 1), "values are secrets"


def test_every_replmon_variable_the_repository_uses_is_known():
    # Scripts, tests and benches: a new REPLMON_* variable must be a setting or be listed in
    # streaming/environment.py's TOOLING_VARIABLES, or every `replmon run` would refuse it.
    files = subprocess.run(
        ["git", "ls-files", "deploy", "tests", "bench", ".ci", "streaming", "sinks", "state"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    used = set()
    for f in files:
        path = ROOT / f
        if path.is_file() and path.suffix in ("", ".sh", ".py", ".yml", ".yaml", ".toml", ".env"):
            used |= set(re.findall(r"\bREPLMON_[A-Z0-9_]*[A-Z0-9_]", path.read_text(errors="ignore")))
    prefixes = {
        "REPLMON_GRAFANA__",
        "REPLMON_ANNOTATIONS__",
        "REPLMON_GRAFANA_",
        "REPLMON_ANNOTATIONS_",
        *TOOLING_PREFIXES,
    }
    assert not {n for n in used if n.endswith("_")} - prefixes, "a family not listed"
    used = {n for n in used if not n.endswith("_")}
    examples = {
        "REPLMON_FOO",
        "REPLMON_STREM__LATENESS_MS",
        "REPLMON_STREAM__LATENES_MS",
        "REPLMON_KAFKA__OPTIONS__SASL_JAAS_CONFIG",
        "REPLMON_GRAFANA_NOPE",
        "REPLMON_GRAFANA__NOPE",
        "REPLMON_ANNOTATIONS__NOPE",
        "REPLMON_KAFKA__OPTIONS__SECURITY_PROTOCOL",
        "REPLMON_MONITORED__OPTIONS__SASL_JAAS_CONFIG",
        "REPLMON_RULES__REPLICA_LAG_TIME_MAX",
    }
    unknown = unknown_variables(dict.fromkeys(used - examples, ""), Settings)
    assert unknown == [], f"add them to TOOLING_VARIABLES: {unknown}"
    assert set(TOOLING_VARIABLES) <= used | {"REPLMON_CONFIG"}, "an allow-listed name nothing uses"


def test_a_side_process_reads_its_flat_names_of_an_earlier_release_with_a_warning(monkeypatch, caplog):
    from replmon.streaming.settings import load_annotation_settings, load_grafana_settings

    for name in list(os.environ):
        if name.startswith(("REPLMON_GRAFANA_", "REPLMON_ANNOTATIONS_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("REPLMON_GRAFANA_TOKEN", "glsa_old")  # old name only
    monkeypatch.setenv("REPLMON_GRAFANA_FOLDER_UID", "old")  # both: the new one counts
    monkeypatch.setenv("REPLMON_GRAFANA__FOLDER_UID", "new")
    monkeypatch.setenv("REPLMON_ANNOTATIONS_GROUP", "annotators")
    with caplog.at_level("WARNING"):
        grafana, annotations = load_grafana_settings(), load_annotation_settings()
    assert grafana.token is not None and grafana.token.get_secret_value() == "glsa_old"
    assert (grafana.folder_uid, annotations.group) == ("new", "annotators")
    warnings = sorted(r.getMessage() for r in caplog.records)
    later = " (the old name goes in the next release)"
    assert warnings == [
        "REPLMON_ANNOTATIONS_GROUP is deprecated, use REPLMON_ANNOTATIONS__GROUP" + later,
        "REPLMON_GRAFANA_TOKEN is deprecated, use REPLMON_GRAFANA__TOKEN" + later,
    ]
    assert "glsa_old" not in caplog.text  # a name, never a value
