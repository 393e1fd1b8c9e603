"""Which REPLMON_* environment variables exist: settings, and the few the scripts use.

Settings are strict, and that includes their names in the environment: a misspelt
`REPLMON_STREM__LATENESS_MS` would otherwise be ignored without a word. Every REPLMON_* variable
must be a setting (`REPLMON_<FIELD>`, `REPLMON_<SECTION>__<FIELD>`, a whole section as JSON),
a setting of another replmon component with its own prefix, or one of the variables below that
scripts and tests use. Adding a variable to a script? Add it here (tests/test_environment.py
fails until you do).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

PREFIX = "REPLMON_"

# Variables read by scripts, tests and benches, not by the settings: name -> who reads it.
TOOLING_VARIABLES = {
    "REPLMON_CONFIG": "the settings file (streaming/settings.py, like --config)",
    "REPLMON_PYTHON": "deploy/dev.sh, deploy/local/services.sh: the interpreter to use",
    "REPLMON_PORT_OFFSET": "deploy/local/services.sh: ports of side-by-side checkouts",
    "REPLMON_SERVICES_TIMEOUT": "deploy/local/services.sh: how long to wait for a service",
    "REPLMON_SERVICES_UP_TIMEOUT": "tests/integration/conftest.py: services.sh up time limit",
    "REPLMON_KAFKA_HEAP": "deploy/local/services.sh: the local broker's heap",
    "REPLMON_KAFKA_BROKERS": "deploy/local/services.sh and tests: local broker count",
    "REPLMON_KAFKA_VERSION": "deploy/local/services.sh and .run/env: the local brokers' Kafka version",
    "REPLMON_KAFKA_MODE": "deploy/local/services.sh and .run/env: kraft, or zk (3.x)",
    "REPLMON_KAFKA_IBP": "deploy/local/services.sh: inter.broker.protocol.version in zk mode",
    "REPLMON_JUDGE_KAFKA_VERSION": "tests/judge/cluster.py: the judge's brokers' Kafka version",
    "REPLMON_JUDGE_PER_BROKER": "tests/judge/test_perbroker.py: 1 runs the per-broker judge case",
    "REPLMON_KAFKA_BOOTSTRAP": "deploy/local/.run/env: the local broker's address",
    "REPLMON_SPARK_JARS": "deploy/local/.run/env and tests: Spark's Kafka connector jars",
    "REPLMON_SPARK_KAFKA_VERSION": "deploy/local/.run/env: the connector's version",
    "REPLMON_REDIS_URL": "deploy/local/.run/env: the local Redis",
    "REPLMON_REDIS_PORT": "deploy/grafana/docker-compose.yml: Redis port for Grafana",
    "REPLMON_REDIS_PASSWORD": "deploy/grafana: the Redis password Grafana's data source uses",
    "REPLMON_SERVICES_ALERTMANAGER": "deploy/local/services.sh: 1 starts the local Alertmanager",
    "REPLMON_ALERTMANAGER_CONFIG": "deploy/local/alertmanager.sh: its configuration file",
    "REPLMON_ALERTMANAGER_RUN": "deploy/local/alertmanager.sh: its run dir (a second instance)",
    "REPLMON_JUDGE_RUNS": "tests/judge: how many times each fault case runs (default 1)",
    "REPLMON_COLLECT_SERVICES_RUN": "tests/integration/test_collect_faults.py: its cluster's run dir",
    "REPLMON_COLLECT_PORT_OFFSET": "tests/integration/test_collect_faults.py: its cluster's port offset",
    "REPLMON_SERVICES_RUN": "deploy/local/services.sh: its run folder (a second cluster)",
    "REPLMON_TEST_SERIAL": "deploy/dev.sh test: 1 runs the judge group after the rest, not beside it",
    "REPLMON_KAFKA_RUN": "deploy/local/.run/env, bench/collector.py: the brokers' run folder",
    "REPLMON_REQUEST_LOG": "deploy/local/services.sh: 1 turns on the brokers' request log",
    "REPLMON_REQUEST_LOG_FRAGMENT": "deploy/local/services.sh: the request log's log4j lines (a bench)",
    "REPLMON_KAFKA_SASL_BOOTSTRAP": "deploy/local/.run/env (up --security): the SASL_PLAINTEXT listeners",
    "REPLMON_KAFKA_SSL_BOOTSTRAP": "deploy/local/.run/env (up --security): the SSL listeners",
    "REPLMON_KAFKA_SASL_SSL_BOOTSTRAP": "deploy/local/.run/env (up --security): the SASL_SSL listeners",
    "REPLMON_KAFKA_SCRAM_USER": "deploy/local/.run/env (up --security): the local SCRAM user",
    "REPLMON_KAFKA_SCRAM_PASSWORD": "deploy/local/.run/env (up --security): its password",
    "REPLMON_KAFKA_TLS_CA": "deploy/local/.run/env (up --security): the local CA (PEM)",
    "REPLMON_REPLICA_LAG_TIME_MAX_MS": "deploy/local/services.sh: the local brokers' setting",
    "REPLMON_BROKER_SESSION_TIMEOUT_MS": "deploy/local/services.sh: the local brokers' setting",
    "REPLMON_SPARK_MASTER": "deploy/local/.run/spark/env: the local Spark cluster's master URL",
    "REPLMON_SPARK_MASTER_UI": "deploy/local/.run/spark/env: the local Spark master's web UI",
    "REPLMON_SPARK_WORKER_CORES": "deploy/local/spark-cluster.sh: cores each worker offers",
    "REPLMON_SPARK_WORKER_MEMORY": "deploy/local/spark-cluster.sh: memory each worker offers",
    "REPLMON_SPARK_DAEMON_MEMORY": "deploy/local/spark-cluster.sh: heap of the master and workers",
    "REPLMON_KAFKA_PORT": "deploy/compose/docker-compose.yml: the stack's Kafka port on the host",
}
# Families of such variables: every name with this prefix.
TOOLING_PREFIXES = {
    "REPLMON_KAFKA_NODE_PROPS_": "deploy/local/services.sh: extra properties of broker <i>",
}


def _component_fields() -> dict[str, set[str]]:
    """Other replmon components with their own settings prefix: prefix -> field names. The
    nested prefix (`REPLMON_GRAFANA__`) comes before the flat one of an earlier release
    (`REPLMON_GRAFANA_`, still read with a warning), which is a prefix of it."""
    from replmon.sinks.grafana import GrafanaSettings
    from replmon.sinks.grafana_annotation_consumer import AnnotationConsumerSettings

    grafana, annotations = set(GrafanaSettings.model_fields), set(AnnotationConsumerSettings.model_fields)
    return {
        "REPLMON_GRAFANA__": grafana,
        "REPLMON_ANNOTATIONS__": annotations,
        "REPLMON_GRAFANA_": grafana,
        "REPLMON_ANNOTATIONS_": annotations,
    }


def known_setting_names(settings_cls) -> set[str]:
    """Every REPLMON_* name the settings read: fields, sections as JSON, section fields."""
    names = set()
    for name, field in settings_cls.model_fields.items():
        names.add(f"{PREFIX}{name}".upper())
        section = field.annotation
        sub = getattr(section, "model_fields", None)
        if sub:
            names.update(f"{PREFIX}{name}__{f}".upper() for f in sub)
    return names


def unknown_variables(environ: Mapping[str, str], settings_cls) -> list[str]:
    """One line per REPLMON_* variable that nothing reads, with the likely intended name."""
    known = known_setting_names(settings_cls) | set(TOOLING_VARIABLES)
    components = _component_fields()
    problems = []
    for var in sorted(environ):
        upper = var.upper()
        if not upper.startswith(PREFIX) or upper in known or upper.startswith(tuple(TOOLING_PREFIXES)):
            continue
        if any(upper.startswith(p) and upper[len(p) :].lower() in f for p, f in components.items()):
            continue
        problems.append(_explain(var, upper, known))
    return problems


def _explain(var: str, upper: str, known: Iterable[str]) -> str:
    options = upper.partition("__OPTIONS__")[0] + "__OPTIONS"
    if "__OPTIONS__" in upper and options in known:  # kafka.options, monitored.options
        return (
            f"{var}: Kafka client options have dotted names that an environment variable "
            f"cannot carry; give them all as JSON in {options}, e.g. "
            f'{options}=\'{{"security.protocol": "SASL_SSL", '
            f'"sasl.jaas.config": "..."}}\''
        )
    tails = {name[len(PREFIX) :]: name for name in known}
    close = difflib.get_close_matches(upper[len(PREFIX) :], list(tails), n=1, cutoff=0.8)
    hint = f" (did you mean {tails[close[0]]}?)" if close else ""
    setting = upper[len(PREFIX) :].lower().replace("__", ".")
    return f"{var}: {setting} is not a replmon setting{hint}"
