"""replmon as a user installs it: a wheel in a fresh virtual environment, outside the checkout.

The source folders (state/, streaming/, sinks/, dashboards/) install as `replmon.*`; a package
folder missing from pyproject.toml, or a data file that is not package data, only shows once
the code runs from a wheel, away from the source tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_FOLDERS = ("state", "streaming", "sinks", "dashboards")
OWN_SCENARIOS = ROOT / "tests" / "state" / "data" / "conformance" / "replmon_rules.jsonl"


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_installs_under_the_replmon_namespace():
    setuptools = _pyproject()["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = set()
    for top in SOURCE_FOLDERS:
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT)
            found.add("replmon." + ".".join(rel.parts))
    assert found == listed, f"pyproject packages differ from the package folders: {found ^ listed}"
    for name in listed:
        assert setuptools["package-dir"][name] == name.removeprefix("replmon.").replace(".", "/")


def _clean_env(**extra: str) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("REPLMON_", "PYTHON", "VIRTUAL_ENV", "SPARK_"))
    }
    return {**env, **extra}


def _runtime_closure() -> list:
    """The distributions replmon's declared dependencies need at run time, their own
    dependencies (and requested extras) included, as installed here; test extras are not."""
    from importlib import metadata

    from packaging.requirements import Requirement

    todo = [(Requirement(r), "") for r in _pyproject()["project"]["dependencies"]]
    seen: dict[str, metadata.Distribution] = {}
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        dist = metadata.distribution(req.name)
        key = dist.metadata["Name"].lower()
        if key in seen and not req.extras:
            continue
        seen[key] = dist
        for e in ("", *req.extras):
            todo += [(Requirement(r), e) for r in dist.requires or ()]
    return list(seen.values())


def _link_dependencies(env_dir: Path, into: Path) -> None:
    """Make the runtime closure importable in the new venv without copying it (pyspark alone is
    hundreds of MB): each distribution's top-level files and folders, and its metadata, are
    linked into `into`, which a .pth file of the venv puts on sys.path. Only these: a module
    the code imports but pyproject.toml does not declare is missing there as in a user's
    install, and the checkout's own editable replmon is not among them."""
    into.mkdir()
    for dist in _runtime_closure():
        assert dist.files is not None, f"{dist.metadata['Name']} lists no files"
        for top in {f.parts[0] for f in dist.files} - {"..", "__pycache__"}:
            src = Path(dist.locate_file(top))
            if src.exists() and not (into / top).exists():
                (into / top).symlink_to(src)
    (site,) = (env_dir / "lib").glob("python*/site-packages")
    (site / "replmon_test_dependencies.pth").write_text(f"{into}\n")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """Build the wheel from the checkout and install it into a new venv in a temporary folder;
    its dependencies are this environment's, linked in (_link_dependencies), and pip checks
    that they satisfy what the wheel declares."""
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        env=_clean_env(),
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = dist.glob("replmon-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "replmon/streaming/simulator/model.py" in names
    assert any(n.startswith("replmon/dashboards/json/") and n.endswith(".json") for n in names)
    assert not any(n.split("/")[0] in SOURCE_FOLDERS for n in names), "bare top-level packages"
    env_dir = tmp / "venv"
    venv.create(env_dir)  # no pip of its own: this pip installs into it (--python)
    _link_dependencies(env_dir, tmp / "dependencies")
    py = env_dir / "bin" / "python"
    for args in (["install", "-q", "--no-deps", "--no-index", str(wheel)], ["check"]):
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(py), *args],
            capture_output=True,
            text=True,
            timeout=900,
            env=_clean_env(),
        )
        assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    return env_dir


def _replmon(env_dir: Path, *args: str, cwd: Path, timeout: float = 300):
    return subprocess.run(
        [str(env_dir / "bin" / "replmon"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_clean_env(TMPDIR=str(cwd)),
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.wheel
def test_wheel_help_and_imports_come_from_the_installed_package(installed, tmp_path):
    proc = _replmon(installed, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "conformance" in proc.stdout and "simulate" in proc.stdout
    where = subprocess.run(
        [
            str(installed / "bin" / "python"),
            "-c",
            (
                "import replmon.state.partition as m, replmon.sinks.grafana as g;"
                "print(m.__file__); print(len(g.load_dashboards()))"
            ),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=_clean_env(),
    )
    assert where.returncode == 0, where.stderr
    module_file, boards = where.stdout.split()
    assert str(installed) in module_file and str(ROOT) not in module_file
    assert int(boards) >= 2


@pytest.mark.wheel
def test_wheel_runs_conformance(installed, tmp_path):
    proc = _replmon(installed, "conformance", str(OWN_SCENARIOS), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ", 0 failed" in proc.stdout


@pytest.mark.wheel
@pytest.mark.spark  # the demo runs the streaming query in a local Spark
def test_wheel_runs_the_embedded_default(installed, tmp_path):
    refused = _replmon(installed, "run", cwd=tmp_path, timeout=120)  # not interactive, no input
    assert refused.returncode == 2 and "no input configured" in refused.stderr
    proc = _replmon(installed, "run", "--demo", cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "simulating scenario 'demo'" in proc.stdout
    assert "ReplicaOutOfSync" in proc.stdout
    assert (tmp_path / "replmon-out" / "alerts").is_dir()
