"""A real, throwaway redis-server for tests, plus the pytest fixtures that share it.

tests/conftest.py registers this module as a pytest plugin, so every test directory uses the
same server setup. The server listens on 127.0.0.1 on a free
port, keeps nothing on disk, and is stopped at the end of the session.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server process. `client()` gives a client with no retries of its own. The test
    that asks for one skips, saying why, where redis-server is not installed."""

    def __init__(self, *extra_args: str) -> None:
        if not Path(REDIS_SERVER).exists():
            pytest.skip(
                f"redis-server is not installed ({REDIS_SERVER}; Debian: apt-get install redis-server)"
            )
        self.port = free_port()
        self._dir = tempfile.TemporaryDirectory(prefix="replmon-redis-")
        self._proc = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                self._dir.name,
                *extra_args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, **kwargs) -> redis.Redis:
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        kwargs.setdefault("retry", Retry(NoBackoff(), 0))
        kwargs.setdefault("socket_timeout", 5)
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)

    def _wait_ready(self, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        probe = self.client(socket_connect_timeout=0.5)
        while True:
            if self._proc.poll() is not None:
                out = self._proc.stdout.read().decode(errors="replace") if self._proc.stdout else ""
                raise RuntimeError(f"redis-server exited with {self._proc.returncode}:\n{out}")
            try:
                if probe.ping():
                    probe.close()
                    return
            except redis.ConnectionError as exc:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server on port {self.port} not ready in {timeout_s}s") from exc
                time.sleep(0.05)

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout:
            self._proc.stdout.close()
        self._dir.cleanup()


@pytest.fixture(scope="session")
def redis_server():
    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_client(redis_server):
    """A client on a flushed database: each test starts from an empty Redis."""
    client = redis_server.client()
    client.flushall()
    client.script_flush()
    try:
        yield client
    finally:
        client.close()
