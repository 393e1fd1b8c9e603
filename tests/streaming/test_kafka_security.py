"""Kafka client options as replmon collect's kafka-python clients take them
(streaming/kafka_security.py): every option takes effect or is an error naming it, and no
message or logged configuration shows a secret."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from replmon.streaming.kafka_security import PYTHON_CLIENT, Secret, jaas_options, python_client_config

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.mark.parametrize(
    "text,expected,why",
    [
        (
            f'{SCRAM} required username="u" password="p";',
            (SCRAM, {"username": "u", "password": "p"}),
            "quoted",
        ),
        (f"{PLAIN} required username=u password=p;", (PLAIN, {"username": "u", "password": "p"}), "bare"),
        (
            f'{SCRAM} required\n  username="u"\n  password="p" ;',
            (SCRAM, {"username": "u", "password": "p"}),
            "lines",
        ),
        (
            f'{SCRAM} required username="u" password="a\\"b;c";',
            (SCRAM, {"username": "u", "password": 'a"b;c'}),
            "escape",
        ),
        (f"{SCRAM} required;", (SCRAM, {}), "no options"),
        ('username="u" password="p"', None, "no login module"),
        (f'{SCRAM} username="u";', None, "no control flag"),
        (f'{SCRAM} required username="u" junk;', None, "a word that is no option"),
    ],
)
def test_jaas_lines(text, expected, why):
    assert jaas_options(text) == expected, why


def scram(password: str = "s3cret-pw", module: str = SCRAM) -> str:
    return f'{module} required username="replmon" password="{password}";'


@pytest.fixture
def ca_pem(tmp_path):
    """A PEM file of certificates: the system's CA bundle as Python's ssl finds it."""
    import ssl

    paths = ssl.get_default_verify_paths()
    bundle = paths.cafile or paths.openssl_cafile
    if not bundle:
        pytest.skip("no CA bundle on this machine")
    copy = tmp_path / "ca.pem"
    copy.write_bytes(Path(bundle).read_bytes())
    return str(copy)


def test_a_complete_sasl_ssl_setup_translates(ca_pem):
    config, problems = python_client_config(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": scram(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": ca_pem,
            "ssl.endpoint.identification.algorithm": "",
            "client.id": "replmon-collect",
        },
        "kafka.options",
    )
    assert problems == []
    assert config == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "replmon",
        "sasl_plain_password": "s3cret-pw",
        "ssl_cafile": ca_pem,
        "ssl_check_hostname": False,
        "client_id": "replmon-collect",
    }
    assert isinstance(config["sasl_plain_password"], Secret)


@pytest.mark.parametrize(
    "options,problem,why",
    [
        ({}, None, "plaintext"),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": scram(module=PLAIN),
            },
            None,
            "PLAIN",
        ),
        ({"kafka.security.protocol": "SSL"}, None, "the kafka. prefix; the system's CAs"),
        (
            {"fetch.max.bytes": "1"},
            "kafka.options.fetch.max.bytes: replmon collect's Kafka client",
            "a consumer option",
        ),
        ({"request.timeout.ms": "1"}, "no such option", "collect sets its own timeouts"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"},
            "GSSAPI cannot be used by replmon collect",
            "Kerberos: kafka-python does not take a JAAS keytab",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": "x"},
            "OAUTHBEARER cannot be used",
            "no token provider",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": scram()},
            "sasl.mechanism PLAIN takes org.apache.kafka.common.security.plain.PlainLoginModule",
            "the login module of another mechanism",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": "s3cret-pw",
            },
            "sasl.jaas.config: not a JAAS line",
            "not JAAS",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": scram()[:-1] + ' tokenauth="true";',
            },
            "a username and a password and nothing else",
            "a delegation token: kafka-python cannot say so",
        ),
        (
            {"security.protocol": "SSL", "ssl.truststore.location": "/s3cret-path/t.jks"},
            "ssl.truststore.type: replmon collect (kafka-python) reads PEM files only",
            "Java's default store type is JKS",
        ),
        (
            {
                "security.protocol": "SSL",
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": "/s3cret-path/x",
            },
            "ssl.truststore.location: no such file",
            "a missing file",
        ),
        (
            {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "http"},
            "https or empty",
            "Kafka knows https only",
        ),
        (
            {"security.protocol": "SSL", "ssl.key.password": "s3cret-pw"},
            "without ssl.keystore.location",
            "no key",
        ),
    ],
)
def test_what_kafka_python_cannot_apply_is_an_error(options, problem, why):
    _, problems = python_client_config(options, "kafka.options")
    if problem is None:
        assert problems == [], why
    else:
        assert any(problem in p for p in problems), (why, problems)
        assert not any("s3cret" in p for p in problems), "values are secrets"


def test_a_truststore_that_is_not_pem_is_named(tmp_path):
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed not PEM")
    _, problems = python_client_config(
        {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(jks)},
        "monitored.options",
    )
    assert problems == ["monitored.options.ssl.truststore.location: not a readable PEM file of certificates"]


def test_every_translated_option_is_listed():
    # The table says what collect takes; an option handled below it but missing from it would be
    # refused as unknown.
    assert set(PYTHON_CLIENT) == {
        "security.protocol",
        "sasl.mechanism",
        "sasl.jaas.config",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "client.id",
    }


def test_a_password_is_masked_where_kafka_python_logs_its_configuration(caplog):
    # kafka-python logs `Starting KafkaAdminClient with configuration: {...}` at DEBUG.
    config, _ = python_client_config(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": scram(module=PLAIN),
        },
        "kafka.options",
    )
    with caplog.at_level(logging.DEBUG, logger="kafka.admin.client"):
        logging.getLogger("kafka.admin.client").debug("Starting with configuration: %s", config)
    assert "s3cret-pw" not in caplog.text and "'**********'" in caplog.text
    assert config["sasl_plain_password"].encode() == b"s3cret-pw", "the value itself is unchanged"
