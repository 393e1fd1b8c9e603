"""The real redis-server fixtures live in tests/redis_server.py, shared with tests/dashboards."""

from tests.redis_server import redis_client, redis_server  # noqa: F401  (pytest fixtures)
