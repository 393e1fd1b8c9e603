"""No function in state/ or streaming/ is over MAX_LINES lines: a longer one is nearly always
several steps that want names of their own."""

import ast
from pathlib import Path

ROOT = Path(__file__).parents[1]
PACKAGES = ("state", "streaming")
MAX_LINES = 60


def function_lengths(root: Path = ROOT) -> dict[str, int]:
    """The length of every function and method by "path::qualified name": its def line to its
    last line as Python's ast counts them (end_lineno - lineno + 1), a nested function counted
    inside its parent and on its own too."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    assert child.end_lineno is not None
                    lengths[f"{path}::{name}"] = child.end_lineno - child.lineno + 1
                visit(child, path, name + ".")
            else:
                visit(child, path, prefix)

    for package in PACKAGES:
        for module in sorted((root / package).rglob("*.py")):
            path = module.relative_to(root).as_posix()
            visit(ast.parse(module.read_text(), filename=str(module)), path, "")
    return lengths


def test_the_walk_measures_every_function_as_ast_counts_it(tmp_path):
    (tmp_path / "state").mkdir()
    (tmp_path / "streaming" / "sub").mkdir(parents=True)
    lines = [f"    x{i} = {i}\n" for i in range(MAX_LINES)]
    body = "".join(lines)  # MAX_LINES lines
    (tmp_path / "state" / "short.py").write_text("def fine():\n" + "".join(lines[1:]))
    nested = "".join("    " + line for line in body.splitlines(True))
    (tmp_path / "streaming" / "sub" / "long.py").write_text(
        f"class C:\n    def method(self):\n{nested}\n\ndef outer():\n    def inner():\n{nested}"
    )
    assert function_lengths(tmp_path) == {
        "state/short.py::fine": MAX_LINES,  # the def line and 59 more
        "streaming/sub/long.py::C.method": MAX_LINES + 1,
        "streaming/sub/long.py::outer": MAX_LINES + 2,  # its nested function counted inside it
        "streaming/sub/long.py::outer.inner": MAX_LINES + 1,
    }


def test_the_real_packages_are_walked():
    lengths = function_lengths()
    assert "streaming/cli.py::main" in lengths
    assert "state/codec.py::decode_chunks" in lengths
    assert "streaming/collect/cli.py::add_arguments" in lengths  # subpackages too


def test_no_function_is_over_the_limit():
    over = sorted(f"{key}: {n} lines" for key, n in function_lengths().items() if n > MAX_LINES)
    assert not over, f"over {MAX_LINES} lines (split each along what it does):\n" + "\n".join(over)
