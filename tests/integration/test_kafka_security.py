"""replmon collect and replmon run on secured Kafka listeners (deploy/local/services.sh up
--security: SCRAM-SHA-512 over SASL_PLAINTEXT and SASL_SSL, TLS with a local CA, the user made
by Kafka's own storage tool). Both commands connect with Kafka's client options as the settings
take them (monitored.options, kafka.options), and a wrong credential ends the start within 30 s
in one line naming the setting, never showing a secret."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from replmon.streaming.collect.connect import cluster, connected
from replmon.streaming.preflight import PreflightError
from replmon.streaming.settings import KafkaSource, MonitoredKafka

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
WRONG = "not-the-password"
TOPIC = "orders"  # a monitored topic, so that collect has metadata to publish
# The secured cluster keeps its topics between runs: each run publishes to a topic of its own.
METRICS_TOPIC = f"secure.fetch-metrics.{uuid.uuid4().hex[:8]}"
LISTENERS = {
    "SASL_PLAINTEXT": "REPLMON_KAFKA_SASL_BOOTSTRAP",
    "SSL": "REPLMON_KAFKA_SSL_BOOTSTRAP",
    "SASL_SSL": "REPLMON_KAFKA_SASL_SSL_BOOTSTRAP",
    "PLAINTEXT": "REPLMON_KAFKA_BOOTSTRAP",
}


def options(kafka: dict[str, str], protocol: str, password: str | None = None, ca: str | None = None) -> dict:
    """Kafka's client options for one of the secured listeners, as an operator writes them."""
    out = {"security.protocol": protocol}
    if protocol.startswith("SASL_"):
        user, secret = kafka["REPLMON_KAFKA_SCRAM_USER"], password or kafka["REPLMON_KAFKA_SCRAM_PASSWORD"]
        out["sasl.mechanism"] = "SCRAM-SHA-512"
        out["sasl.jaas.config"] = f'{SCRAM} required username="{user}" password="{secret}";'
    if protocol in ("SSL", "SASL_SSL"):
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = ca or kafka["REPLMON_KAFKA_TLS_CA"]
    return out


@pytest.fixture(scope="module")
def kafka(secure_kafka) -> dict[str, str]:
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(
        bootstrap_servers=secure_kafka["REPLMON_KAFKA_BOOTSTRAP"], request_timeout_ms=10_000
    )
    try:
        admin.create_topics([NewTopic(TOPIC, 3, 1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()
    return secure_kafka


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory) -> str:
    """A CA that did not sign the brokers' certificate (made by keytool, as the brokers' own)."""
    folder = tmp_path_factory.mktemp("other-ca")
    store, pem = folder / "ca.p12", folder / "ca.pem"
    common = ["-keystore", str(store), "-storetype", "PKCS12", "-storepass", "changeit"]
    subprocess.run(
        [
            "keytool",
            "-genkeypair",
            "-alias",
            "ca",
            "-dname",
            "CN=not the brokers' CA",
            "-ext",
            "bc:c",
            "-keyalg",
            "RSA",
            "-keysize",
            "2048",
            *common,
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["keytool", "-exportcert", "-rfc", "-alias", "ca", "-file", str(pem), *common],
        check=True,
        capture_output=True,
    )
    return str(pem)


# ---- the connection check itself (streaming/collect/connect.py), in-process ------------------


def admin_client(where, verbose: bool = False):
    from kafka.admin import KafkaAdminClient

    return connected(
        lambda **kw: KafkaAdminClient(
            bootstrap_servers=where.bootstrap.split(","), request_timeout_ms=5000, **kw
        ),
        where,
        verbose=verbose,
    )


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SSL", "SASL_SSL"])
def test_collect_connects_to_each_secured_listener(kafka, protocol, caplog):
    caplog.set_level("DEBUG", logger="kafka")  # kafka-python logs its whole configuration at DEBUG
    where = cluster(
        "the monitored cluster",
        kafka[LISTENERS[protocol]],
        "--bootstrap",
        MonitoredKafka(options=options(kafka, protocol)),
    )
    admin = admin_client(where, verbose=True)  # as --verbose: kafka-python's lines not held back
    try:
        (broker,) = admin.describe_cluster()["brokers"]
        assert f"127.0.0.1:{broker['port']}" == kafka[LISTENERS[protocol]], "answered on the listener asked"
        assert TOPIC in admin.list_topics()
    finally:
        admin.close()
    assert "Starting KafkaAdminClient with configuration" in caplog.text, "the line that would show it"
    assert kafka["REPLMON_KAFKA_SCRAM_PASSWORD"] not in caplog.text


# (listener, client protocol, what is wrong) -> the one line's words
REFUSALS = [
    (
        "SASL_PLAINTEXT",
        "SASL_PLAINTEXT",
        "password",
        "refused the login (SCRAM-SHA-512: Authentication failed",
    ),
    ("SASL_SSL", "SASL_SSL", "password", "refused the login (SCRAM-SHA-512: Authentication failed"),
    (
        "SSL",
        "SSL",
        "ca",
        "TLS failed (self-signed certificate in certificate chain): check monitored.options ssl.truststore",
    ),
    ("SASL_SSL", "SASL_SSL", "ca", "TLS failed"),
    (
        "PLAINTEXT",
        "SASL_PLAINTEXT",
        "",
        "the listener takes no SASL login: check monitored.options security.protocol",
    ),
    (
        "SSL",
        "SASL_PLAINTEXT",
        "",
        "the listener does not answer Kafka's protocol over SASL_PLAINTEXT (it may want TLS)",
    ),
    ("PLAINTEXT", "SSL", "", "the listener closed the TLS handshake"),
    ("SASL_PLAINTEXT", "PLAINTEXT", "", "the listener wants a SASL login (it offers SCRAM-SHA-512)"),
]


@pytest.mark.parametrize("listener, protocol, wrong, words", REFUSALS)
def test_what_stops_a_collect_connection_is_one_line(kafka, other_ca, listener, protocol, wrong, words):
    given = options(
        kafka,
        protocol,
        password=WRONG if wrong == "password" else None,
        ca=other_ca if wrong == "ca" else None,
    )
    section = MonitoredKafka(options=given, startup_timeout_ms=5000)
    started = time.monotonic()
    with pytest.raises(PreflightError) as refused:
        admin_client(cluster("the monitored cluster", kafka[LISTENERS[listener]], "--bootstrap", section))
    message = str(refused.value)
    assert words in message and "\n" not in message, message
    assert time.monotonic() - started < 30
    assert WRONG not in message and kafka["REPLMON_KAFKA_SCRAM_PASSWORD"] not in message


# ---- replmon collect as an operator runs it ----------------------------------------------------


def replmon_env(**settings: dict) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLMON_")}
    env.update({name: json.dumps(value) for name, value in settings.items()})
    return env


def collect_args(kafka: dict[str, str], tmp_path: Path, monitored: str, metrics: str) -> list[str]:
    request_log = tmp_path / "kafka-request.log"
    request_log.touch()  # one broker, no followers: the events here come from the Admin API
    return [
        sys.executable,
        "-m",
        "replmon.streaming.cli",
        "collect",
        "--cluster",
        "secure",
        "--bootstrap",
        kafka[LISTENERS[monitored]],
        "--request-log",
        f"1={request_log}",
        "--metrics-bootstrap",
        kafka[LISTENERS[metrics]],
        "--metrics-topic",
        METRICS_TOPIC,
        "--create-topic",
        "--partitions",
        "1",
        "--state-dir",
        str(tmp_path / "state"),
    ]


def metrics_events(kafka: dict[str, str]) -> list[dict]:
    """What the metrics topic holds, read over the PLAINTEXT listener (not replmon's code)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=kafka["REPLMON_KAFKA_BOOTSTRAP"], enable_auto_commit=False)
    try:
        if not consumer.partitions_for_topic(METRICS_TOPIC):
            return []
        partition = TopicPartition(METRICS_TOPIC, 0)  # collect creates it with one (--partitions 1)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        end = consumer.end_offsets([partition])[partition]
        events: list[dict] = []
        deadline = time.monotonic() + 30
        while consumer.position(partition) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                events += [json.loads(r.value) for r in records]
        return events
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def published(kafka, tmp_path_factory) -> dict:
    """replmon collect watching the cluster over SASL_PLAINTEXT and publishing over SASL_SSL
    (the two connections' options set apart), until the metadata of TOPIC is on the metrics
    topic; then stopped with SIGINT. Returns its exit code, stderr and the events."""
    tmp_path = tmp_path_factory.mktemp("collect")
    env = replmon_env(
        REPLMON_MONITORED__OPTIONS=options(kafka, "SASL_PLAINTEXT"),
        REPLMON_KAFKA__OPTIONS=options(kafka, "SASL_SSL"),
    )
    proc = subprocess.Popen(
        collect_args(kafka, tmp_path, "SASL_PLAINTEXT", "SASL_SSL"),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    events: list[dict] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            events = metrics_events(kafka)
            if any(e["type"] == "metadata" and e.get("topic") == TOPIC for e in events):
                break
            time.sleep(1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return {"returncode": proc.returncode, "stdout": out, "stderr": err, "events": metrics_events(kafka)}


def test_collect_watches_over_sasl_and_publishes_over_sasl_ssl(kafka, published):
    assert published["returncode"] == 0, published["stderr"][-3000:]
    events = published["events"]
    kinds = {e["type"] for e in events}
    assert {"metadata", "broker", "heartbeat"} <= kinds, kinds
    assert sorted(e["partition"] for e in events if e["type"] == "metadata" and e["topic"] == TOPIC) == [
        0,
        1,
        2,
    ]
    assert all(e["cluster"] == "secure" for e in events)
    output = published["stdout"] + published["stderr"]
    assert kafka["REPLMON_KAFKA_SCRAM_PASSWORD"] not in output and "Traceback" not in output


def collect_once(
    kafka, tmp_path, monitored: str, metrics: str, **settings
) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = subprocess.run(
        collect_args(kafka, tmp_path, monitored, metrics),
        env=replmon_env(**settings),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return proc, time.monotonic() - started


def assert_one_line(proc: subprocess.CompletedProcess, command: str, *words: str, secrets: tuple[str, ...]):
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])  # docs/cli.md: a failed startup check
    lines = [line for line in proc.stderr.splitlines() if line.startswith(f"replmon {command}: ")]
    assert len(lines) == 1, proc.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert "Traceback" not in proc.stderr
    assert not any(s in proc.stdout + proc.stderr for s in secrets), "a secret was printed"


@pytest.mark.parametrize("wrong", ["monitored", "metrics"])
def test_collect_refuses_a_wrong_password_naming_the_setting(kafka, tmp_path, wrong):
    right = kafka["REPLMON_KAFKA_SCRAM_PASSWORD"]
    proc, took = collect_once(
        kafka,
        tmp_path,
        "SASL_PLAINTEXT",
        "SASL_SSL",
        REPLMON_MONITORED__OPTIONS=options(
            kafka, "SASL_PLAINTEXT", password=WRONG if wrong == "monitored" else None
        ),
        REPLMON_KAFKA__OPTIONS=options(kafka, "SASL_SSL", password=WRONG if wrong == "metrics" else None),
    )
    setting = "monitored.options" if wrong == "monitored" else "kafka.options"
    role = "the monitored cluster" if wrong == "monitored" else "the metrics cluster"
    assert_one_line(
        proc, "collect", role, "refused the login", f"{setting} sasl.jaas.config", secrets=(WRONG, right)
    )
    assert took < 30, f"{took:.1f} s"
    print(f"collect, wrong {wrong} password: exit 2 after {took:.1f} s")


def test_collect_refuses_a_ca_that_did_not_sign_the_brokers(kafka, tmp_path, other_ca):
    proc, took = collect_once(
        kafka,
        tmp_path,
        "SSL",
        "SSL",
        REPLMON_KAFKA__OPTIONS=options(kafka, "SSL", ca=other_ca),
        REPLMON_MONITORED__OPTIONS=options(kafka, "SSL", ca=other_ca),
    )
    assert_one_line(proc, "collect", "TLS failed", "ssl.truststore.location", secrets=())
    assert took < 30, f"{took:.1f} s"


# ---- replmon run: Spark's Kafka source (Kafka's Java client) with the same options -------------


def run_env(kafka: dict[str, str], password: str | None = None) -> dict[str, str]:
    env = replmon_env(REPLMON_KAFKA__OPTIONS=options(kafka, "SASL_SSL", password=password))
    env.update(
        REPLMON_KAFKA__SUBSCRIBE=METRICS_TOPIC,
        # Spark's Kafka connector jars, as the secured cluster's services.sh up fetched them.
        REPLMON_SPARK__JARS=json.dumps(kafka["REPLMON_SPARK_JARS"].split(",")),
        REPLMON_SPARK__DRIVER_MEMORY="1g",
    )
    return env


def replmon_run(kafka, tmp_path, env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "replmon.streaming.cli",
            "run",
            "--once",
            "--output",
            str(tmp_path / "out"),
            "--metrics-bootstrap",
            kafka["REPLMON_KAFKA_SASL_SSL_BOOTSTRAP"],
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,  # a Spark session on a busy machine
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.spark
def test_run_reads_the_metrics_topic_over_sasl_ssl(kafka, published, tmp_path):
    assert published["returncode"] == 0
    proc = replmon_run(kafka, tmp_path, run_env(kafka))
    assert proc.returncode == 0, proc.stderr[-3000:]
    statuses = [
        json.loads(line)
        for part in sorted((tmp_path / "out" / "partition_status").glob("part-*.jsonl"))
        for line in part.read_text().splitlines()
    ]
    # (other topics too: the secured cluster keeps the metrics topics of earlier runs)
    assert {(s["cluster"], s["partition"]) for s in statuses if s["topic"] == TOPIC} == {
        ("secure", p) for p in range(3)
    }
    assert kafka["REPLMON_KAFKA_SCRAM_PASSWORD"] not in proc.stdout + proc.stderr


@pytest.mark.spark
def test_run_refuses_a_wrong_password_naming_the_setting(kafka, tmp_path):
    proc = replmon_run(kafka, tmp_path, run_env(kafka, password=WRONG))
    # The refusal, not the end of kafka.startup_timeout_ms (30 s): the broker's answer ends the wait.
    assert_one_line(
        proc,
        "run",
        "refused the login (SaslAuthenticationException",
        "kafka.options (sasl.mechanism, sasl.jaas.config)",
        secrets=(WRONG, kafka["REPLMON_KAFKA_SCRAM_PASSWORD"]),
    )


@pytest.mark.spark
@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SSL", "SASL_SSL"])
def test_runs_startup_check_connects_and_refuses_within_30_s(kafka, spark, protocol, other_ca):
    # replmon run's own check (streaming/preflight.py), with the options Spark's source gets.
    from replmon.streaming.preflight import check_kafka
    from replmon.streaming.sources import kafka_options

    def source(**wrong) -> dict[str, str]:
        conf = KafkaSource(
            bootstrap_servers=kafka[LISTENERS[protocol]],
            options=options(kafka, protocol, **wrong),
            subscribe=TOPIC,
        )
        return kafka_options(conf)

    check_kafka(spark, source(), TOPIC, 30_000)
    wrong = {"password": WRONG} if protocol.startswith("SASL_") else {"ca": other_ca}
    started = time.monotonic()
    with pytest.raises(PreflightError) as refused:
        check_kafka(spark, source(**wrong), TOPIC, 30_000)
    took = time.monotonic() - started
    expected = "refused the login" if "password" in wrong else "TLS failed"
    assert expected in str(refused.value) and "\n" not in str(refused.value), str(refused.value)
    assert took < 30, f"{took:.1f} s"
    assert WRONG not in str(refused.value)
    print(f"run's check, {protocol} with a wrong {next(iter(wrong))}: refused after {took:.1f} s")
