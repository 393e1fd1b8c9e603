"""Headless Chromium for tests: a screenshot of a local page (deploy/local/chromium.sh installs it)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError(
        "chromium is not installed: run `bash deploy/local/chromium.sh` (deploy/dev.sh test does)"
    )


def screenshot(page: Path, out: Path, width: int = 1280, height: int = 3000, timeout_s: float = 120) -> Path:
    with tempfile.TemporaryDirectory(prefix="replmon-chromium-") as profile:
        proc = subprocess.run(
            [
                chromium(),
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                f"--screenshot={out}",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    assert out.is_file(), f"chromium wrote no screenshot (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
    return out


def pixel_shares(png: Path) -> dict:
    """Share of pixels that are not (near) white, and of strongly coloured ones (plot lines and
    bars; text and grid lines are grey)."""
    import numpy as np
    from PIL import Image

    rgb = np.asarray(Image.open(png).convert("RGB")).astype(int).reshape(-1, 3)
    ink = (rgb.min(axis=1) < 235).mean()
    colour = (rgb.max(axis=1) - rgb.min(axis=1) > 80).mean()
    return {"ink": float(ink), "colour": float(colour)}
