"""Writes the monitor's heartbeat (a flat dict of strings) to one Redis hash.

One command, no retries: a heartbeat that cannot be written is logged by the caller and the
next one replaces it. The hash expires, so a replmon that is gone leaves no heartbeat that
looks fresh to a reader who only checks that the key exists.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import redis
from redis.typing import EncodableT

from replmon.sinks.keys import Keys

log = logging.getLogger(__name__)


class HeartbeatWriter:
    def __init__(self, client: redis.Redis, keys: Keys, ttl_s: int) -> None:
        if ttl_s < 1:
            raise ValueError(f"heartbeat ttl must be at least 1 s, not {ttl_s}")
        self._client = client
        self._keys = keys
        self._ttl_s = ttl_s

    def write(self, query: str, fields: Mapping[str, str]) -> None:
        """Replace the heartbeat of `query`; raises redis errors to the caller."""
        key = self._keys.heartbeat(query)
        pipe = self._client.pipeline(transaction=True)
        pipe.delete(key)
        mapping: dict[EncodableT, EncodableT] = dict(fields.items())  # redis types its keys as a union
        pipe.hset(key, mapping=mapping)
        pipe.expire(key, self._ttl_s)
        pipe.execute()
