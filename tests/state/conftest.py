"""A line in the session summary saying whether the shared conformance scenarios ran."""

from __future__ import annotations

import pytest

from .conformance_files import SHARED_ABSENT, SHARED_DIR

SHARED_TEST = "test_shared_scenario_passes"
_shared = {"collected": False, "ran": 0}


def pytest_collection_finish(session: pytest.Session) -> None:
    # After -k / -m deselection: only a run that includes the shared test reports on it.
    _shared["collected"] = any(getattr(item, "originalname", None) == SHARED_TEST for item in session.items)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and f"::{SHARED_TEST}[" in report.nodeid:
        _shared["ran"] += 1


def pytest_terminal_summary(terminalreporter) -> None:
    if not _shared["collected"]:
        return
    if _shared["ran"]:
        line = f"shared conformance scenarios: {_shared['ran']} ran, from {SHARED_DIR}"
    else:
        line = f"shared conformance scenarios: not run: {SHARED_ABSENT}"
    terminalreporter.write_sep("-", line)
