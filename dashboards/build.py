"""Build the Grafana dashboards as JSON.

    replmon dashboards build [--output DIR] [--redis-prefix PREFIX] [--print]

writes DIR/replmon-overview.json, DIR/replmon-replica.json and DIR/replmon-broker.json (DIR defaults to
dashboards/json, which is committed and provisioned by deploy/grafana). The output depends on
nothing but the arguments, so building twice gives identical files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from replmon.dashboards import panels as p
from replmon.sinks.keys import DEFAULT_PREFIX, Keys

OUT_DIR = Path(__file__).resolve().parent / "json"
SCHEMA_VERSION = 39
GRID_WIDTH = 24


def layout(rows: list[list[tuple[dict, int, int]]]) -> list[dict]:
    """Place rows of (panel, width, height) top to bottom and number the panels."""
    placed: list[dict[str, Any]] = []
    y = 0
    for row in rows:
        x = 0
        for panel, width, height in row:
            if x + width > GRID_WIDTH:
                raise ValueError(f"row too wide at panel {panel['title']!r}")
            placed.append(
                {**panel, "id": len(placed) + 1, "gridPos": {"x": x, "y": y, "w": width, "h": height}}
            )
            x += width
        y += max(height for _, _, height in row)
    return placed


def dashboard(
    uid: str,
    title: str,
    description: str,
    variables: list[dict],
    panels: list[dict],
    links: list[dict],
    annotations: list[dict],
) -> dict:
    return {
        "id": None,
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["replmon", "kafka", "replication"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "annotations": {"list": annotations},
        "templating": {"list": variables},
        "links": links,
        "panels": panels,
    }


def _link(title: str, uid: str) -> dict:
    return {
        "title": title,
        "type": "link",
        "url": f"/d/{uid}",
        "includeVars": True,
        "keepTime": True,
        "asDropdown": False,
        "icon": "dashboard",
        "tags": [],
        "targetBlank": False,
        "tooltip": "",
    }


def overview(keys: Keys) -> dict:
    counts = [
        p.firing_alerts_count(keys),
        p.under_replicated_count(keys),
        p.under_min_isr_count(keys),
        p.out_of_sync_count(keys),
        p.quarantine_count(keys),
    ]
    return dashboard(
        "replmon-overview",
        "replmon / cluster overview",
        "Replication health of one Kafka cluster as re-derived by replmon.",
        [p.cluster_variable(keys)],
        layout(
            [
                [(c, w, 4) for c, w in zip(counts, (6, 5, 5, 4, 4), strict=True)],
                [(p.firing_alerts_table(keys), 24, 8)],
                [(p.cluster_counts(keys), 16, 8), (p.under_replicated_table(keys), 8, 8)],
                [(p.alert_transitions_table(keys), 24, 10)],
                [(p.quarantine_table(keys), 24, 8)],
            ]
        ),
        [_link("Partition and followers", "replmon-replica"), _link("Broker", "replmon-broker")],
        [p.annotation_query("replmon alerts", [f"cluster:{p.CLUSTER}"])],
    )


def replica(keys: Keys) -> dict:
    return dashboard(
        "replmon-replica",
        "replmon / partition and followers",
        "High watermark, ISR and per-follower lag of one partition.",
        [
            p.cluster_variable(keys),
            p.topic_variable(keys),
            p.partition_variable(keys),
            p.replica_variable(keys),
        ],
        layout(
            [
                [
                    (p.high_watermark_vs_leader_leo(keys), 12, 8),
                    (p.isr_size(keys), 6, 8),
                    (p.high_watermark_stalled(keys), 6, 8),
                ],
                [(p.partition_state_table(keys), 24, 5)],
                [(p.follower_lag_time(keys), 24, 8)],
                [(p.follower_lag_messages(keys), 24, 8)],
                [(p.follower_state_table(keys), 24, 5)],
            ]
        ),
        [_link("Cluster overview", "replmon-overview"), _link("Broker", "replmon-broker")],
        [
            p.annotation_query(
                "replmon alerts on this partition",
                [f"cluster:{p.CLUSTER}", f"topic:{p.TOPIC}", f"partition:{p.PARTITION}"],
            )
        ],
    )


def broker(keys: Keys) -> dict:
    return dashboard(
        "replmon-broker",
        "replmon / broker",
        "One broker as the follower side sees it: the followers it hosts, which are out of the ISR, "
        "its alerts and stalled fetchers, and each follower's lag.",
        [p.cluster_variable(keys), p.broker_variable(keys), p.hosted_variable(keys)],
        layout(
            [
                [
                    (p.broker_followers_count(keys), 6, 4),
                    (p.broker_out_of_sync_count(keys), 6, 4),
                    (p.broker_out_of_sync_table(keys), 12, 4),
                ],
                [(p.restart_gate_table(keys), 24, 4)],
                [(p.broker_alerts_table(keys), 24, 8)],
                [(p.stalled_fetchers_table(keys), 24, 6)],
                [(p.hosted_follower_lag(keys), 24, 8)],
            ]
        ),
        [_link("Cluster overview", "replmon-overview"), _link("Partition and followers", "replmon-replica")],
        # every alert about a broker or one of its replicas carries `broker` (docs/outputs.md)
        [p.annotation_query("replmon alerts on this broker", [f"cluster:{p.CLUSTER}", f"broker:{p.BROKER}"])],
    )


def build_all(prefix: str = DEFAULT_PREFIX) -> dict[str, dict]:
    """File name -> dashboard."""
    keys = Keys(prefix)
    return {
        "replmon-overview.json": overview(keys),
        "replmon-replica.json": replica(keys),
        "replmon-broker.json": broker(keys),
    }


def render(board: dict[str, Any]) -> str:
    return json.dumps(board, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write(out_dir: Path, prefix: str = DEFAULT_PREFIX) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, board in build_all(prefix).items():
        path = out_dir / name
        path.write_text(render(board), encoding="utf-8")
        written.append(path)
    return written
