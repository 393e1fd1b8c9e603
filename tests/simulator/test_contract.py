"""Every event the simulator writes is valid under docs/events.md, checked by an independent checker."""

from __future__ import annotations

import json

import pytest

from replmon.streaming.simulator import scenarios
from replmon.streaming.simulator.scale import scale

from .contract import problems
from .runs import run


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_every_event_of_every_scenario_is_valid(name):
    events, _ = run(name)
    bad = [(e, p) for e in events if (p := problems(json.loads(json.dumps(e))))]
    assert not bad, bad[:5]


def test_scale_lines_are_valid_json_events():
    bad = [(line, p) for line in scale(7, 3, topics=2) if (p := problems(json.loads(line)))]
    assert not bad, bad[:5]


@pytest.mark.parametrize(
    "event, why",
    [
        (
            {
                "type": "fetch",
                "ts": 1,
                "cluster": "c",
                "topic": "t",
                "partition": 0,
                "replica": 2,
                "fetch_offset": 5,
            },
            "fetch without leader_leo",
        ),
        (
            {"type": "append", "ts": 1, "cluster": "c", "topic": "t", "partition": 0, "leader_leo": -1},
            "negative offset",
        ),
        (
            {
                "type": "metadata",
                "ts": 1,
                "cluster": "c",
                "topic": "t",
                "partition": 0,
                "leader": 4,
                "leader_epoch": 0,
                "replicas": [1, 2],
                "isr": [1],
            },
            "leader outside the replicas",
        ),
        ({"type": "broker", "ts": 1, "cluster": "c", "broker": 1, "state": "dead"}, "unknown broker state"),
        ({"type": "heartbeat", "ts": 1, "cluster": ""}, "empty cluster"),
        ({"type": "heartbeat", "ts": True, "cluster": "c"}, "bool is not an integer"),
        ({"type": "heartbeat", "ts": 1, "cluster": "c", "extra": 1}, "a field outside the contract"),
    ],
)
def test_the_checker_rejects_what_the_contract_forbids(event, why):
    assert problems(event), why
