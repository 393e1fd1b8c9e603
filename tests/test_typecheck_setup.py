"""mypy sees every package as it installs (deploy/typecheck.py and pyproject's [tool.mypy])."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _typecheck():
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / "deploy" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shadow_tree_links_each_package_to_its_folder(tmp_path):
    shadow = _typecheck().build_shadow(ROOT, tmp_path)
    for folder in ("state", "streaming", "sinks", "dashboards"):
        link = shadow / "replmon" / folder
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve()
    assert (shadow / "replmon" / "streaming" / "collect" / "cli.py").is_file()  # subpackages come along


def test_mypy_checks_every_top_level_package():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    installed = {name for name in pyproject["tool"]["setuptools"]["packages"] if name.count(".") == 1}
    assert set(pyproject["tool"]["mypy"]["packages"]) == installed
