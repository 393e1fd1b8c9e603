"""Every `# noqa` and `# type: ignore` in the tree names what it silences and says why.

ruff (PGH004, RUF100) already refuses a bare `noqa` and an unused one, mypy (warn_unused_ignores)
an unused ignore; this adds the reason: text after the codes, e.g.
`except Exception:  # noqa: BLE001 - closing is best effort`, and for mypy, which refuses
anything but a comment after its codes, `x = f(y)  # type: ignore[arg-type]  # why`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("state", "streaming", "sinks", "dashboards", "tests", "bench", "deploy")
SKIP = ("deploy/local/.run",)  # the local services' run folders
SUPPRESSION = re.compile(
    r"#\s*(noqa|type:\s*ignore)\b(?P<codes>(:\s*[A-Z]+\d+(,\s*[A-Z]+\d+)*)|\[[\w,\s-]+\])?(?P<rest>.*)"
)


def suppressions_without_reason(text: str) -> list[str]:
    """The suppression comments in `text` that give no codes or no reason after them."""
    bad = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in SUPPRESSION.finditer(line):
            reason = re.sub(r"^[\s\-–—:(]+", "", m["rest"])
            mypy_syntax = m[1] == "noqa" or re.match(r"\s+#", m["rest"])
            if not m["codes"] or not re.search(r"[a-z]{3}", reason) or not mypy_syntax:
                bad.append(f"{n}: {line.strip()}")
    return bad


def python_files() -> list[Path]:
    return [
        p
        for top in SOURCES
        for p in sorted((ROOT / top).rglob("*.py"))
        if not str(p.relative_to(ROOT)).startswith(SKIP)
    ]


def test_every_suppression_says_why():
    assert len(python_files()) > 150
    bad = {
        str(p.relative_to(ROOT)): found
        for p in python_files()
        if p.name != "test_suppressions.py" and (found := suppressions_without_reason(p.read_text()))
    }
    assert not bad, "noqa / type: ignore without codes or a reason:\n" + "\n".join(
        f"{path}:{line}" for path, lines in bad.items() for line in lines
    )


@pytest.mark.parametrize(
    ("line", "flagged"),
    [
        ("x = 1  # noqa: E731 - a key function reads best inline", False),
        ("except Exception:  # noqa: BLE001 (closing is best effort)", False),
        ("y = f(z)  # type: ignore[arg-type]  # pyspark takes float seconds", False),
        ("y = f(z)  # type: ignore[arg-type] - pyspark takes float seconds", True),  # mypy: invalid
        ("x = 1  # noqa: E731", True),  # no reason
        ("x = 1  # noqa", True),  # no codes
        ("y = f(z)  # type: ignore", True),
        ("y = f(z)  # type: ignore[arg-type]", True),
    ],
)
def test_the_check_tells_a_reason_from_none(line, flagged):
    assert bool(suppressions_without_reason(line)) is flagged
