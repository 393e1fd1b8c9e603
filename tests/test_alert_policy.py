"""The severity policy is stated once in code (state/alerts.py) and documented in docs/alerts.md:
the two must say the same, and every alert has a severity and texts."""

import re
from pathlib import Path

from replmon.state import texts
from replmon.state.alerts import ALWAYS_NOTIFIED, SEVERITY, is_notified

DOC = Path(__file__).resolve().parents[1] / "docs" / "alerts.md"


def documented_policy() -> dict[str, str]:
    policy = {}
    for line in DOC.read_text().splitlines():
        m = re.match(r"\| `(critical|warning|info)` \|[^|]*\| (.*) \|$", line)
        if m:
            for name in re.findall(r"`([A-Za-z]+)`", m.group(2)):
                policy[name] = m.group(1)
    return policy


def test_docs_and_code_state_the_same_severities():
    assert documented_policy() == SEVERITY


def test_every_alert_has_an_open_text():
    named = {name for name, _ in texts.OPEN}
    assert set(SEVERITY) <= named, set(SEVERITY) - named


def test_who_is_notified():
    for name, severity in SEVERITY.items():
        assert is_notified(name, None) is (severity != "info"), f"{name}: a root cause notifies unless info"
        assert is_notified(name, "root") is (name in ALWAYS_NOTIFIED), f"{name} with a root cause"
