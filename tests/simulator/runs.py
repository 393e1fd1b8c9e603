from __future__ import annotations

from functools import cache

from replmon.streaming.simulator import scenarios
from replmon.streaming.simulator.model import simulate


@cache
def run(name: str, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(events, truth) of a named scenario; computed once per test session."""
    return simulate(scenarios.get(name), seed=seed)
