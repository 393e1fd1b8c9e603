"""replmon's own code as one zip for a cluster's executors (SparkContext.addPyFile).

Built from the replmon that is running, wherever it is installed (a wheel, an editable
checkout): each replmon.* package folder goes in under its import path, with directory entries
so that zipimport finds the `replmon` namespace. Executors need nothing else from replmon's
dependencies: they run the stateful step (numpy, pandas, pyarrow: PySpark's own), never the
settings, sinks or clients, which stay on the driver (docs/deploy.md).
"""

from __future__ import annotations

import hashlib
import importlib
import zipfile
from pathlib import Path

PACKAGES = ("replmon.state", "replmon.streaming", "replmon.sinks", "replmon.dashboards")
SKIP_SUFFIXES = (".pyc", ".pyo")


def _files() -> list[tuple[str, Path]]:
    """(path in the zip, file) for every file of the replmon packages, sorted."""
    out = []
    for name in PACKAGES:
        root = Path(importlib.import_module(name).__path__[0])
        prefix = name.replace(".", "/")
        for f in sorted(root.rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts and not f.name.endswith(SKIP_SUFFIXES):
                out.append((f"{prefix}/{f.relative_to(root).as_posix()}", f))
    return out


def code_zip(folder: Path) -> Path:
    """Write the zip into `folder` (named by a digest of its content, so an unchanged replmon
    gives the same file) and return its path."""
    files = _files()
    digest = hashlib.sha1()
    for arc, f in files:
        digest.update(arc.encode() + b"\0" + f.read_bytes())
    path = Path(folder) / f"replmon-code-{digest.hexdigest()[:12]}.zip"
    if path.is_file():
        return path
    tmp = path.with_suffix(".zip.tmp")
    dirs = sorted(
        {"/".join(arc.split("/")[:i]) + "/" for arc, _ in files for i in range(1, arc.count("/") + 1)}
    )
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for d in dirs:
            z.writestr(zipfile.ZipInfo(d, date_time=(1980, 1, 1, 0, 0, 0)), b"")
        for arc, f in files:
            z.write(f, arc)
    tmp.replace(path)
    return path
