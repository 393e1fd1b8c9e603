"""The fault suite uses the real services: a throwaway redis-server (tests/redis_server.py),
the local Kafka broker (tests/integration/conftest.py) and the shared Spark session."""

from tests.faults.reference import demo_reference  # noqa: F401  (pytest fixture)
from tests.integration.conftest import (
    redis_url,  # noqa: F401
)
from tests.redis_server import redis_client, redis_server  # noqa: F401  (pytest fixtures)
