"""Startup checks: Kafka and Redis answer, and accept replmon, before the query starts.

Without them an unreachable bootstrap shows after minutes of retries and hundreds of warning
lines, and a refused Redis login deep inside a failed micro-batch. Each check ends in one line
naming the service and the setting to look at (`PreflightError`).
"""

from __future__ import annotations

import contextlib
import logging

log = logging.getLogger(__name__)

# A script like the sink's (sinks/lua.py): keys under the prefix, set, stream append, delete.
_REDIS_PROBE = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', 60)
redis.call('XADD', KEYS[2], 'MAXLEN', '1', '*', 'preflight', ARGV[1])
return redis.call('DEL', KEYS[1], KEYS[2])
"""


class PreflightError(Exception):
    """A service is unreachable or refuses replmon; the message is one actionable line."""


def check_redis(client, prefix: str, where: str) -> None:
    """PING (after the login and SELECT the client does on connect), then a script that writes
    and deletes two keys under the prefix, as the sink's scripts do. `where` is the redacted URL."""
    import redis

    try:
        client.ping()
        client.register_script(_REDIS_PROBE)(
            keys=[f"{prefix}:preflight", f"{prefix}:preflight-stream"], args=["1"]
        )
    except redis.AuthenticationError as exc:
        raise PreflightError(
            f"Redis at {where} refused the login ({exc}): check redis.username and redis.password"
        ) from exc
    except redis.ConnectionError as exc:
        raise PreflightError(
            f"Redis at {where} is not reachable ({exc}): check redis.url and that Redis runs"
        ) from exc
    except redis.ResponseError as exc:
        if "NOPERM" in str(exc) or "no permission" in str(exc).lower():
            raise PreflightError(
                f"Redis at {where} refuses a command replmon needs ({exc}): "
                f"give the user the ACL in docs/redis.md"
            ) from exc
        raise PreflightError(f"Redis at {where} failed the startup check: {exc}") from exc
    except redis.RedisError as exc:
        raise PreflightError(f"Redis at {where} failed the startup check: {exc}") from exc


def check_kafka(spark, options: dict[str, str], topic: str | None, timeout_ms: int) -> None:
    """Ask the cluster for its topics with the Kafka client and options Spark's source will use
    (through the session's JVM), within `timeout_ms`. `options` are Spark source options: the
    `kafka.*` ones configure the client. A missing topic is only logged (it may be created
    after replmon starts)."""
    jvm = spark.sparkContext._jvm
    props = jvm.java.util.Properties()
    for key, value in options.items():
        if key.startswith("kafka."):
            props.put(key[len("kafka.") :], value)
    bootstrap = options.get("kafka.bootstrap.servers", "?")
    props.put("request.timeout.ms", str(timeout_ms))
    props.put("default.api.timeout.ms", str(timeout_ms))
    props.put("client.id", "replmon-preflight")
    admin = None
    try:
        admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
        unit = jvm.java.util.concurrent.TimeUnit.MILLISECONDS
        names = admin.listTopics().names().get(timeout_ms, unit)
    except Exception as exc:  # py4j's Py4JJavaError, or a py4j error if the jars are missing
        raise PreflightError(_kafka_failure(exc, bootstrap, timeout_ms)) from exc
    finally:
        if admin is not None:
            with contextlib.suppress(Exception):  # closing is best effort
                admin.close(jvm.java.time.Duration.ofSeconds(1))
    if topic is not None and not names.contains(topic):
        log.warning("Kafka at %s has no topic %s (kafka.subscribe) yet: waiting for it", bootstrap, topic)


def _kafka_failure(exc: Exception, bootstrap: str, timeout_ms: int) -> str:
    java = getattr(exc, "java_exception", None)
    cause = java
    while cause is not None and cause.getCause() is not None:
        cause = cause.getCause()
    kind = cause.getClass().getSimpleName() if cause is not None else type(exc).__name__
    text = (cause.getMessage() if cause is not None else str(exc).splitlines()[0]) or kind
    if "Timeout" in kind:
        return (
            f"Kafka at {bootstrap} did not answer a metadata request within "
            f"{timeout_ms / 1000:g} s: check kafka.bootstrap_servers, that the brokers run "
            f"and are reachable, and kafka.options.security.protocol "
            f"(kafka.startup_timeout_ms sets the wait)"
        )
    if "Ssl" in kind or "SSL" in text or "Cert" in kind or "certification path" in text:  # Java's PKIX errors
        return f"Kafka at {bootstrap}: TLS failed ({kind}: {text}): check kafka.options ssl.*"
    if "Authentication" in kind or "Sasl" in kind:
        return (
            f"Kafka at {bootstrap} refused the login ({kind}: {text}): check "
            f"kafka.options (sasl.mechanism, sasl.jaas.config)"
        )
    if "Authorization" in kind:
        return (
            f"Kafka at {bootstrap} denied replmon ({kind}: {text}): the user needs "
            f"Describe and Read on the metrics topic"
        )
    if "ClassNotFound" in text or "does not exist in the JVM" in text:
        return (
            "Kafka: the Kafka client is not on Spark's classpath: set spark.jars to Spark's "
            "Kafka connector jars"
        )
    return f"Kafka at {bootstrap} failed the startup check ({kind}: {text})"
