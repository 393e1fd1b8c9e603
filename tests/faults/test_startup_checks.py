"""Startup checks (streaming/preflight.py): one line naming the service and the setting, before
the query starts; and the least-privilege ACL of docs/redis.md works on a non-zero database."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from pydantic import SecretStr

from replmon.streaming.preflight import PreflightError, check_kafka, check_redis
from replmon.streaming.redis_out import build_redis_sink
from replmon.streaming.settings import RedisOut
from tests.redis_server import free_port
from tests.sinks import records as r

DOCS = Path(__file__).resolve().parents[2] / "docs" / "redis.md"


def documented_acl() -> list[str]:
    line = next(m for m in re.findall(r"^ACL SETUSER replmon-writer .*$", DOCS.read_text(), re.M))
    return line.replace(">PASSWORD", ">s3cret-pw").split()[3:]


def sink_for(url: str):
    return build_redis_sink(RedisOut(url=url, username="replmon-writer", password=SecretStr("s3cret-pw")))


def test_the_documented_acl_passes_the_check_and_writes_on_database_3(redis_server, redis_client):
    redis_client.execute_command("ACL", "SETUSER", "replmon-writer", "reset", *documented_acl())
    url = f"redis://127.0.0.1:{redis_server.port}/3"
    sink = sink_for(url)
    check_redis(sink.client, "replmon", url)
    report = sink.write_batch(1, **{k: list(v) for k, v in r.full_batch().items()})
    assert report.written == 5
    db3 = redis_server.client(db=3)
    assert db3.xlen("replmon:quarantine") == 1 and not db3.exists("replmon:preflight")


def test_without_select_the_check_says_which_acl_to_give(redis_server, redis_client):
    acl = [a for a in documented_acl() if a != "+select"]
    redis_client.execute_command("ACL", "SETUSER", "replmon-writer", "reset", *acl)
    url = f"redis://127.0.0.1:{redis_server.port}/3"
    with pytest.raises(PreflightError, match=r"docs/redis\.md") as err:
        check_redis(sink_for(url).client, "replmon", url)
    assert "s3cret-pw" not in str(err.value)


def test_a_wrong_password_and_a_stopped_redis_are_one_line_each(redis_server, redis_client):
    redis_client.execute_command("ACL", "SETUSER", "replmon-writer", "reset", *documented_acl())
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    wrong = build_redis_sink(RedisOut(url=url, username="replmon-writer", password=SecretStr("not-it")))
    with pytest.raises(PreflightError, match=r"refused the login.*redis\.password") as err:
        check_redis(wrong.client, "replmon", url)
    assert "not-it" not in str(err.value) and "\n" not in str(err.value)
    down = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(PreflightError, match=r"not reachable.*redis\.url"):
        check_redis(build_redis_sink(RedisOut(url=down)).client, "replmon", down)


@pytest.mark.spark
def test_an_unreachable_kafka_is_reported_within_the_startup_timeout(spark):
    options = {"kafka.bootstrap.servers": f"127.0.0.1:{free_port()}"}
    started = time.monotonic()
    with pytest.raises(PreflightError, match="did not answer a metadata request within 3 s") as err:
        check_kafka(spark, options, "replmon.fetch-metrics", 3000)
    assert time.monotonic() - started < 60, "bounded by the timeout, not minutes of retries"
    assert "kafka.bootstrap_servers" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.spark
@pytest.mark.services
def test_a_reachable_kafka_passes(spark, kafka_bootstrap):
    check_kafka(spark, {"kafka.bootstrap.servers": kafka_bootstrap}, None, 30_000)
