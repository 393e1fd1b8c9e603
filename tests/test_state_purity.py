"""state/ is the pure rules engine: no Spark, no client libraries, no I/O, no clock reads
(docs/contributing.md, Layers)."""

import ast
import re
from pathlib import Path

import pytest

STATE = Path(__file__).parents[1] / "state"
MODULES = sorted(STATE.rglob("*.py"))

# Top-level packages state/ must never import.
FORBIDDEN = {
    "pyspark",
    "pandas",
    "redis",
    "kafka",
    "grafana_client",
    "requests",
    "socket",
    "time",
    "urllib",
    "http",
    "subprocess",
}  # replmon's own other packages: tests/test_import_graph.py (the layers)
CLOCK_READS = re.compile(
    r"\b(time\.(time|time_ns|monotonic|monotonic_ns|perf_counter)\(|"
    r"datetime\.(now|utcnow|today)\(|date\.today\()"
)


def _imported_packages(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_state_has_modules():
    assert any(m.name == "partition.py" for m in MODULES)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: str(m.relative_to(STATE)))
def test_no_forbidden_imports(module):
    imported = _imported_packages(ast.parse(module.read_text(), filename=str(module)))
    assert not imported & FORBIDDEN, f"{module.name} imports {sorted(imported & FORBIDDEN)}"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: str(m.relative_to(STATE)))
def test_no_clock_reads(module):
    hits = [
        f"{module.name}:{n}: {line.strip()}"
        for n, line in enumerate(module.read_text().splitlines(), 1)
        if CLOCK_READS.search(line)
    ]
    assert not hits, "time must be an argument in state/:\n" + "\n".join(hits)


def test_the_checks_catch_what_they_should():
    tree = ast.parse("import pyspark.sql\nfrom time import time\nfrom . import replica\n")
    assert _imported_packages(tree) & FORBIDDEN == {"pyspark", "time"}
    assert CLOCK_READS.search("now = datetime.now()") and CLOCK_READS.search("t = time.time()")
    assert not CLOCK_READS.search("def is_caught_up(state, leader_leo, now_ms, lag):")
