"""The documentation is for users (docs/contributing.md, Documentation): a short README that keeps
the two commands and points to the figures, docs that state current facts rather than how the
work was organised, and every docs/*.md the code, the tests and the docs cite exists."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MAX_README_LINES = 200

# References to the project's tracker or to a stage of its work, which a user cannot read.
# ("fetch session" and "an issue with X" are fine; "issue 13", "issue-13", "issue #13" are not.)
WORK_HISTORY = re.compile(
    r"\bthis stop\b|\bprevious stop\b|\bstop's change\b|\bthis branch\b|\bissue[ -]?#?\d+",
    re.IGNORECASE,
)
# Where a docs/*.md may be cited: the docs themselves, the code's comments, the tests, the benches.
CITING_FOLDERS = ("state", "streaming", "sinks", "dashboards", "bench", "deploy", "tests", "docs")
TEXT_SUFFIXES = (".md", ".py", ".sh", ".yml", ".yaml", ".toml")


def _text_files(folder: Path) -> list[Path]:
    """The source and text files under `folder`, without hidden folders (the local services' run
    folders) or fetched jars."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "jars", "kafka-libs", "__pycache__"))]
        found.extend(Path(dirpath) / f for f in filenames if f.endswith(TEXT_SUFFIXES))
    return found


def test_the_readme_is_short():
    lines = README.read_text().splitlines()
    assert 20 < len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_the_readme_keeps_the_two_commands():
    text = README.read_text()
    for command in ("bash deploy/dev.sh run", "bash deploy/dev.sh test", "bash deploy/dev.sh test --fast"):
        assert command in text, command


def test_the_figures_live_in_docs_performance_and_the_readme_links_them():
    performance = ROOT / "docs" / "performance.md"
    assert performance.is_file()
    assert "](docs/performance.md)" in README.read_text()
    text = performance.read_text()
    for bench in (
        "bench/throughput.py",
        "bench/kafka_to_redis.py",
        "bench/realtime.py",
        "bench/bucket_step.py",
    ):
        assert f".venv/bin/python {bench}" in text, f"docs/performance.md: how to run {bench}"


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_no_doc_refers_to_how_the_work_was_organised(doc):
    hits = [
        f"{doc.name}:{number}: {match.group(0)!r}"
        for number, line in enumerate(doc.read_text().splitlines(), 1)
        for match in WORK_HISTORY.finditer(line)
    ]
    assert hits == [], "state the current fact instead"


def test_the_history_pattern_sees_what_it_is_for():
    assert WORK_HISTORY.search("the figures before issue 13's work")
    assert WORK_HISTORY.search("This stop's change")
    assert WORK_HISTORY.search("(issue-21)")
    assert not WORK_HISTORY.search("the fetch session's epoch; an issue with the request log")


def test_every_cited_doc_exists():
    cited: dict[str, str] = {}
    for path in [README, *(p for folder in CITING_FOLDERS for p in _text_files(ROOT / folder))]:
        for name in re.findall(r"\bdocs/([\w-]+\.md)", path.read_text(errors="replace")):
            cited.setdefault(name, str(path.relative_to(ROOT)))
    assert "performance.md" in cited and "contributing.md" in cited
    missing = {name: where for name, where in cited.items() if not (ROOT / "docs" / name).is_file()}
    assert missing == {}, "cited docs/*.md that do not exist (name: first file citing it)"
