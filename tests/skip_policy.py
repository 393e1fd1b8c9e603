"""The full tier's skip policy: every skip is either listed here as expected, with the reason it
gives, or the run fails. `bash deploy/dev.sh test` turns it on (pytest --strict-skips); the fast
tier does not, since there a missing service is a normal reason to skip.

A skip that hides a fault that did not happen, or a tool that is missing, would otherwise pass
as a green run that judged nothing."""

from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class ExpectedSkip:
    node: str  # a node id, or its beginning when it ends in "::" or "["
    reason: str  # a piece of the skip's reason
    why: str  # why this skip is no hidden failure


EXPECTED_SKIPS = (
    ExpectedSkip(
        "tests/judge/test_perbroker.py::",
        "REPLMON_JUDGE_PER_BROKER=1",
        "opt-in (about 5 minutes over CI's budget): docs/real-cluster.md",
    ),
    ExpectedSkip(
        "tests/state/test_conformance.py::test_shared_scenario_passes[absent]",
        "no ../shared beside the repository",
        "a lone clone has no shared conformance files; its own scenarios run always",
    ),
)


def skip_reason(longrepr) -> str:
    """The reason of a skip report (pytest keeps it as (path, line, 'Skipped: reason'))."""
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def is_expected(nodeid: str, reason: str, expected: tuple[ExpectedSkip, ...] = EXPECTED_SKIPS) -> bool:
    return any(
        (nodeid == e.node or (e.node.endswith(("::", "[")) and nodeid.startswith(e.node)))
        and e.reason in reason
        for e in expected
    )


class SkipPolicy:
    """A pytest plugin: collects every skip (of a test or of a whole module at collection) and
    fails a run that would otherwise pass when one of them is not expected."""

    def __init__(self, expected: tuple[ExpectedSkip, ...] = EXPECTED_SKIPS) -> None:
        self.expected = expected
        self.unexpected: list[tuple[str, str]] = []

    def _seen(self, report) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            reason = skip_reason(report.longrepr)
            if not is_expected(report.nodeid, reason, self.expected):
                self.unexpected.append((report.nodeid, reason))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._seen(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._seen(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.unexpected and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.unexpected:
            return
        terminalreporter.write_sep("=", f"{len(self.unexpected)} unexpected skips (the run fails)", red=True)
        for nodeid, reason in self.unexpected:
            terminalreporter.write_line(f"{nodeid}: {reason}")
        terminalreporter.write_line("Expected skips are listed in tests/skip_policy.py (EXPECTED_SKIPS).")
