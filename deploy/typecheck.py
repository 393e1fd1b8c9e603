"""Run mypy over replmon's packages as they install: `python deploy/typecheck.py [mypy args]`.

The source folders keep their short names (state/, streaming/, ...) but install as `replmon.*`
(pyproject.toml's package-dir), and mypy cannot follow the editable install's import hook. So
this builds a tree of symlinks, .cache/typecheck/replmon/<folder> -> <folder>, puts it on
MYPYPATH, and runs mypy with the [tool.mypy] settings of pyproject.toml (which name the
packages). Error lines are printed with the real source paths (state/bucket.py, not the link).
The tree and mypy's cache stay under .cache/, so a second run only re-checks what changed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHADOW = ROOT / ".cache" / "typecheck"


def source_folders(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """Top-level folder -> installed package, from pyproject's package-dir (replmon.state -> state)."""
    package_dir = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-dir"]
    return {folder: name for name, folder in package_dir.items() if "/" not in folder}


def build_shadow(root: Path = ROOT, shadow: Path = SHADOW) -> Path:
    """The symlink tree mypy reads: shadow/replmon/state -> root/state, and so on."""
    for folder, name in source_folders(root / "pyproject.toml").items():
        if name.rpartition(".")[0] != "replmon":  # a link inside a linked folder would write there
            raise SystemExit(f"typecheck.py: {folder}/ installs as {name}; only replmon.<name> is mapped")
        link = shadow.joinpath(*name.split("."))
        link.parent.mkdir(parents=True, exist_ok=True)
        target = root / folder
        if link.is_symlink() and link.resolve() == target.resolve():
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target, target_is_directory=True)
    return shadow


def main(argv: list[str]) -> int:
    shadow = build_shadow()
    env = {**os.environ, "MYPYPATH": str(shadow)}
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    # mypy names files by the path it found them under: map the links back to the sources
    prefixes = {
        f"{shadow.relative_to(ROOT)}/{name.replace('.', '/')}/": f"{folder}/"
        for folder, name in source_folders().items()
    }
    for stream, text in ((sys.stdout, proc.stdout), (sys.stderr, proc.stderr)):
        for line in text.splitlines(keepends=True):
            for link, real in prefixes.items():
                if line.startswith(link):
                    line = real + line[len(link) :]
                    break
            stream.write(line)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
