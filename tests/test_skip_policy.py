"""The full tier's skip policy (tests/skip_policy.py) on small pytest runs of its own: a skip
not listed fails a run that would pass, a listed one does not, and a run that collected
nothing still exits 5."""

from __future__ import annotations

import pytest

from tests.skip_policy import EXPECTED_SKIPS, is_expected

pytest_plugins = ["pytester"]

CONFTEST = """
from tests.skip_policy import ExpectedSkip, SkipPolicy

def pytest_configure(config):
    config.pluginmanager.register(
        SkipPolicy((ExpectedSkip("test_listed.py::test_opt_in", "set OPT_IN=1", "example"),)), "policy"
    )
"""


@pytest.mark.parametrize(
    ("nodeid", "reason", "expected", "why"),
    [
        ("tests/judge/test_perbroker.py::test_x[1]", "runs with REPLMON_JUDGE_PER_BROKER=1", True, "prefix"),
        ("tests/judge/test_perbroker.py::test_x[1]", "no CA bundle", False, "the node, not the reason"),
        ("tests/judge/test_judge.py::test_slow_follower[1]", "REPLMON_JUDGE_PER_BROKER=1", False, "node"),
        (
            "tests/state/test_conformance.py::test_shared_scenario_passes[absent]",
            "no ../shared beside the repository (/x is absent)",
            True,
            "the exact node",
        ),
        (
            "tests/state/test_conformance.py::test_shared_scenario_passes[absent-2]",
            "no ../shared beside the repository (/x is absent)",
            False,
            "an exact node is no prefix",
        ),
    ],
)
def test_which_skips_are_expected(nodeid, reason, expected, why):
    assert is_expected(nodeid, reason, EXPECTED_SKIPS) is expected, why


def test_an_unlisted_skip_fails_a_passing_run(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_other="""
        import pytest

        def test_ok():
            pass

        def test_no_fault():
            pytest.skip("the fault did not happen")
        """
    )
    result = pytester.runpytest_inprocess("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*1 unexpected skips*", "test_other.py::test_no_fault: the fault did not happen"]
    )


def test_a_listed_skip_and_an_xfail_pass(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_listed="""
        import pytest

        def test_opt_in():
            pytest.skip("set OPT_IN=1 to run it")

        def test_known():
            pytest.xfail("a known fallback")
        """
    )
    result = pytester.runpytest_inprocess("-rs")
    result.assert_outcomes(skipped=1, xfailed=1)
    assert result.ret == pytest.ExitCode.OK


def test_a_module_skipped_at_collection_counts(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_module="""
        import pytest

        pytest.importorskip("no_such_module_here")

        def test_never():
            pass
        """,
        test_fine="def test_ok():\n    pass\n",
    )
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 unexpected skips*", "test_module.py: *no_such_module_here*"])


def test_nothing_collected_stays_exit_5(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_empty="")
    assert pytester.runpytest_inprocess().ret == pytest.ExitCode.NO_TESTS_COLLECTED
