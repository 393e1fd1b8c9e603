"""The layout the README and docs/design.md describe is the code's: every package is named in
both, every module in docs/design.md's layout (its table of modules), and the parts that run
without Spark (the collector on a broker's host, the simulator) import no Spark, directly or
through replmon's own modules."""

from __future__ import annotations

import ast
import fnmatch
import re

import pytest

from tests.test_import_graph import GRAPH, ROOT, SOURCE_FOLDERS, module_files

README = (ROOT / "README.md").read_text()
DESIGN = (ROOT / "docs" / "design.md").read_text()


def _section(text: str, heading: str) -> str:
    """From `heading` to the next heading of the same level (or the end)."""
    rest = text[text.index(heading) :]
    end = rest.find("\n## ", 3)
    return rest if end < 0 else rest[:end]


LAYOUT = _section(README, "## Layout")
DESIGN_LAYOUT = _section(DESIGN, "## Layout: what runs where")
PACKAGES = sorted(
    str(path.parent.relative_to(ROOT)) + "/"
    for top in SOURCE_FOLDERS
    for path in (ROOT / top).rglob("__init__.py")
)
NO_SPARK = ("replmon.streaming.collect", "replmon.streaming.simulator")


def test_the_packages_are_found():
    assert {"state/", "streaming/", "streaming/collect/", "streaming/simulator/", "sinks/"} <= set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_is_in_the_readme_layout_and_in_the_design(package):
    assert f"`{package}`" in LAYOUT, "README.md's layout table"
    assert f"`{package}`" in DESIGN_LAYOUT, "docs/design.md, Layout: what runs where"


def test_every_module_is_named_in_the_design_layout():
    named = set(re.findall(r"`([\w*]+\.py)`", DESIGN_LAYOUT))
    missing = sorted(
        str(path.relative_to(ROOT))
        for path in module_files().values()
        if path.name != "__init__.py" and not any(fnmatch.fnmatch(path.name, n) for n in named)
    )
    assert missing == [], "name these in docs/design.md's table of modules (Layout: what runs where)"


def _imports_pyspark(path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "pyspark" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pyspark":
            return True
    return False


def test_the_collector_and_the_simulator_import_no_spark():
    files = module_files()
    assert _imports_pyspark(files["replmon.streaming.parse"])  # the check sees a Spark import
    reached: set[str] = set()
    todo = [m for m in GRAPH if m.startswith(NO_SPARK)]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(GRAPH[module])
    spark = sorted(m for m in reached if _imports_pyspark(files[m]))
    assert spark == [], "reached from streaming/collect or streaming/simulator"
