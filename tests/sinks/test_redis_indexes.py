"""RedisSink against a real redis-server: index sets written once per process and hash, and
again after a flush; series points of healthy partitions (docs/redis.md)."""

from __future__ import annotations

import pytest

from replmon.sinks.keys import Keys
from replmon.sinks.redis_sink import RedisSink, RedisSinkSettings
from tests.sinks import records as r

K = Keys()


@pytest.fixture
def db(redis_server, redis_client):
    """The same (flushed) server, answering str instead of bytes."""
    client = redis_server.client(decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def sink(redis_client):
    return RedisSink(redis_client)


def statuses(sink, batch_id, ts):
    return sink.write_batch(
        batch_id, [], [r.partition_status(ts=ts)], [r.replica_status(replica=3, ts=ts)], []
    )


def test_index_adds_go_once_per_process_and_again_after_a_restart(sink, redis_client, db):
    statuses(sink, 1, 1_000)
    assert db.smembers(K.brokers("c1")) == {"3"}
    # Taken out by hand: this process wrote the hash's indexes already and does not write
    # them again (the hash is there: not a flush)...
    db.srem(K.brokers("c1"), "3")
    db.srem(K.topics("c1"), "orders")
    report = statuses(sink, 2, 2_000)
    assert (report.partition_status_written, report.replica_status_written) == (1, 1)
    assert report.indexes_rewritten == 0
    assert db.smembers(K.brokers("c1")) == set() and db.smembers(K.topics("c1")) == set()
    assert db.hget(K.replica("c1", "orders", 0, 3), "ts") == "2000"  # the status itself is
    # ... a new process (a restart) sends them once more
    statuses(RedisSink(redis_client), 3, 3_000)
    assert db.smembers(K.brokers("c1")) == {"3"} and db.smembers(K.topics("c1")) == {"orders"}


def test_after_a_flush_the_next_write_restores_every_index(sink, db):
    statuses(sink, 1, 1_000)
    before = {k: db.smembers(k) for k in db.scan_iter(f"{K.prefix}:*") if db.type(k) == "set"}
    assert len(before) >= 7  # clusters, topics, partitions, the topic's, replicas, brokers, ...
    db.flushall()
    report = statuses(sink, 2, 2_000)
    assert report.indexes_rewritten == 2  # the partition's and the replica's record
    after = {k: db.smembers(k) for k in db.scan_iter(f"{K.prefix}:*") if db.type(k) == "set"}
    assert after == before
    assert statuses(sink, 3, 3_000).indexes_rewritten == 0  # remembered again


def test_a_forgotten_hash_only_costs_its_adds_again(redis_client, db):
    sink = RedisSink(redis_client, RedisSinkSettings(indexed_max=1))
    statuses(sink, 1, 1_000)  # two hashes: the partition's is forgotten, the replica's kept
    db.srem(K.topics("c1"), "orders")
    statuses(sink, 2, 2_000)
    assert db.smembers(K.topics("c1")) == {"orders"}  # sent again with the partition's record


def point(ts, replica=None, **fields):
    return {"cluster": "c1", "topic": "orders", "partition": 0, "replica": replica, "ts": ts, **fields}


def test_series_points_extend_the_series_once_and_move_the_cluster_point(sink, db):
    points = [
        point(5_000, hw=40, leader_leo=42, hw_stalled_ms=3, isr_size=3),
        point(5_000, replica=2, lag_ms=12, lag_messages=2, leo=40),
    ]
    report = sink.write_batch(4, [], [], [], [], series_points=points)
    assert report.series_points_written == 2
    assert db.xrange(K.partition_series("c1", "orders", 0)) == [
        ("5000-0", {"hw": "40", "leader_leo": "42", "hw_stalled_ms": "3", "isr_size": "3"})
    ]
    assert db.xrange(K.replica_series("c1", "orders", 0, 2)) == [
        ("5000-0", {"lag_ms": "12", "lag_messages": "2", "leo": "40"})
    ]
    assert [entry for entry, _ in db.xrange(K.cluster_series("c1"))] == ["5000-0"]
    assert not db.exists(K.partition("c1", "orders", 0))  # a point writes no status hash
    again = sink.write_batch(4, [], [], [], [], series_points=points)  # a replay: no point twice
    assert (again.series_points_written, again.cluster_points_written) == (0, 0)


def test_a_batchs_alerts_reach_redis_before_its_series_points(redis_client, db):
    # Series points are the bulk of a busy batch (a point per moving healthy partition): they
    # go out last, so that no alert waits on them. With 100 records a round trip, 300 points
    # and an alert: the alert is in Redis after the first round trip, the points after the last.
    sink = RedisSink(redis_client, RedisSinkSettings(chunk_size=100, statuses_per_call=50))
    seen = []
    execute = sink._execute

    def observed(batch_id, chunk):
        out = execute(batch_id, chunk)
        seen.append((db.xlen(K.alerts_stream()), db.xlen(K.partition_series("c1", "orders", 299))))
        return out

    sink._execute = observed
    points = [{**point(5_000, hw=1, leader_leo=1, isr_size=3), "partition": p} for p in range(300)]
    report = sink.write_batch(1, [r.alert()], [], [], [], series_points=points)
    assert report.series_points_written == 300 and len(seen) > 1
    assert seen[0][0] == 1  # the alert, in the first round trip
    assert seen[-1] == (1, 1) and all(n == 0 for _, n in seen[:-1])  # the last point, last
