"""The uninterrupted run the interruption faults compare with: the `demo` scenario's events, in
FILES files, read by `replmon run --once` (a subprocess) all in one batch into the throwaway
Redis under the prefix `ref`. Computed once per session: the faults' tests share it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from replmon.sinks.keys import Keys
from replmon.streaming.simulator import scenarios
from replmon.streaming.simulator.model import simulate
from replmon.streaming.simulator.writers import write_events
from tests.streaming.helpers import exactly_once, read_outputs, transition_key
from tests.streaming.test_outage import split_into_files, transitions_in_redis

FILES = 4


@dataclass(frozen=True)
class Reference:
    events: list  # the simulated events, in time order
    folder: Path  # the same events in FILES files
    transitions: Counter  # (alert_id, status, name) -> 1, as the uninterrupted run wrote them


def run_env(**extra: str) -> dict[str, str]:
    """What every replmon run of the faults' tests shares (and the reference used)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLMON_")}
    env.update(
        REPLMON_STREAM__BUCKETS="4",
        REPLMON_SPARK__DRIVER_MEMORY="1g",
        REPLMON_SUPERVISE__RESTART_BACKOFF_INITIAL_S="1",
        REPLMON_SUPERVISE__RESTART_BACKOFF_MAX_S="4",
        REPLMON_SUPERVISE__STALLED_AFTER_S="600",  # a loaded machine is not a stall here
        REPLMON_SUPERVISE__MAX_EVENT_LAG_S="0",
    )  # a replay of old events: no lag check
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def demo_reference(tmp_path_factory, redis_server) -> Reference:
    root = tmp_path_factory.mktemp("reference")
    events, _ = simulate(scenarios.get("demo"), seed=0)
    write_events(root / "sim", events)
    split_into_files(root / "sim" / "events" / "part-00000.jsonl", root / "events", FILES)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "replmon.streaming.cli",
            "run",
            "--input",
            str(root / "events"),
            "--output",
            str(root / "out"),
            "--no-timeline",
            "--once",
            "--redis-url",
            redis_server.url,
        ],
        cwd=root,
        env=run_env(REPLMON_REDIS__PREFIX="ref", REPLMON_SPARK__MAX_FILES_PER_TRIGGER=str(FILES)),
        capture_output=True,
        text=True,
        timeout=600,  # one Spark start and run; minutes on a loaded machine
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = redis.Redis.from_url(redis_server.url)
    expected = transitions_in_redis(client, Keys("ref"))
    client.close()
    assert expected and max(expected.values()) == 1
    assert any(name == "ReplicaOutOfSync" for _, _, name in expected)
    files = Counter(transition_key(a) for a in read_outputs(root / "out")["alerts"] if exactly_once(a))
    assert files == expected
    return Reference(events=events, folder=root / "events", transitions=expected)
