"""Kafka client options (kafka.options) checked before anything connects.

A Kafka client ignores an option it does not know (with a log line nobody reads), so a
misspelt or mangled security option means a connection without the security it asked for.
Here an option that cannot take effect is an error naming it; values are secrets and never
appear in a message, except the protocol and mechanism names, which are not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

OPTION_NAME = re.compile(r"^[a-z][a-z0-9]*([.-][a-z0-9]+)*$")
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")
# Set by replmon's own settings or by Spark's Kafka source itself (it refuses or overrides them).
MANAGED = {
    "bootstrap.servers": "set kafka.bootstrap_servers instead",
    "key.deserializer": "Spark's Kafka source always reads bytes",
    "value.deserializer": "Spark's Kafka source always reads bytes",
    "enable.auto.commit": "Spark tracks offsets in its checkpoint",
    "auto.offset.reset": "set kafka.starting_offsets instead",
    "interceptor.classes": "Spark's Kafka source does not support interceptors",
}


def option_problems(options: Mapping[str, str]) -> list[str]:
    """One message per option that cannot be applied as given (empty: all good). `options`
    maps names (with or without the `kafka.` prefix) to plain values."""
    names = {(n[len("kafka.") :] if n.startswith("kafka.") else n): v for n, v in options.items()}
    problems = []
    for name in names:
        if not OPTION_NAME.match(name):
            problems.append(
                f"kafka.options.{name}: not a Kafka client option name (they are "
                f"lower case and dotted, e.g. {name.lower().replace('_', '.')}); from "
                f"the environment give options as JSON in REPLMON_KAFKA__OPTIONS"
            )
        elif name in MANAGED:
            problems.append(f"kafka.options.{name}: cannot be set here: {MANAGED[name]}")
    protocol = names.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        problems.append(f"kafka.options.security.protocol: {protocol!r} is not one of {', '.join(PROTOCOLS)}")
        return problems
    sasl = [n for n in names if n.startswith("sasl.")]
    ssl = [n for n in names if n.startswith("ssl.")]
    if sasl and not protocol.startswith("SASL_"):
        problems.append(
            f"kafka.options: {', '.join(sorted(sasl))} set but security.protocol is "
            f"{protocol}: they would be ignored and the connection not authenticated "
            f"(set security.protocol to SASL_SSL or SASL_PLAINTEXT)"
        )
    if ssl and protocol not in ("SSL", "SASL_SSL"):
        problems.append(
            f"kafka.options: {', '.join(sorted(ssl))} set but security.protocol is "
            f"{protocol}: they would be ignored and the connection not encrypted "
            f"(set security.protocol to SSL or SASL_SSL)"
        )
    if protocol.startswith("SASL_"):
        mechanism = names.get("sasl.mechanism", "GSSAPI").upper()
        if mechanism not in MECHANISMS:
            problems.append(
                f"kafka.options.sasl.mechanism: {mechanism!r} is not one of {', '.join(MECHANISMS)}"
            )
        elif mechanism != "GSSAPI" and not names.get("sasl.jaas.config"):
            problems.append(
                f"kafka.options.sasl.jaas.config: required with security.protocol "
                f"{protocol} and sasl.mechanism {mechanism} (the credentials)"
            )
    return problems
