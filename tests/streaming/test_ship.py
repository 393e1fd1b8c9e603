"""The code zip executors import replmon from (streaming/ship.py)."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from replmon.streaming.ship import code_zip


def test_the_zip_holds_every_package_and_imports_without_an_installed_replmon(tmp_path):
    path = code_zip(tmp_path)
    names = set(zipfile.ZipFile(path).namelist())
    for package in ("state", "streaming", "streaming/simulator", "sinks", "dashboards"):
        assert f"replmon/{package}/__init__.py" in names
        assert f"replmon/{package}/" in names, "directory entries: zipimport finds namespaces by them"
    assert "replmon/" in names and "replmon/__init__.py" not in names, "replmon stays a namespace"
    assert any(n.startswith("replmon/dashboards/json/") and n.endswith(".json") for n in names)
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    # An isolated interpreter (no site-packages, so no installed or editable replmon) imports
    # replmon from the zip alone.
    proc = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            (
                f"import sys; sys.path.insert(0, {str(path)!r}); import replmon.state.alerts as a; "
                "print(a.__file__); print(a.alert_id('X', 'c', 1))"
            ),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    where, aid = proc.stdout.split()
    assert where.startswith(str(path)) and len(aid) == 20


def test_the_same_code_gives_the_same_zip(tmp_path):
    assert code_zip(tmp_path) == code_zip(tmp_path)
    assert len(list(tmp_path.glob("replmon-code-*.zip"))) == 1
