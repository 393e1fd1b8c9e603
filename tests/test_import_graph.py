"""The import graph of replmon's packages has no cycles, and the layers point one way
(docs/contributing.md, Layers).

Every module under state/, streaming/, sinks/ and dashboards/ is parsed with `ast`; every import
counts, also one inside a function (a lazy import kept for start-up speed is still a dependency)
and one under `if TYPE_CHECKING:`. A cycle is reported as the path that closes it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_FOLDERS = ("state", "streaming", "sinks", "dashboards")

# What each top-level package may import from the others. state/ is the pure engine and stands
# alone; sinks write engine outputs and never import streaming (Spark wiring); dashboards read
# the key names the sinks declare; streaming wires everything together.
ALLOWED_LAYERS = {
    "replmon.state": set(),
    "replmon.sinks": {"replmon.state"},
    "replmon.dashboards": {"replmon.state", "replmon.sinks"},
    "replmon.streaming": {"replmon.state", "replmon.sinks", "replmon.dashboards"},
}

Graph = Mapping[str, Iterable[str]]


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name (as installed, `replmon.` + folder path) -> source file."""
    found = {}
    for top in SOURCE_FOLDERS:
        for path in sorted((root / top).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found["replmon." + ".".join(parts)] = path
    return found


def imports_of(module: str, source: str, modules: set[str], is_package: bool) -> set[str]:
    """The replmon modules `source` imports, wherever in the file the import statement is."""
    targets: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                origin = f"{base}.{node.module}" if node.module else base
            else:
                origin = node.module or ""
            targets.add(origin)
            # `from pkg import mod` imports the module pkg.mod, not only pkg's __init__
            targets.update(f"{origin}.{alias.name}" for alias in node.names)
    return {t for t in targets if t in modules and t != module}


def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    files = module_files(root)
    names = set(files)
    return {
        name: imports_of(name, path.read_text(), names, path.name == "__init__.py")
        for name, path in files.items()
    }


def top_package(module: str) -> str:
    """replmon.streaming.collect.cli -> replmon.streaming"""
    return ".".join(module.split(".")[:2])


def package_graph(graph: Graph) -> dict[str, set[str]]:
    """The graph between the four top-level packages. streaming's subpackages (collect,
    simulator) count as streaming: `replmon.streaming.cli` dispatches to every subcommand and
    the subcommands use streaming's small helpers (signals, console); within streaming the
    module graph must still be acyclic."""
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        here = top_package(module)
        edges = packages.setdefault(here, set())
        edges.update(p for t in targets if (p := top_package(t)) != here)
    return packages


def find_cycle(graph: Graph) -> list[str] | None:
    """One cycle in `graph` as a closed path [a, b, ..., a], or None. Deterministic (sorted)."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path = [start]
        on_path = {start}
        stack = [iter(sorted(graph.get(start, ())))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
            elif nxt in on_path:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in done:
                path.append(nxt)
                on_path.add(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def layer_violations(graph: Graph) -> list[str]:
    return sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        for target in targets
        if top_package(target) != top_package(module)
        and top_package(target) not in ALLOWED_LAYERS[top_package(module)]
    )


GRAPH = module_graph()


def test_the_graph_sees_every_module_and_lazy_imports():
    assert "replmon.state.partition" in GRAPH and "replmon.streaming.collect.cli" in GRAPH
    # streaming/cli.py imports pyspark-heavy modules inside its command functions, for speed
    assert len(GRAPH["replmon.streaming.cli"]) >= 3
    assert sum(len(t) for t in GRAPH.values()) > 150


def test_no_cycle_between_modules():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle between modules: " + " -> ".join(cycle or ())


def test_no_cycle_between_packages():
    packages = package_graph(GRAPH)
    cycle = find_cycle(packages)
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle or ())


def test_layers_point_one_way():
    bad = layer_violations(GRAPH)
    assert not bad, "imports against the layering (docs/contributing.md, Layers):\n" + "\n".join(bad)


# The checker itself, on small made-up trees: it must find what it is meant to find.


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for top in SOURCE_FOLDERS:
        (tmp_path / top).mkdir(exist_ok=True)
    return tmp_path


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # two modules that import each other, one of them lazily inside a function
        (
            {
                "streaming/cli.py": "def main():\n    from replmon.streaming import replay_cmd\n",
                "streaming/replay_cmd.py": "from . import cli\n",
            },
            ["replmon.streaming.cli", "replmon.streaming.replay_cmd", "replmon.streaming.cli"],
        ),
        # a three-step cycle through a relative import from a subpackage
        (
            {
                "streaming/a.py": "import replmon.streaming.collect.b\n",
                "streaming/collect/__init__.py": "",
                "streaming/collect/b.py": "from ..c import thing\n",
                "streaming/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from replmon.streaming import a\n",
            },
            [
                "replmon.streaming.a",
                "replmon.streaming.collect.b",
                "replmon.streaming.c",
                "replmon.streaming.a",
            ],
        ),
        # a chain is not a cycle
        (
            {"sinks/a.py": "from replmon.sinks import b\n", "sinks/b.py": "from replmon.state import c\n"},
            None,
        ),
    ],
)
def test_find_cycle_on_made_up_trees(tmp_path, files, expected):
    assert find_cycle(module_graph(_tree(tmp_path, files))) == expected


def test_package_cycle_and_layers_on_a_made_up_tree(tmp_path):
    root = _tree(
        tmp_path,
        {
            "sinks/grafana.py": "from replmon.dashboards.build import boards\n",
            "dashboards/build.py": "from replmon.sinks import keys\n",
            "sinks/keys.py": "from replmon.streaming import settings\n",
            "streaming/settings.py": "X = 1\n",
            "state/rules.py": "import os\n",
        },
    )
    graph = module_graph(root)
    assert find_cycle(graph) is None  # no module cycle ...
    assert find_cycle(package_graph(graph)) == ["replmon.dashboards", "replmon.sinks", "replmon.dashboards"]
    assert layer_violations(graph) == [
        "replmon.sinks.grafana imports replmon.dashboards.build",
        "replmon.sinks.keys imports replmon.streaming.settings",
    ]
