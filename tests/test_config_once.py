"""Config is stated once (docs/contributing.md, Stated once): the engine's frozen config is
built from the settings by field name, sinks are built from their settings sections by field
name, and no default is stated in two places (streaming/settings.py's docstring says where each
one lives)."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import operator
import os
import re
import tomllib
import typing
from pathlib import Path

import pytest
import yaml

from replmon.sinks.alertmanager import AlertmanagerSettings
from replmon.sinks.grafana import GrafanaSettings
from replmon.sinks.grafana_annotation_consumer import AnnotationConsumerSettings
from replmon.sinks.redis_client import RedisConnectionSettings
from replmon.sinks.redis_sink import RedisSinkSettings
from replmon.state.monitor import MonitorConfig
from replmon.streaming.contract import METRICS_TOPIC
from replmon.streaming.settings import (
    ENGINE_SECTIONS,
    AlertmanagerOut,
    RedisOut,
    Settings,
    load_annotation_settings,
    load_grafana_settings,
    load_settings,
    monitor_config,
    sink_settings,
)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = ("state", "streaming", "sinks", "dashboards")
SECTIONS = {name: field.annotation for name, field in Settings.model_fields.items()}


def _sections_declaring(name: str) -> list[str]:
    return [s for s, model in SECTIONS.items() if name in getattr(model, "model_fields", {})]


def _other_value(field) -> object:
    """A valid value of a setting that is not its default."""
    default = field.default
    choices = typing.get_args(field.annotation)
    if choices:
        return next(c for c in choices if c != default)
    if isinstance(default, float):
        return default / 2
    return default + 1


# --- the engine ---------------------------------------------------------------------------
def test_the_engine_config_states_no_default():
    stated = [
        f.name
        for f in dataclasses.fields(MonitorConfig)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    ]
    assert stated == [], "state it as a setting in streaming/settings.py instead"


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(MonitorConfig)])
def test_every_engine_field_is_a_setting_in_exactly_one_section(name):
    # Every section counts, so that a setting of the same name elsewhere cannot be mistaken for it.
    homes = _sections_declaring(name)
    assert len(homes) == 1 and homes[0] in ENGINE_SECTIONS, homes


def test_every_engine_setting_reaches_the_engine(monkeypatch):
    monkeypatch.delenv("REPLMON_CONFIG", raising=False)
    expected = {}
    for f in dataclasses.fields(MonitorConfig):
        [section] = _sections_declaring(f.name)
        expected[f.name] = _other_value(SECTIONS[section].model_fields[f.name])
        monkeypatch.setenv(f"REPLMON_{section}__{f.name}".upper(), str(expected[f.name]))
    assert dataclasses.asdict(load_settings().monitor_config()) == expected


def test_monitor_config_is_the_defaults_and_reads_no_environment(monkeypatch):
    monkeypatch.setenv("REPLMON_ALERTS__HW_STALL_MS", "7")
    defaults = {
        f.name: SECTIONS[_sections_declaring(f.name)[0]].model_fields[f.name].default
        for f in dataclasses.fields(MonitorConfig)
    }
    assert dataclasses.asdict(monitor_config()) == defaults
    assert dataclasses.asdict(monitor_config(hw_stall_ms=5)) == {**defaults, "hw_stall_ms": 5}


def test_monitor_config_checks_what_it_is_given():
    with pytest.raises(TypeError, match="hw_stall"):
        monitor_config(hw_stall=5)  # misspelt
    with pytest.raises(ValueError, match="hw_stall_ms"):
        monitor_config(hw_stall_ms=0)  # as alerts.hw_stall_ms refuses it


# --- the sinks ----------------------------------------------------------------------------
# A settings section and the sink settings models it is built into (streaming/*_out.py).
SINK_SECTIONS = [
    (RedisOut, (RedisConnectionSettings, RedisSinkSettings)),
    (AlertmanagerOut, (AlertmanagerSettings,)),
]


@pytest.mark.parametrize("section, sinks", SINK_SECTIONS, ids=lambda x: getattr(x, "__name__", ""))
def test_every_sink_setting_reaches_a_sink_and_keeps_the_sinks_default(section, sinks):
    for name, field in section.model_fields.items():
        users = [sink for sink in sinks if name in sink.model_fields]
        assert users, f"{section.__name__}.{name} reaches no sink"
        for sink in users:
            if field.default is not None:  # None: unset (url: that output is off)
                assert field.default == sink.model_fields[name].default, (sink.__name__, name)


def test_a_sink_is_built_from_every_setting_of_its_section():
    redis = RedisOut(
        url="rediss://cache:6380/2",
        username="writer",
        ssl_ca_certs="/ca.pem",
        prefix="p2",
        alerts_maxlen=123,
        series_maxlen=45,
        quarantine_maxlen=678,
        retries=9,
    )
    connection = sink_settings(RedisConnectionSettings, redis)
    assert (connection.url, connection.username, connection.ssl_ca_certs) == (
        "rediss://cache:6380/2",
        "writer",
        "/ca.pem",
    )
    sink = sink_settings(RedisSinkSettings, redis)
    assert (sink.prefix, sink.alerts_maxlen, sink.series_maxlen, sink.quarantine_maxlen, sink.retries) == (
        "p2",
        123,
        45,
        678,
        9,
    )
    am = sink_settings(AlertmanagerSettings, AlertmanagerOut(url="http://am:9093", resend_interval_s=7.0))
    assert (am.url, am.resend_interval_s) == ("http://am:9093", 7.0)


# --- one statement of each default ----------------------------------------------------------
_OPS = {ast.Mult: operator.mul, ast.Add: operator.add, ast.Sub: operator.sub, ast.Pow: operator.pow}
_OPS |= {ast.LShift: operator.lshift}


def _value(node: ast.AST) -> object:
    """A literal (or constant arithmetic such as 30 * 24 * 3600); Ellipsis if it is not one."""
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _value(node.left), _value(node.right)
        if isinstance(left, int | float) and isinstance(right, int | float):
            return _OPS[type(node.op)](left, right)
        return ...
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ...


def _field_default(node: ast.AST) -> object:
    """A class attribute's default: `= 5` or `= Field(default=5, ...)`."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Field":
        given = [kw.value for kw in node.keywords if kw.arg == "default"] or node.args[:1]
        return _value(given[0]) if given else ...
    return _value(node)


SETTINGS_BASES = {"BaseModel", "BaseSettings", "_Section"}


def stated_defaults() -> tuple[dict[str, list[tuple[str, object]]], dict[str, list[tuple[str, object]]]]:
    """Defaults stated in the package's code, by name: (declared, others). Declared are settings
    model fields and command-line flags (--state-dir is state_dir); others are class attributes and
    function parameters. Only real values count: None, 0, False and empty ones mean 'unset'."""
    declared: dict[str, list[tuple[str, object]]] = {}
    others: dict[str, list[tuple[str, object]]] = {}

    def add(into, name: str, owner: str, value: object) -> None:
        if value is not ... and value:
            into.setdefault(name, []).append((owner, value))

    for folder in PACKAGE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    bases = {getattr(b, "id", getattr(b, "attr", None)) for b in node.bases}
                    into = declared if bases & SETTINGS_BASES else others
                    for st in node.body:
                        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value:
                            add(into, st.target.id, node.name, _field_default(st.value))
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    a = node.args
                    positional = a.posonlyargs + a.args
                    pairs = list(
                        zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True)
                    )
                    pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d]
                    for arg, default in pairs:
                        add(others, arg.arg, f"{node.name}()", _value(default))
                elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                    flags = [_value(x) for x in node.args]
                    long = [f for f in flags if isinstance(f, str) and f.startswith("--")]
                    for kw in node.keywords:
                        if kw.arg == "default" and long:
                            add(
                                declared,
                                long[0][2:].replace("-", "_"),
                                f"{path.stem} {long[0]}",
                                _value(kw.value),
                            )
    return declared, others


# Settings of the same name that are different facts: (name, owner) -> why.
DIFFERENT_FACTS = {
    ("retries", "AnnotationConsumerSettings"): "each sink has its own retry policy",
    ("retries", "AlertmanagerSettings"): "each sink has its own retry policy",
    ("backoff_initial_s", "AnnotationConsumerSettings"): "each sink has its own retry policy",
    ("backoff_max_s", "AnnotationConsumerSettings"): "each sink has its own retry policy",
    ("timeout_s", "AlertmanagerSettings"): "each service has its own timeout",
    ("timeout_s", "GrafanaSettings"): "each service has its own timeout",
    ("url", "GrafanaSettings"): "Grafana's address, not Redis's",
    ("redis_url", "GrafanaSettings"): "Redis as Grafana's server reaches it (a data source setting)",
    ("brokers", "ClusterSpec"): "the simulated cluster's brokers, not a count",
    ("replica_lag_time_max_ms", "ClusterSpec"): "the simulated cluster's configuration",
    ("min_insync_replicas", "ClusterSpec"): "the simulated cluster's configuration",
    ("rule_set", "ClusterSpec"): "the simulated cluster's configuration",
    ("replication_factor", "TopicSpec"): "a simulated topic's, not the created topic's",
    (
        "replication_factor",
        "create_topic()",
    ): "callers on the local one-broker cluster; the flag passes its own",
    ("heartbeat_interval_ms", "ClusterSpec"): "the simulated collector's, not a real one's",
    ("partitions", "cli --partitions"): "the topic `simulate` creates, not the one `collect` creates",
}


def test_no_default_is_stated_twice():
    declared, others = stated_defaults()
    twice = {}
    for name, places in declared.items():
        all_places = places + others.get(name, [])
        unexplained = [(owner, v) for owner, v in all_places if (name, owner) not in DIFFERENT_FACTS]
        if len(all_places) > 1 and len(unexplained) > 1:
            twice[name] = all_places
    assert twice == {}, "state each once, and take it from there (streaming/settings.py's docstring)"


def test_every_different_fact_is_still_there():
    declared, others = stated_defaults()
    found = {(name, owner) for table in (declared, others) for name, ps in table.items() for owner, _ in ps}
    assert set(DIFFERENT_FACTS) <= found, set(DIFFERENT_FACTS) - found


def test_the_metrics_topic_is_named_once():
    places = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for folder in PACKAGE_DIRS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value == METRICS_TOPIC
    ]
    assert [place.split(":")[0] for place in places] == ["streaming/contract.py"], places


# --- the documented defaults ----------------------------------------------------------------
def documented_defaults(doc: str, header: str) -> dict[str, str | None]:
    """A docs table of settings: lower-cased setting name -> the default it gives (None: blank).
    Rows whose default is prose (e.g. 'host name') are left out."""
    lines = (ROOT / "docs" / doc).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    documented: dict[str, str | None] = {}
    for line in itertools.takewhile(lambda s: s.startswith("|"), lines[start + 2 :]):
        names_cell, default_cell = (cell.strip() for cell in line.strip("|").split("|")[:2])
        values = re.findall(r"`([^`]+)`", default_cell) or re.findall(r"^[\d.]+$", default_cell)
        if default_cell and not values:
            continue
        names = re.findall(r"`([^`]+)`", names_cell)
        for i, name in enumerate(names):
            documented[name.lower()] = values[min(i, len(values) - 1)] if values else None
    return documented


def _same(documented: str | None, default: object) -> bool:
    if documented is None or default is None:
        return documented is default
    if isinstance(default, bool):
        return documented == str(default).lower()
    if isinstance(default, int | float):
        return float(documented) == default
    return documented == str(default)


@pytest.mark.parametrize(
    "doc, header, model",
    [
        ("redis.md", "| setting | default | bounds |", RedisSinkSettings),
        ("grafana.md", "| setting (`REPLMON_ANNOTATIONS__…`)", AnnotationConsumerSettings),
        ("grafana.md", "| setting (`REPLMON_GRAFANA__…`)", GrafanaSettings),
    ],
    ids=["redis sink", "annotation consumer", "grafana publisher"],
)
def test_the_documented_defaults_are_the_models(doc, header, model):
    documented = documented_defaults(doc, header)
    assert documented, "the table is found"
    wrong = {
        name: (value, model.model_fields[name].default)
        for name, value in documented.items()
        if not _same(value, model.model_fields[name].default)
    }
    assert wrong == {}, f"docs/{doc} says (documented, default)"


def test_the_deploy_files_name_the_metrics_topic():
    compose = yaml.safe_load((ROOT / "deploy" / "compose" / "docker-compose.yml").read_text())
    command = compose["services"]["kafka-init"]["command"]
    assert command[command.index("--topic") + 1] == METRICS_TOPIC
    k8s = yaml.safe_load_all((ROOT / "deploy" / "k8s" / "replmon.yaml").read_text())
    [config] = [d["data"]["replmon.toml"] for d in k8s if d and d["kind"] == "ConfigMap"]
    assert tomllib.loads(config)["kafka"]["subscribe"] == METRICS_TOPIC


# --- the side processes' settings (Grafana publisher, annotation consumer) -------------------
def test_only_the_settings_loader_reads_the_environment():
    readers = []
    for folder in PACKAGE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "streaming" / "settings.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                bases = {getattr(b, "id", getattr(b, "attr", None)) for b in getattr(node, "bases", ())}
                if isinstance(node, ast.ClassDef) and "BaseSettings" in bases:
                    readers.append(f"{path.relative_to(ROOT)}: class {node.name}")
    assert readers == [], "a settings model outside streaming/settings.py reads the environment"


@pytest.mark.parametrize(
    "load, model, prefix",
    [
        (load_grafana_settings, GrafanaSettings, "REPLMON_GRAFANA__"),
        (load_annotation_settings, AnnotationConsumerSettings, "REPLMON_ANNOTATIONS__"),
    ],
    ids=["grafana publisher", "annotation consumer"],
)
def test_a_side_process_reads_its_env_names_into_its_sink_model_and_keeps_its_defaults(
    monkeypatch, load, model, prefix
):
    for name in list(os.environ):
        if name.startswith(("REPLMON_GRAFANA_", "REPLMON_ANNOTATIONS_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("REPLMON_GRAFANA__TOKEN", "glsa_test")  # the publisher needs a credential
    changed = {"folder_uid": "ops"} if model is GrafanaSettings else {"group": "annotators"}
    for name, value in changed.items():
        monkeypatch.setenv(f"{prefix}{name}".upper(), value)
    settings = load()
    assert type(settings) is model
    for name, field in model.model_fields.items():
        if name in changed:
            assert getattr(settings, name) == changed[name]
        elif name not in ("token", "consumer"):  # the one set above; the host name
            assert getattr(settings, name) == field.default, name


def test_the_consumers_redis_settings_keep_the_connections_defaults():
    # redis_<name> is RedisConnectionSettings' <name>: a default of its own would be a second one
    for name, field in AnnotationConsumerSettings.model_fields.items():
        if name.startswith("redis_"):
            assert field.default == RedisConnectionSettings.model_fields[name[6:]].default, name
    assert (
        AnnotationConsumerSettings.model_fields["key_prefix"].default
        == RedisSinkSettings.model_fields["prefix"].default
    )
