"""Builds the Redis sink from the monitor's settings (the sinks package never reads them)."""
from __future__ import annotations

import logging

from replmon.sinks.redis_client import RedisConnectionSettings, build_client
from replmon.sinks.redis_sink import RedisSink, RedisSinkSettings
from replmon.streaming.settings import RedisOut

log = logging.getLogger(__name__)


def build_redis_sink(conf: RedisOut) -> RedisSink:
    connection = RedisConnectionSettings(
        url=conf.url, username=conf.username, password=conf.password,
        ssl_ca_certs=conf.ssl_ca_certs, ssl_certfile=conf.ssl_certfile,
        ssl_keyfile=conf.ssl_keyfile)
    sink = RedisSinkSettings(prefix=conf.prefix, alerts_maxlen=conf.alerts_maxlen,
                             series_maxlen=conf.series_maxlen,
                             quarantine_maxlen=conf.quarantine_maxlen, retries=conf.retries)
    log.info("writing alerts and metrics to %s (prefix %s)", connection.redacted_url(), conf.prefix)
    return RedisSink(build_client(connection), sink)
