"""sinks/ turn engine outputs into writes; they never reach into the Spark wiring."""

from __future__ import annotations

import ast
from pathlib import Path

SINKS = Path(__file__).resolve().parents[2] / "sinks"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_sinks_never_import_streaming_or_spark():
    for path in sorted(SINKS.glob("*.py")):
        for module in imported_modules(path):
            root = module.split(".")[0]
            assert root not in {"streaming", "pyspark"}, f"{path.name} imports {module}"
