"""Check a dashboard against Grafana's own dashboard model (grafana-foundation-sdk).

The SDK's models are generated from Grafana's schemas (the dashboard kind and each core panel
plugin's options and field config). A dashboard is parsed into those models and written back:
a key that does not survive the round trip is not a field Grafana knows at that place (a typo,
a field of another panel type, a removed option), and a panel type without a registered
plugin is not a core panel. Query targets of the Redis plugin and transformation options are
opaque to the SDK (they belong to plugins it does not model) and are checked elsewhere.
"""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.cog.runtime import panelcfg_config
from grafana_foundation_sdk.models.dashboard import Dashboard

register_default_plugins()


def lost_keys(original: Any, back: Any, where: str) -> list[str]:
    """Paths of keys in `original` that `back` (the round trip) no longer has."""
    if isinstance(original, dict) and isinstance(back, dict):
        problems = []
        for key, value in original.items():
            if value is None:
                continue  # null means absent to Grafana too
            if key not in back:
                problems.append(f"{where}.{key}")
            else:
                problems += lost_keys(value, back[key], f"{where}.{key}")
        return problems
    if isinstance(original, list) and isinstance(back, list) and len(original) == len(back):
        return [
            p
            for i, (a, b) in enumerate(zip(original, back, strict=True))
            for p in lost_keys(a, b, f"{where}[{i}]")
        ]
    return []


def schema_problems(board: dict) -> list[str]:
    """Empty if Grafana's model knows every field and panel type of `board`."""
    problems = [
        f"panel {p.get('title')!r}: {p.get('type')!r} is not a Grafana panel type"
        for p in board.get("panels", [])
        if panelcfg_config(p.get("type", "")) is None
    ]
    back = json.loads(json.dumps(Dashboard.from_json(board), cls=JSONEncoder))
    problems += [
        f"{path}: not a field of Grafana's dashboard model" for path in lost_keys(board, back, "dashboard")
    ]
    return problems
