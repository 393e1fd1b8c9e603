"""Builds the Redis outputs from the monitor's settings (the sinks package never reads them):
the sink for the query's records and the writer of the query's heartbeat, on one client."""

from __future__ import annotations

import logging

import redis

from replmon.sinks.heartbeat import HeartbeatWriter
from replmon.sinks.keys import Keys
from replmon.sinks.redis_client import RedisConnectionSettings, build_client
from replmon.sinks.redis_sink import RedisSink, RedisSinkSettings
from replmon.streaming.settings import RedisOut, Supervise, sink_settings

log = logging.getLogger(__name__)


def build_redis_client(conf: RedisOut) -> redis.Redis:
    connection = sink_settings(RedisConnectionSettings, conf)
    log.info("Redis outputs at %s (key prefix %s)", connection.redacted_url(), conf.prefix)
    return build_client(connection)


def build_redis_sink(conf: RedisOut, client: redis.Redis | None = None) -> RedisSink:
    sink = sink_settings(RedisSinkSettings, conf)
    return RedisSink(client if client is not None else build_redis_client(conf), sink)


def build_heartbeat_writer(conf: RedisOut, supervise: Supervise, client: redis.Redis) -> HeartbeatWriter:
    # Kept a while past the point where MonitorLagging would fire, then gone.
    ttl_s = int(max(3 * supervise.heartbeat_interval_s, 2 * supervise.stalled_after_s)) + 1
    return HeartbeatWriter(client, Keys(conf.prefix), ttl_s)
