"""The alert timeline as `replmon run` and `replmon replay` print it: one readable line per transition."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO


def print_timeline(alerts_dir: Path, out: TextIO | None = None) -> None:
    """The alert transitions, in event-time order, one readable line each."""
    out = out or sys.stdout
    rows = []
    for f in sorted(alerts_dir.glob("*.jsonl")):
        rows += [json.loads(line) for line in f.read_text().splitlines() if line]
    rows.sort(key=lambda r: (r["ts"], r["status"] != "resolved", r["subject"], r["name"]))
    print(f"\nAlert timeline ({len(rows)} transitions)", file=out)
    for r in rows:
        print(timeline_line(r), file=out)


def timeline_line(r: Mapping[str, Any]) -> str:
    """One alert transition: '00:00:29.975  FIRING   warning  ReplicaOutOfSync  sim/orders-0/2  reason'."""
    when = datetime.fromtimestamp(r["ts"] / 1000, tz=UTC).strftime("%H:%M:%S.%f")[:-3]
    return f"{when}  {r['status'].upper():8} {r['severity']:8} {r['name']:20} {r['subject']:28} {r['reason']}"
