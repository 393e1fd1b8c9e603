"""`replmon collect`'s two Kafka connections: the monitored cluster (Admin API) and the metrics
cluster (the publisher), each built from its settings section and checked as it is made.

The options are the settings' (`monitored.options`, `kafka.options`: Kafka's dotted names, as
`replmon run` takes them), turned into kafka-python's arguments by streaming/kafka_security.py;
an option kafka-python cannot apply stops the start (exit 2) naming it.

kafka-python makes its clients connect in their constructor and, when that fails, says only
"Unable to bootstrap" after its timeout: a refused SCRAM login looks to it like a dropped
connection, retried until then. So a client is made within the section's
`startup_timeout_ms`, and a failure is then explained by asking the listener what kafka-python
could not say: does a TCP connection open, does TLS complete with these options? What is left
is the login (SASL) or a listener that wants another protocol. The answer is one line naming
the setting to look at (`PreflightError`, as `replmon run`'s startup checks).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from replmon.streaming.cli_flags import UsageError
from replmon.streaming.kafka_security import python_client_config
from replmon.streaming.preflight import PreflightError
from replmon.streaming.settings import KafkaClient

log = logging.getLogger(__name__)
C = TypeVar("C")
PROBE_TIMEOUT_S = 5.0  # one TCP connection or TLS handshake while explaining a failure


@dataclass(frozen=True)
class Cluster:
    """One cluster replmon collect connects to, with what to name in a message about it."""

    role: str  # "the monitored cluster", "the metrics cluster"
    bootstrap: str
    bootstrap_flag: str  # where its address is set, e.g. "--bootstrap"
    setting: str  # its settings section: "monitored", "kafka"
    timeout_ms: int
    config: dict[str, Any] = field(repr=False)  # kafka-python's arguments; passwords masked in repr

    @property
    def protocol(self) -> str:
        return str(self.config.get("security_protocol", "PLAINTEXT"))

    def client_config(self) -> dict[str, Any]:
        """What a kafka-python client takes besides its own settings (bootstrap_servers is the
        caller's)."""
        return {**self.config, "bootstrap_timeout_ms": self.timeout_ms}


def cluster(role: str, bootstrap: str, bootstrap_flag: str, section: KafkaClient) -> Cluster:
    """The cluster with its section's options as kafka-python arguments; UsageError (exit 2) with
    one line per option kafka-python cannot apply."""
    config, problems = python_client_config(section.plain_options(), f"{section.SETTING}.options")
    if problems:
        raise UsageError("invalid settings\n" + "\n".join(f"  {p}" for p in problems))
    return Cluster(role, bootstrap, bootstrap_flag, section.SETTING, section.startup_timeout_ms, config)


@contextlib.contextmanager
def _kafka_python_quiet(verbose: bool) -> Iterator[None]:
    """kafka-python logs every failed attempt (dozens of lines before its timeout); the check
    says what failed in one line instead. --verbose keeps them."""
    logger = logging.getLogger("kafka")
    level = logger.level
    if not verbose:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def connected(make: Callable[..., C], where: Cluster, *, verbose: bool = False) -> C:
    """`make(**where.client_config())`, a kafka-python client that connects as it is made; its
    failure to connect is a PreflightError saying why, naming the setting."""
    from kafka.errors import KafkaError

    try:
        with _kafka_python_quiet(verbose):
            return make(**where.client_config())
    except KafkaError as exc:  # NoBrokersAvailable, KafkaTimeoutError("Unable to bootstrap ...")
        raise PreflightError(explain(where, exc)) from None


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        out.append((host.strip("[]") or "localhost", int(port) if port.isdigit() else 9092))
    return out


def _tls_context(config: dict[str, Any]) -> ssl.SSLContext:
    """The TLS a kafka-python client sets up from these arguments (kafka/net/transport.py)."""
    context = ssl.create_default_context(cafile=config.get("ssl_cafile"))
    context.check_hostname = bool(config.get("ssl_check_hostname", True))
    if config.get("ssl_certfile"):
        context.load_cert_chain(config["ssl_certfile"], config.get("ssl_keyfile"), config.get("ssl_password"))
    return context


def sasl_handshake(sock, mechanism: str) -> tuple[int, list[str]] | None:
    """Kafka's SaslHandshake v1 on an open connection: (error code, the listener's mechanisms),
    or None if the answer is not Kafka's. A SASL listener answers it before any login (error 0,
    or 33 UNSUPPORTED_SASL_MECHANISM); any other listener refuses it (34 ILLEGAL_SASL_STATE)."""
    client_id, name = b"replmon-collect-check", mechanism.encode()
    body = struct.pack(">hhih", 17, 1, 1, len(client_id)) + client_id + struct.pack(">h", len(name)) + name
    try:
        sock.sendall(struct.pack(">i", len(body)) + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(4096)
            if not chunk or len(data) > 1 << 16:
                return None
            data += chunk
        correlation, error, count = struct.unpack(">ihi", data[4:14])
        if correlation != 1:
            return None
        mechanisms, pos = [], 14
        for _ in range(count):
            (size,) = struct.unpack(">h", data[pos : pos + 2])
            mechanisms.append(data[pos + 2 : pos + 2 + size].decode())
            pos += 2 + size
        return error, mechanisms
    except (OSError, struct.error, UnicodeDecodeError):
        return None


def explain(where: Cluster, exc: Exception) -> str:
    """Why a client could not connect to `where`, in one line naming the setting to look at."""
    name = f"Kafka at {where.bootstrap} ({where.role})"
    options = f"{where.setting}.options"
    tls = where.protocol in ("SSL", "SASL_SSL")
    mechanism = str(where.config.get("sasl_mechanism", "PLAIN"))
    last_error = "no address"
    for host, port in _addresses(where.bootstrap):
        try:
            with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S) as raw:
                if not tls:
                    answer = sasl_handshake(raw, mechanism)
                else:
                    with _tls_context(where.config).wrap_socket(raw, server_hostname=host) as sock:
                        answer = sasl_handshake(sock, mechanism)
        except ssl.SSLError as refused:
            if "WRONG_VERSION_NUMBER" in str(refused) or "wrong version number" in str(refused):
                return (
                    f"{name}: the listener does not speak TLS: check {options} security.protocol "
                    f"({where.protocol}) and {where.bootstrap_flag}"
                )
            if "EOF" in str(refused):
                return (
                    f"{name}: the listener closed the TLS handshake: check {options} security.protocol "
                    f"({where.protocol}; the listener may not speak TLS) and {where.bootstrap_flag}, "
                    f"or ssl.keystore.location if it wants a client certificate"
                )
            reason = getattr(refused, "verify_message", None) or refused.reason or str(refused)
            return (
                f"{name}: TLS failed ({reason}): check {options} ssl.truststore.location (the CA, "
                f"a PEM file) and ssl.endpoint.identification.algorithm"
            )
        except OSError as unreachable:
            last_error = unreachable.strerror or type(unreachable).__name__
            continue
        return _explain_answer(where, name, answer, exc)
    return f"{name} is not reachable ({last_error}): check {where.bootstrap_flag} and that the brokers run"


def _explain_answer(where: Cluster, name: str, answer: tuple[int, list[str]] | None, exc: Exception) -> str:
    """The listener took a connection (and TLS, if asked); `answer` is its SaslHandshake answer."""
    options = f"{where.setting}.options"
    sasl = where.protocol.startswith("SASL_")
    if answer is None:
        hint = "it may want TLS" if where.protocol in ("PLAINTEXT", "SASL_PLAINTEXT") else "is it Kafka?"
        return (
            f"{name}: the listener does not answer Kafka's protocol over {where.protocol} ({hint}): "
            f"check {options} security.protocol and {where.bootstrap_flag}"
        )
    error, offered = answer
    if error in (0, 33) and not sasl:
        return (
            f"{name}: the listener wants a SASL login (it offers {', '.join(offered)}): set {options} "
            f"security.protocol to SASL_{where.protocol}, sasl.mechanism and sasl.jaas.config"
        )
    if error == 33:
        return (
            f"{name}: the listener offers SASL {', '.join(offered)}, not "
            f"{where.config.get('sasl_mechanism')}: check {options} sasl.mechanism"
        )
    if error != 0 and sasl:
        return (
            f"{name}: the listener takes no SASL login: check {options} security.protocol "
            f"({where.protocol}) and {where.bootstrap_flag}"
        )
    if sasl:
        return (
            f"{name} refused the login ({where.config.get('sasl_mechanism')}): check {options} "
            f"sasl.jaas.config (user and password)"
        )
    return (
        f"{name} did not give its metadata within {where.timeout_ms / 1000:g} s "
        f"({type(exc).__name__}): check that the brokers are healthy, or raise "
        f"{where.setting}.startup_timeout_ms"
    )
