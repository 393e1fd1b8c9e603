"""Kafka client options (kafka.options, monitored.options) checked before anything connects.

A Kafka client ignores an option it does not know (with a log line nobody reads), so a
misspelt or mangled security option means a connection without the security it asked for.
Here an option that cannot take effect is an error naming it; values are secrets and never
appear in a message, except the protocol and mechanism names, which are not.

The options are Kafka's own client options, by their dotted Java names, for both commands:
`replmon run` hands them to Spark's Kafka source (Kafka's Java client) as they are;
`replmon collect`'s clients are kafka-python's, which take them through `python_client_config`
(one table, `PYTHON_CLIENT`): an option it has no equivalent for is an error there too.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def _plain_names(options: Mapping[str, str]) -> dict[str, str]:
    return {(n[len("kafka.") :] if n.startswith("kafka.") else n): v for n, v in options.items()}


def option_problems(
    options: Mapping[str, str], setting: str = "kafka.options", managed: Mapping[str, str] = MANAGED
) -> list[str]:
    """One message per option that cannot be applied as given (empty: all good). `options`
    maps names (with or without the `kafka.` prefix) to plain values; `setting` is where they
    are set, `managed` the names set elsewhere (name -> where)."""
    names = _plain_names(options)
    env = "REPLMON_" + setting.upper().replace(".", "__")
    problems = []
    for name in names:
        if not OPTION_NAME.match(name):
            problems.append(
                f"{setting}.{name}: not a Kafka client option name (they are "
                f"lower case and dotted, e.g. {name.lower().replace('_', '.')}); from "
                f"the environment give options as JSON in {env}"
            )
        elif name in managed:
            problems.append(f"{setting}.{name}: cannot be set here: {managed[name]}")
    protocol = names.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        problems.append(f"{setting}.security.protocol: {protocol!r} is not one of {', '.join(PROTOCOLS)}")
        return problems
    sasl = [n for n in names if n.startswith("sasl.")]
    ssl_names = [n for n in names if n.startswith("ssl.")]
    if sasl and not protocol.startswith("SASL_"):
        problems.append(
            f"{setting}: {', '.join(sorted(sasl))} set but security.protocol is "
            f"{protocol}: they would be ignored and the connection not authenticated "
            f"(set security.protocol to SASL_SSL or SASL_PLAINTEXT)"
        )
    if ssl_names and protocol not in ("SSL", "SASL_SSL"):
        problems.append(
            f"{setting}: {', '.join(sorted(ssl_names))} set but security.protocol is "
            f"{protocol}: they would be ignored and the connection not encrypted "
            f"(set security.protocol to SSL or SASL_SSL)"
        )
    if protocol.startswith("SASL_"):
        mechanism = names.get("sasl.mechanism", "GSSAPI").upper()
        if mechanism not in MECHANISMS:
            problems.append(f"{setting}.sasl.mechanism: {mechanism!r} is not one of {', '.join(MECHANISMS)}")
        elif mechanism != "GSSAPI" and not names.get("sasl.jaas.config"):
            problems.append(
                f"{setting}.sasl.jaas.config: required with security.protocol "
                f"{protocol} and sasl.mechanism {mechanism} (the credentials)"
            )
    return problems


# ---------------------------------------------------------------- kafka-python (replmon collect)


class Secret(str):
    """A password handed to kafka-python: the value itself, but its repr (which a logged
    configuration dict shows: kafka-python logs its whole configuration at DEBUG) is masked."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'**********'"


# The login module each mechanism takes in sasl.jaas.config (Kafka's own classes).
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)\b(?P<opts>.*?);?\s*$", re.S
)
_JAAS_OPTION = re.compile(r'\s*(?P<key>[\w.-]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s";]+))')
# Kafka's client option -> what replmon collect's kafka-python clients take for it. The SASL
# credentials (sasl.jaas.config) and the stores' types are translated below; any other option
# has no kafka-python equivalent here, so it could not take effect and is an error.
PYTHON_CLIENT = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.jaas.config": "sasl_plain_username, sasl_plain_password",
    "ssl.truststore.type": "(PEM only)",
    "ssl.truststore.location": "ssl_cafile",
    "ssl.keystore.type": "(PEM only)",
    "ssl.keystore.location": "ssl_certfile (the key in the same file)",
    "ssl.key.password": "ssl_password",
    "ssl.endpoint.identification.algorithm": "ssl_check_hostname",
    "client.id": "client_id",
}


def jaas_options(text: str) -> tuple[str, dict[str, str]] | None:
    """(login module, options) of a one-module JAAS line, as Kafka's client parses
    sasl.jaas.config; None if it is not one."""
    m = _JAAS.match(text)
    if not m:
        return None
    opts: dict[str, str] = {}
    rest = m.group("opts")
    pos = 0
    for o in _JAAS_OPTION.finditer(rest):
        if rest[pos : o.start()].strip():
            return None
        quoted = o.group("quoted")
        opts[o.group("key")] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else o.group("bare")
        pos = o.end()
    return (m.group("module"), opts) if not rest[pos:].strip() else None


def _sasl_config(names: dict[str, str], setting: str, out: dict[str, Any]) -> list[str]:
    mechanism = names.get("sasl.mechanism", "GSSAPI").upper()
    if mechanism not in LOGIN_MODULES:
        unusable = (
            f"{setting}.sasl.mechanism: {mechanism} cannot be used by replmon collect (kafka-python "
            f"takes {', '.join(LOGIN_MODULES)} from sasl.jaas.config)"
        )
        return [unusable]
    out["sasl_mechanism"] = mechanism
    example = f'{LOGIN_MODULES[mechanism]} required username="..." password="...";'
    parsed = jaas_options(names.get("sasl.jaas.config", ""))
    if parsed is None:
        return [f"{setting}.sasl.jaas.config: not a JAAS line (e.g. {example})"]
    module, opts = parsed
    if module != LOGIN_MODULES[mechanism]:
        return [f"{setting}.sasl.jaas.config: sasl.mechanism {mechanism} takes {LOGIN_MODULES[mechanism]}"]
    problems = []
    if set(opts) != {"username", "password"}:
        problems.append(
            f"{setting}.sasl.jaas.config: replmon collect (kafka-python) takes a username and a "
            f"password and nothing else (e.g. {example})"
        )
    else:
        out["sasl_plain_username"] = opts["username"]
        out["sasl_plain_password"] = Secret(opts["password"])
    return problems


def _pem_file(names: dict[str, str], store: str, setting: str) -> list[str]:
    """A trust or key store kafka-python can read: a PEM file (Kafka's client reads the same
    file with ssl.<store>.type=PEM)."""
    if names.get(f"ssl.{store}.type", "JKS").upper() != "PEM":
        pem_only = (
            f"{setting}.ssl.{store}.type: replmon collect (kafka-python) reads PEM files only: "
            f"set it to PEM (Kafka's client reads PEM too) and ssl.{store}.location to a PEM "
            f"file (keytool -exportcert -rfc, or openssl pkcs12, convert a JKS or PKCS12 store)"
        )
        return [pem_only]
    location = names.get(f"ssl.{store}.location")
    if not location:
        return [f"{setting}.ssl.{store}.location: required with ssl.{store}.type"]
    if not Path(location).is_file():
        return [f"{setting}.ssl.{store}.location: no such file"]
    try:
        context = ssl.create_default_context()
        if store == "truststore":
            context.load_verify_locations(cafile=location)
        else:
            context.load_cert_chain(location, password=names.get("ssl.key.password"))
    except (ssl.SSLError, OSError, ValueError):
        what = "certificates" if store == "truststore" else "a private key and its certificate chain"
        return [f"{setting}.ssl.{store}.location: not a readable PEM file of {what}"]
    return []


def python_client_config(options: Mapping[str, str], setting: str) -> tuple[dict[str, Any], list[str]]:
    """kafka-python's arguments for Kafka client options already checked by `option_problems`,
    and one message per option kafka-python cannot apply (then the arguments are not to be
    used). Passwords are `Secret`s; no message holds a value."""
    names = _plain_names(options)
    out: dict[str, Any] = {}
    problems = [
        f"{setting}.{name}: replmon collect's Kafka client (kafka-python) has no such option, so it "
        f"would not take effect there (it takes {', '.join(PYTHON_CLIENT)})"
        for name in sorted(names)
        if name not in PYTHON_CLIENT
    ]
    protocol = names.get("security.protocol", "PLAINTEXT").upper()
    out["security_protocol"] = protocol
    if "client.id" in names:
        out["client_id"] = names["client.id"]
    if protocol.startswith("SASL_"):
        problems += _sasl_config(names, setting, out)
    if protocol in ("SSL", "SASL_SSL"):
        if "ssl.truststore.location" in names or "ssl.truststore.type" in names:
            found = _pem_file(names, "truststore", setting)
            problems += found
            if not found:
                out["ssl_cafile"] = names["ssl.truststore.location"]
        if "ssl.keystore.location" in names or "ssl.keystore.type" in names:
            found = _pem_file(names, "keystore", setting)
            problems += found
            if not found:
                out["ssl_certfile"] = names["ssl.keystore.location"]
        elif "ssl.key.password" in names:
            problems.append(f"{setting}.ssl.key.password: set without ssl.keystore.location")
        if "ssl.key.password" in names:
            out["ssl_password"] = Secret(names["ssl.key.password"])
        algorithm = names.get("ssl.endpoint.identification.algorithm", "https").lower()
        if algorithm not in ("https", ""):
            problems.append(f"{setting}.ssl.endpoint.identification.algorithm: https or empty (no check)")
        out["ssl_check_hostname"] = algorithm == "https"
    return out, problems
