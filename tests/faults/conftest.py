"""The fault suite uses the real services: a throwaway redis-server (tests/redis_server.py),
the local Kafka broker (tests/integration/conftest.py) and the shared Spark session."""

from tests.faults.reference import demo_reference  # noqa: F401 - a pytest fixture, found by name
from tests.integration.conftest import (  # noqa: F401 - pytest fixtures, found by name
    kafka_bootstrap,
    local_services,
    redis_url,
    spark_kafka_jars,
)
