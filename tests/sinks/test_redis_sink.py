"""RedisSink against a real redis-server (tests/redis_server.py)."""

from __future__ import annotations

import json
import time

import pytest
import redis
from pydantic import SecretStr, ValidationError

from replmon.sinks.errors import SinkAuthError, SinkUnavailable
from replmon.sinks.keys import Keys
from replmon.sinks.redis_client import RedisConnectionSettings, build_client
from replmon.sinks.redis_records import RecordError, encode
from replmon.sinks.redis_sink import RedisSink, RedisSinkSettings
from tests.redis_server import RedisServer, free_port
from tests.sinks import records as r

K = Keys()


def write(sink, batch_id, alerts=(), partition_status=(), replica_status=(), quarantine=()):
    return sink.write_batch(
        batch_id, list(alerts), list(partition_status), list(replica_status), list(quarantine)
    )


@pytest.fixture
def db(redis_server, redis_client):
    """The same (flushed) server, answering str instead of bytes."""
    client = redis_server.client(decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def sink(redis_client):
    return RedisSink(redis_client)


def test_alert_is_written_once_with_every_field(sink, db):
    a = r.alert()
    report = write(sink, 1, alerts=[a])
    assert report.alerts_written == 1
    [(_entry_id, fields)] = db.xrange(K.alerts_stream())
    assert fields == {k: encode(v) for k, v in a.items()}
    assert fields["replica"] == "3" and fields["topic"] == "orders"
    assert json.loads(db.hget(K.alerts_firing(), "a1")) == a
    assert json.loads(db.hget(K.alerts_firing_in("c1"), "a1")) == a


def test_null_fields_are_written_as_empty_strings(sink, db):
    write(sink, 1, alerts=[r.alert(topic=None, partition=None, replica=None, subject="c1")])
    [(_, fields)] = db.xrange(K.alerts_stream())
    assert (fields["topic"], fields["partition"], fields["replica"]) == ("", "", "")


def test_replaying_a_batch_writes_nothing_twice(sink, db):
    batch = r.full_batch()
    batch["alerts"].append(r.alert("a2", status="firing", ts=1_001))
    pubsub = db.pubsub()
    pubsub.subscribe(K.alerts_channel())
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"

    first = write(sink, 7, **batch)
    lengths = {k: db.xlen(k) for k in db.scan_iter(f"{K.prefix}:*") if db.type(k) == "stream"}
    counter = db.get(K.quarantine_count())
    second = write(sink, 7, **batch)

    assert (first.alerts_written, first.quarantine_written) == (2, 1)
    assert (second.alerts_written, second.alerts_skipped) == (0, 2)
    assert (second.quarantine_written, second.quarantine_skipped) == (0, 1)
    assert second.series_points_written == 0 and second.cluster_points_written == 0
    assert {k: db.xlen(k) for k in lengths} == lengths
    assert len(lengths) == 6  # see test_a_full_batch_makes_six_streams
    assert db.get(K.quarantine_count()) == counter == "1"

    db.publish(K.alerts_channel(), "end-of-test")  # after the sink's, so it arrives last
    published = []
    while (message := pubsub.get_message(timeout=5)) and message["data"] != "end-of-test":
        published.append(json.loads(message["data"]))
    pubsub.close()
    assert [p["alert_id"] for p in published] == ["a1", "a2"]


def test_a_full_batch_makes_six_streams(sink, db):
    write(sink, 1, **r.full_batch())
    streams = {k for k in db.scan_iter("*") if db.type(k) == "stream"}
    assert streams == {
        K.alerts_stream(),
        K.quarantine_stream(),
        K.cluster_series("c1"),
        K.partition_series("c1", "orders", 0),
        K.replica_series("c1", "orders", 0, 2),
        K.replica_series("c1", "orders", 0, 3),
    }


def test_an_older_status_does_not_overwrite_a_newer_one(sink, db):
    newer_p = r.partition_status(ts=2_000, hw=12, isr=[1, 2, 3], under_replicated=False)
    older_p = r.partition_status(ts=1_000, hw=10, isr=[1, 2], under_replicated=True)
    newer_r = r.replica_status(ts=2_000, leo=12, lag_ms=0, in_isr=True, state="caught_up")
    older_r = r.replica_status(ts=1_000, leo=5, lag_ms=31_200, in_isr=False, state="stuck")
    write(sink, 2, partition_status=[newer_p], replica_status=[newer_r])
    report = write(sink, 1, partition_status=[older_p], replica_status=[older_r])

    assert (report.partition_status_skipped, report.replica_status_skipped) == (1, 1)
    assert report.series_points_written == 0
    assert db.hgetall(K.partition("c1", "orders", 0)) == {k: encode(v) for k, v in newer_p.items()}
    assert db.hget(K.replica("c1", "orders", 0, 3), "state") == "caught_up"
    assert db.smembers(K.under_replicated("c1")) == set()
    assert db.smembers(K.out_of_sync("c1")) == set()
    assert [i for i, _ in db.xrange(K.replica_series("c1", "orders", 0, 3))] == ["2000-0"]


def test_a_newer_status_replaces_the_state_and_extends_the_series(sink, db):
    write(
        sink, 1, partition_status=[r.partition_status(ts=1_000)], replica_status=[r.replica_status(ts=1_000)]
    )
    write(
        sink,
        2,
        partition_status=[r.partition_status(ts=2_000, hw=12, isr=[1, 2, 3], under_replicated=False)],
        replica_status=[r.replica_status(ts=2_000, leo=12, lag_messages=0, lag_ms=0, in_isr=True)],
    )
    series = db.xrange(K.partition_series("c1", "orders", 0))
    assert [(i, f["hw"], f["isr_size"]) for i, f in series] == [("1000-0", "10", "2"), ("2000-0", "12", "3")]
    lag = db.xrange(K.replica_series("c1", "orders", 0, 3))
    assert [(f["lag_ms"], f["lag_messages"], f["leo"]) for _, f in lag] == [
        ("31200", "7", "5"),
        ("0", "0", "12"),
    ]
    assert db.smembers(K.under_replicated("c1")) == set()
    assert db.smembers(K.out_of_sync("c1")) == set()
    assert [f["under_replicated"] for _, f in db.xrange(K.cluster_series("c1"))] == ["1", "0"]


def test_indexes_feed_the_dashboard_variables(sink, db):
    write(sink, 1, **r.full_batch())
    assert db.smembers(K.clusters()) == {"c1"}
    assert db.smembers(K.topics("c1")) == {"orders"}
    assert db.smembers(K.partitions("c1")) == {"orders:0"}
    assert db.smembers(K.topic_partitions("c1", "orders")) == {"0"}
    assert db.smembers(K.replicas("c1", "orders", 0)) == {"2", "3"}
    assert db.smembers(K.under_min_isr("c1")) == {"orders:0"}
    assert db.smembers(K.out_of_sync("c1")) == {"orders:0:3"}


def test_firing_then_resolved_leaves_nothing_firing(sink, db):
    write(sink, 1, alerts=[r.alert(ts=1_000)], replica_status=[r.replica_status(ts=1_000)])
    assert db.hkeys(K.alerts_firing()) == ["a1"]
    write(
        sink,
        2,
        alerts=[r.alert(status="resolved", ts=5_000)],
        replica_status=[r.replica_status(ts=5_000, in_isr=True)],
    )
    assert db.hlen(K.alerts_firing()) == 0 and db.hlen(K.alerts_firing_in("c1")) == 0
    assert [f["status"] for _, f in db.xrange(K.alerts_stream())] == ["firing", "resolved"]
    assert [f["firing_alerts"] for _, f in db.xrange(K.cluster_series("c1"))] == ["1", "0"]


def test_firing_and_resolved_in_one_batch_in_any_order(sink, db):
    write(sink, 1, alerts=[r.alert(status="resolved", ts=5_000), r.alert(ts=1_000)])
    assert db.hlen(K.alerts_firing()) == 0
    assert [f["status"] for _, f in db.xrange(K.alerts_stream())] == ["firing", "resolved"]


def test_a_firing_arriving_after_its_resolve_is_not_firing(sink, db):
    write(sink, 1, alerts=[r.alert(status="resolved", ts=5_000)])
    write(sink, 2, alerts=[r.alert(ts=1_000)])
    assert db.hlen(K.alerts_firing()) == 0
    assert db.xlen(K.alerts_stream()) == 2


def test_alerts_of_two_clusters_are_counted_apart(sink, db):
    write(
        sink,
        1,
        alerts=[r.alert("a1", cluster="c1"), r.alert("b1", cluster="c2"), r.alert("b2", cluster="c2")],
    )
    assert db.hlen(K.alerts_firing()) == 3
    assert (db.hlen(K.alerts_firing_in("c1")), db.hlen(K.alerts_firing_in("c2"))) == (1, 2)
    assert db.xrange(K.cluster_series("c2"))[0][1]["firing_alerts"] == "2"


def test_a_reassigned_away_follower_leaves_the_indexes(sink, db):
    write(
        sink,
        1,
        partition_status=[r.partition_status(ts=1_000)],
        replica_status=[r.replica_status(replica=3, ts=1_000)],
    )
    assert db.smembers(K.out_of_sync("c1")) == {"orders:0:3"}
    write(sink, 2, partition_status=[r.partition_status(ts=2_000, replicas=[1, 2, 4])])
    assert db.smembers(K.replicas("c1", "orders", 0)) == set()
    assert db.smembers(K.out_of_sync("c1")) == set()


def test_a_cluster_name_with_a_colon_cannot_collide(sink, db):
    write(sink, 1, partition_status=[r.partition_status(cluster="dc1:prod")])
    assert db.exists("replmon:partition:dc1%3Aprod:orders:0")
    assert db.smembers(K.clusters()) == {"dc1%3Aprod"}


def test_quarantine_is_written_once_and_counted(sink, db):
    batch = [r.quarantined(), r.quarantined(), r.quarantined(raw='{"type":"x"}', stage="state")]
    assert write(sink, 3, quarantine=batch).quarantine_written == 3
    assert write(sink, 3, quarantine=list(reversed(batch))).quarantine_skipped == 3
    assert db.xlen(K.quarantine_stream()) == 3 and db.get(K.quarantine_count()) == "3"
    assert write(sink, 4, quarantine=batch[:1]).quarantine_written == 1  # a later batch
    [(_, last)] = db.xrevrange(K.quarantine_stream(), count=1)
    assert (last["raw"], last["stage"], last["cluster"], last["ts"]) == ("{not json", "parse", "", "")


def test_stream_maxlen_bounds_hold(redis_client, db):
    settings = RedisSinkSettings(
        alerts_maxlen=50, series_maxlen=20, cluster_series_maxlen=20, quarantine_maxlen=50
    )
    sink = RedisSink(redis_client, settings)
    write(
        sink,
        1,
        alerts=[r.alert(f"a{i}", ts=i) for i in range(1_000)],
        quarantine=[r.quarantined(raw=str(i)) for i in range(1_000)],
    )
    for ts in range(1_000, 1_400):  # after the alerts' event times, so each adds a cluster point
        write(sink, ts, replica_status=[r.replica_status(ts=ts)])
    # MAXLEN ~ trims whole macro nodes: a stream may exceed its bound by less than one node.
    slack = int(db.config_get("stream-node-max-entries")["stream-node-max-entries"])
    assert 50 <= db.xlen(K.alerts_stream()) < 50 + slack
    assert 50 <= db.xlen(K.quarantine_stream()) < 50 + slack
    assert 20 <= db.xlen(K.replica_series("c1", "orders", 0, 3)) < 20 + slack
    assert 20 <= db.xlen(K.cluster_series("c1")) < 20 + slack
    assert db.get(K.quarantine_count()) == "1000"


def test_big_batches_are_sent_in_chunks(redis_client, db):
    sink = RedisSink(redis_client, RedisSinkSettings(chunk_size=100, statuses_per_call=7))
    replicas = [r.replica_status(partition=p, replica=b, ts=1_000) for p in range(50) for b in (2, 3)]
    report = write(sink, 1, replica_status=replicas)
    assert report.replica_status_written == 100 and report.series_points_written == 100
    assert report.round_trips == 2  # 15 calls (14 x 7 + 2 records), then the cluster point
    assert db.scard(K.out_of_sync("c1")) == 100
    assert db.smembers(K.replicas("c1", "orders", 49)) == {"2", "3"}
    again = write(sink, 1, replica_status=list(reversed(replicas)))
    assert again.replica_status_written == 100 and again.series_points_written == 0


def test_a_record_outside_the_contract_fails_the_batch(sink):
    with pytest.raises(RecordError, match="lacks topic"):
        write(sink, 1, replica_status=[r.replica_status(topic=None)])
    with pytest.raises(RecordError, match="status 'pending'"):
        write(sink, 1, alerts=[r.alert(status="pending")])


def test_redis_down_raises_sink_unavailable_after_bounded_retries():
    sleeps = []
    client = build_client(RedisConnectionSettings(url=f"redis://127.0.0.1:{free_port()}/0"))
    sink = RedisSink(client, RedisSinkSettings(retries=2, backoff_initial_s=0.5), sleep=sleeps.append)
    started = time.monotonic()
    with pytest.raises(SinkUnavailable, match="after 3 attempts"):
        write(sink, 9, **r.full_batch())
    assert sleeps == [0.5, 1.0]
    assert time.monotonic() - started < 5


def test_a_server_that_dies_mid_session_fails_the_next_batch():
    server = RedisServer()
    try:
        client = build_client(RedisConnectionSettings(url=server.url))
        sink = RedisSink(client, RedisSinkSettings(retries=1, backoff_initial_s=0.01))
        assert write(sink, 1, **r.full_batch(ts=1_000)).written == 5
        server.stop()
        started = time.monotonic()
        with pytest.raises(SinkUnavailable, match="batch 2"):
            write(sink, 2, **r.full_batch(ts=2_000))
        assert time.monotonic() - started < 5
    finally:
        server.stop()


def test_acl_user_and_password(redis_server, redis_client):
    # the least-privilege user docs/redis.md recommends
    redis_client.execute_command(
        "ACL",
        "SETUSER",
        "replmon-writer",
        "reset",
        "on",
        ">s3cret-pw",
        "~replmon:*",
        "&replmon:*",
        "+@read",
        "+@write",
        "+@scripting",
        "+publish",
        "+ping",
        "+hello",
        "+client|setname",
    )
    settings = RedisConnectionSettings(
        url=redis_server.url, username="replmon-writer", password=SecretStr("s3cret-pw")
    )
    report = write(RedisSink(build_client(settings)), 1, **r.full_batch())
    assert report.written == 5

    wrong = settings.model_copy(update={"password": SecretStr("not-it")})
    with pytest.raises(SinkAuthError, match="refused the sink's user") as failure:
        write(RedisSink(build_client(wrong)), 2, **r.full_batch())
    assert "not-it" not in str(failure.value)


def test_a_user_without_the_prefix_is_refused_clearly(redis_server, redis_client):
    redis_client.execute_command(
        "ACL", "SETUSER", "other-app", "reset", "on", ">pw", "~other:*", "&*", "+@all"
    )
    settings = RedisConnectionSettings(url=redis_server.url, username="other-app", password=SecretStr("pw"))
    with pytest.raises(SinkAuthError):
        write(RedisSink(build_client(settings)), 1, **r.full_batch())


def test_a_missing_permission_fails_clearly_and_the_replay_completes_the_write(
    redis_server, redis_client, db
):
    redis_client.execute_command(  # everything but PUBLISH
        "ACL",
        "SETUSER",
        "no-publish",
        "reset",
        "on",
        ">pw",
        "~replmon:*",
        "&replmon:*",
        "+@read",
        "+@write",
        "+@scripting",
        "+ping",
        "+client|setname",
    )
    settings = RedisConnectionSettings(url=redis_server.url, username="no-publish", password=SecretStr("pw"))
    sink = RedisSink(build_client(settings))
    with pytest.raises(SinkAuthError, match="lacks a permission"):
        write(sink, 1, alerts=[r.alert()])
    redis_client.execute_command("ACL", "SETUSER", "no-publish", "+publish")
    pubsub = db.pubsub()
    pubsub.subscribe(K.alerts_channel())
    pubsub.get_message(timeout=5)
    assert write(sink, 1, alerts=[r.alert()]).alerts_written == 1
    assert json.loads(pubsub.get_message(timeout=5)["data"])["alert_id"] == "a1"
    pubsub.close()
    assert db.hkeys(K.alerts_firing()) == ["a1"]
    assert db.xlen(K.alerts_stream()) == 2  # the failed run's entry stays: repeated, never lost


def test_connection_settings_keep_the_password_secret():
    settings = RedisConnectionSettings(
        url="rediss://cache:6380/0", username="u", password=SecretStr("hunter2"), ssl_ca_certs="/etc/ca.pem"
    )
    assert "hunter2" not in repr(settings) and "hunter2" not in settings.model_dump_json()
    assert settings.redacted_url() == "rediss://u@cache:6380/0"
    with pytest.raises(ValidationError, match="must not carry a password"):
        RedisConnectionSettings(url="redis://u:hunter2@cache:6379/0")
    with pytest.raises(ValidationError, match="not rediss"):
        RedisConnectionSettings(url="redis://cache:6379/0", ssl_ca_certs="/etc/ca.pem")
    with pytest.raises(ValidationError, match="extra"):
        RedisConnectionSettings(host="cache")


def test_tls_settings_reach_the_connection():
    client = build_client(
        RedisConnectionSettings(
            url="rediss://cache:6380/0",
            ssl_ca_certs="/etc/ca.pem",
            ssl_certfile="/etc/c.pem",
            ssl_keyfile="/etc/c.key",
        )
    )
    kwargs = client.connection_pool.connection_kwargs
    assert client.connection_pool.connection_class is redis.SSLConnection
    assert (kwargs["ssl_ca_certs"], kwargs["ssl_certfile"], kwargs["ssl_keyfile"]) == (
        "/etc/ca.pem",
        "/etc/c.pem",
        "/etc/c.key",
    )


def test_sink_settings_are_strict():
    with pytest.raises(ValidationError):
        RedisSinkSettings(prefix="has:colon")
    with pytest.raises(ValidationError):
        RedisSinkSettings(retries=-1)
    with pytest.raises(ValidationError):
        RedisSinkSettings(series_max_len=10)


def test_a_batch_of_no_records_still_moves_its_clusters_clock(sink, db):
    # A healthy cluster whose statuses did not change (stream.status_refresh_ms): the batch's
    # newest activity still gives the cluster series its point, and a replay writes it once.
    report = sink.write_batch(7, [], [], [], [], clocks={"c1": 5_000})
    assert report.cluster_points_written == 1
    assert [entry_id for entry_id, _ in db.xrange(K.cluster_series("c1"))] == ["5000-0"]
    assert sink.write_batch(7, [], [], [], [], clocks={"c1": 5_000}).cluster_points_written == 0
    sink.write_batch(8, [], [], [], [], clocks={"c1": 6_000, "c2": 6_500})
    assert [entry_id for entry_id, _ in db.xrange(K.cluster_series("c1"))] == ["5000-0", "6000-0"]
    assert db.xlen(K.cluster_series("c2")) == 1
