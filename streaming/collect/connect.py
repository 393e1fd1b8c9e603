"""`replmon collect`'s two Kafka connections: the monitored cluster (Admin API) and the metrics
cluster (the publisher), each built from its settings section and checked as it is made.

The options are the settings' (`monitored.options`, `kafka.options`: Kafka's dotted names, as
`replmon run` takes them), turned into kafka-python's arguments by streaming/kafka_security.py;
an option kafka-python cannot apply stops the start (exit 2) naming it.

kafka-python makes its clients connect in their constructor and, when that fails, says only
"Unable to bootstrap" once its timeout has passed: a refused SCRAM login looks to it like a
dropped connection, retried until then. So before a client is made, `check` asks a bootstrap
server directly, in a second: does a TCP connection open, does TLS complete with these
options, does the listener take this SASL mechanism, and the login (done by kafka-python's own
SASL mechanism, over Kafka's SaslHandshake and SaslAuthenticate requests)? Then the client is
made within the section's `startup_timeout_ms`; if that still fails, `explain` asks the
listener what it wants. Each failure is one line naming the setting to look at
(`PreflightError`, as `replmon run`'s startup checks).
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
    """`make(**where.client_config())`, a kafka-python client that connects as it is made, once
    `check` found nothing wrong; a failure is a PreflightError saying why, naming the setting."""
    from kafka.errors import KafkaError

    with _kafka_python_quiet(verbose):
        problem = check(where)
    if problem:
        raise PreflightError(problem)
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


@contextlib.contextmanager
def _connection(where: Cluster, host: str, port: int) -> Iterator[socket.socket]:
    """A connection to one bootstrap server, over TLS if the protocol wants it."""
    with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S) as raw:
        if where.protocol in ("SSL", "SASL_SSL"):
            with _tls_context(where.config).wrap_socket(raw, server_hostname=host) as tls:
                yield tls
        else:
            yield raw


def _request(sock: socket.socket, api_key: int, body: bytes, version: int = 1) -> bytes | None:
    """One Kafka request (header v1, no tagged fields) and its response body; None if what
    comes back is not Kafka's answer to it."""
    client_id = b"replmon-collect-check"
    frame = struct.pack(">hhih", api_key, version, api_key, len(client_id)) + client_id + body
    try:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk or len(data) > 1 << 20:
                return None
            data += chunk
    except OSError:
        return None
    if data[4:8] != struct.pack(">i", api_key):  # the correlation id
        return None
    return data[8:]


def sasl_handshake(sock: socket.socket, mechanism: str) -> tuple[int, list[str]] | None:
    """Kafka's SaslHandshake v1: (error code, the listener's mechanisms), or None if the answer
    is not Kafka's. A SASL listener answers it before any login (error 0, or 33
    UNSUPPORTED_SASL_MECHANISM); any other listener refuses it (34 ILLEGAL_SASL_STATE)."""
    name = mechanism.encode()
    answer = _request(sock, 17, struct.pack(">h", len(name)) + name)
    if answer is None:
        return None
    try:
        error, count = struct.unpack(">hi", answer[:6])
        mechanisms, pos = [], 6
        for _ in range(count):
            (size,) = struct.unpack(">h", answer[pos : pos + 2])
            mechanisms.append(answer[pos + 2 : pos + 2 + size].decode())
            pos += 2 + size
    except (struct.error, UnicodeDecodeError):
        return None
    return error, mechanisms


def sasl_login(sock: socket.socket, host: str, config: dict[str, Any]) -> str | None:
    """The SASL login after a successful handshake, by kafka-python's own mechanism (what its
    clients will send) over SaslAuthenticate v0: None if it succeeded, else why not."""
    from kafka.net.sasl import get_sasl_mechanism

    mechanism = get_sasl_mechanism(config["sasl_mechanism"])(host=host, **config)
    while not mechanism.is_done():
        token = mechanism.auth_bytes()
        answer = _request(sock, 36, struct.pack(">i", len(token)) + token, version=0)
        if answer is None:
            return "the broker closed the connection"
        try:
            error, size = struct.unpack(">hh", answer[:4])
            text = answer[4 : 4 + size].decode(errors="replace") if size > 0 else ""
            pos = 4 + max(size, 0)
            (length,) = struct.unpack(">i", answer[pos : pos + 4])
            reply = answer[pos + 4 : pos + 4 + max(length, 0)]
        except struct.error:
            return "not Kafka's answer"
        if error:
            return text or f"error {error}"
        try:
            mechanism.receive(reply)
        except ValueError as wrong:  # e.g. SCRAM: the server's signature does not match
            return str(wrong)
    return None if mechanism.is_authenticated() else "the broker did not accept it"


def check(where: Cluster) -> str | None:
    """What stops a connection to `where` before a client tries (None: nothing found): the
    first bootstrap server that takes a TCP connection answers for the cluster."""
    name = f"Kafka at {where.bootstrap} ({where.role})"
    last_error = "no address"
    for host, port in _addresses(where.bootstrap):
        try:
            with _connection(where, host, port) as sock:
                if not where.protocol.startswith("SASL_"):
                    return None
                return _login_problem(where, name, sock, host)
        except ssl.SSLError as refused:
            return _tls_problem(where, name, refused)
        except OSError as unreachable:
            last_error = unreachable.strerror or type(unreachable).__name__
    return f"{name} is not reachable ({last_error}): check {where.bootstrap_flag} and that the brokers run"


def _tls_problem(where: Cluster, name: str, refused: ssl.SSLError) -> str:
    options = f"{where.setting}.options"
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


def _login_problem(where: Cluster, name: str, sock: socket.socket, host: str) -> str | None:
    options = f"{where.setting}.options"
    mechanism = str(where.config["sasl_mechanism"])
    answer = sasl_handshake(sock, mechanism)
    if answer is None:
        hint = "it may want TLS" if where.protocol == "SASL_PLAINTEXT" else "is it Kafka?"
        return (
            f"{name}: the listener does not answer Kafka's protocol over {where.protocol} ({hint}): "
            f"check {options} security.protocol and {where.bootstrap_flag}"
        )
    error, offered = answer
    if error == 33:
        return (
            f"{name}: the listener offers SASL {', '.join(offered)}, not {mechanism}: check "
            f"{options} sasl.mechanism"
        )
    if error:
        return (
            f"{name}: the listener takes no SASL login: check {options} security.protocol "
            f"({where.protocol}) and {where.bootstrap_flag}"
        )
    refused = sasl_login(sock, host, where.config)
    if refused:
        return (
            f"{name} refused the login ({mechanism}: {refused}): check {options} sasl.jaas.config "
            f"(user and password)"
        )
    return None


def explain(where: Cluster, exc: Exception) -> str:
    """Why a client could not connect to `where` although `check` found nothing wrong, in one
    line naming the setting to look at."""
    name = f"Kafka at {where.bootstrap} ({where.role})"
    options = f"{where.setting}.options"
    waited = (
        f"did not give its metadata within {where.timeout_ms / 1000:g} s ({type(exc).__name__}): check "
        f"that the brokers are healthy, or raise {where.setting}.startup_timeout_ms"
    )
    if where.protocol.startswith("SASL_"):
        return f"{name} {waited}"
    host, port = _addresses(where.bootstrap)[0]
    try:
        with _connection(where, host, port) as sock:
            answer = sasl_handshake(sock, "PLAIN")
    except OSError:
        answer = None
    if answer is None:
        hint = "it may want TLS" if where.protocol == "PLAINTEXT" else "is it Kafka?"
        return (
            f"{name}: the listener does not answer Kafka's protocol over {where.protocol} ({hint}): "
            f"check {options} security.protocol and {where.bootstrap_flag}"
        )
    if answer[0] in (0, 33):
        return (
            f"{name}: the listener wants a SASL login (it offers {', '.join(answer[1])}): set {options} "
            f"security.protocol to SASL_{where.protocol}, sasl.mechanism and sasl.jaas.config"
        )
    return f"{name} {waited}"
