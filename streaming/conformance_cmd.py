"""`replmon conformance PATH...`: run conformance scenario files against state/.

The files are JSON lines, one scenario each, in the format of docs/kafka-rules.md §10.

Exit codes: 0 all scenarios pass, 1 some check failed, 2 a file is unreadable or malformed.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from replmon.state.conformance import format_failure, run_scenario, validate_scenario


class _Malformed(Exception):
    pass


def _load(path: str) -> list[tuple[str, dict]]:
    """The scenarios of one JSONL file, each with its "file:line" location; blank lines are skipped."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except (OSError, UnicodeDecodeError) as e:
        raise _Malformed(f"{path}: cannot read: {e}") from e
    scenarios = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            scenario = json.loads(line)
        except json.JSONDecodeError as e:
            raise _Malformed(f"{where}: not valid JSON: {e}") from e
        try:
            validate_scenario(scenario)
        except ValueError as e:
            raise _Malformed(f"{where}: malformed scenario: {e}") from e
        scenarios.append((where, scenario))
    return scenarios


def run(paths: list[str], out: TextIO = sys.stdout) -> int:
    """Print one line per failing check and a final "N passed, N failed" (scenarios); return the exit code."""
    scenarios: list[tuple[str, dict]] = []
    try:
        for path in paths:
            scenarios.extend(_load(path))
    except _Malformed as e:
        print(e, file=out)
        return 2
    passed = failed = 0
    for _, scenario in scenarios:
        failures = run_scenario(scenario)
        for failure in failures:
            print(format_failure(failure), file=out)
        if failures:
            failed += 1
        else:
            passed += 1
    print(f"{passed} passed, {failed} failed", file=out)
    return 1 if failed else 0
