"""Where the conformance scenario files are (docs/kafka-rules.md §10).

The project's own scenarios live in this repository and always run. The shared ones, in
`../shared/conformance/` beside the repository root, run in addition when that folder exists; a
clone with nothing beside it runs without them and says so.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWN_DIR = Path(__file__).resolve().parent / "data" / "conformance"
SHARED_DIR = ROOT.parent / "shared" / "conformance"
SHARED_ABSENT = f"no ../shared beside the repository ({SHARED_DIR} is absent)"


def own_files() -> list[Path]:
    return sorted(OWN_DIR.glob("*.jsonl"))


def shared_files() -> list[Path]:
    return sorted(SHARED_DIR.glob("*.jsonl")) if SHARED_DIR.is_dir() else []


def load(files: list[Path]) -> list[dict]:
    """Every scenario of the files, in order; blank lines are skipped."""
    return [json.loads(line) for path in files for line in path.read_text().splitlines() if line.strip()]
