"""The shipped request-log fragment's filter (deploy/kafka/log4j2-request-log.properties) keeps
every line replmon collect reads: the events of the kept lines of each real broker's request
log (tests/collect/data/, every Kafka version replmon reads) equal the events of all its lines.

log4j2's RegexFilter matches the whole formatted message (`Matcher.matches()`), here
`Completed request:{json}`: the same regex under Python's `re.fullmatch` (the pattern uses only
syntax both engines read alike). That the broker's log4j2 takes the fragment is checked on
real brokers by bench/broker_cost.py's `filter` configuration (docs/real-cluster.md).
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from datetime import UTC
from pathlib import Path

import pytest

from replmon.streaming.collect.broker_log import BrokerLog
from replmon.streaming.collect.requestlog import MARKER
from tests.collect.lines import fetch_line, heartbeat_line, produce_line

ROOT = Path(__file__).resolve().parents[2]
FRAGMENT = ROOT / "deploy" / "kafka" / "log4j2-request-log.properties"
DATA = Path(__file__).resolve().parent / "data"
FIXTURES = sorted(p.name for p in DATA.iterdir() if (p / "facts.json").exists())


def java_properties(text: str) -> dict[str, str]:
    """key -> value as java.util.Properties.load reads them (log4j2's properties format): no
    continuation lines in the fragment, so only comments, `=` and the backslash escapes."""
    out = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        assert not line.endswith("\\"), f"a continuation line: {raw}"
        key, _, value = line.partition("=")
        out[key.strip()] = re.sub(r"\\(.)", r"\1", value.strip())
    return out


PROPS = java_properties(FRAGMENT.read_text())
FILTER = "logger.request.filter.replmon."
PATTERN = re.compile(PROPS[FILTER + "regex"])


def kept(line: str) -> bool:
    """Whether log4j2 would write the line: its message is what follows the layout's date."""
    at = line.find(MARKER)
    return at >= 0 and PATTERN.fullmatch(line[at:].rstrip("\n")) is not None


def compact(line: str) -> str:
    """tests.collect.lines' line as Kafka writes it: Jackson's compact JSON (no spaces)."""
    at = line.index(MARKER) + len(MARKER)
    return line[:at] + json.dumps(json.loads(line[at:]), separators=(",", ":"), ensure_ascii=False)


def test_the_fragment_filters_on_the_request_logger():
    assert PROPS[FILTER + "type"] == "RegexFilter"
    assert (PROPS[FILTER + "onMatch"], PROPS[FILTER + "onMismatch"]) == ("ACCEPT", "DENY")
    assert PROPS["logger.request.name"] == "kafka.request.logger"
    assert PROPS["logger.request.level"] == "debug"
    # Java's regex reads `\{` as a brace; a lone `{` after `:` would be an illegal repetition,
    # so the backslash must survive the properties escapes (written `\\{` in the file).
    assert PROPS[FILTER + "regex"].startswith("(?s)Completed request:\\{")


FOLLOWER_FETCH = compact(fetch_line(1000, 2, requested=[(0, 5)], responded=[(0, 0, 5)]))
PRODUCE = compact(produce_line(1000, 0, 5))


@pytest.mark.parametrize(
    "line, keep, why",
    [
        (FOLLOWER_FETCH, True, "a follower's fetch"),
        (PRODUCE, True, "an append"),
        (compact(heartbeat_line(1000, 2)), True, "a broker's heartbeat to the controller"),
        (compact(fetch_line(1000, 2, client="consumer-1")), False, "a consumer's fetch"),
        (compact(fetch_line(1000, 2, client="raft-client-2")), False, "the KRaft quorum's fetch"),
        (compact(fetch_line(1000, 2, client="broker-2-fetcher-0x")), False, "not a replica fetcher"),
        (FOLLOWER_FETCH.replace('"requestApiKey":1,', '"requestApiKey":10,'), False, "API key 10"),
        (PRODUCE.replace('"requestApiKey":0,', '"requestApiKey":6,'), False, "API key 6"),
        (PRODUCE.replace('"isForwarded":false', '"isForwarded":true'), True, "forwarded"),
        ("[1000] Completed request:{}", False, "no header"),
        ("[1000] something else", False, "not a request line"),
    ],
)
def test_lines(line, keep, why):
    assert line != "" and kept(line) is keep, why


def test_a_line_with_a_line_separator_in_a_string_is_kept():
    # Java's `.` stops at \u2028 and \u0085 without (?s); Jackson writes them unescaped.
    line = PRODUCE.replace('"acks":-1', '"acks":-1,"x":"a\u2028b\u0085c"')
    assert "\u2028" in line and kept(line)


def _lines(label: str, b: int) -> list[str]:
    return gzip.decompress((DATA / label / f"broker-{b}.log.gz").read_bytes()).decode().splitlines()


API_NAME = re.compile(r'"requestApiKeyName":"(\w+)"')


@pytest.mark.parametrize("label", FIXTURES)
def test_the_kept_lines_give_every_event_of_all_lines(label):
    facts = json.loads((DATA / label / "facts.json").read_text())
    topics = [facts] + ([facts["java_topic"]] if facts.get("java_topic") else [])
    names = {t["topic_id"]: t["topic"] for t in topics if t.get("topic_id")}
    dropped: Counter = Counter()
    events = 0
    for b in facts["brokers"]:
        lines = _lines(label, b)
        # One reader per broker, as the collector has: fetch sessions span lines.
        all_reader, kept_reader = BrokerLog("f", b, names.get, tz=UTC), BrokerLog("f", b, names.get, tz=UTC)
        every = [e for line in lines for e in all_reader.events(line)]
        some = [e for line in lines if kept(line) for e in kept_reader.events(line)]
        assert some == every, (label, b)
        events += sum(1 for e in every if e["type"] in ("fetch", "append"))
        dropped.update(m.group(1) for line in lines if not kept(line) and (m := API_NAME.search(line)))
    assert events > 0
    # The filter drops something (the KRaft quorum's or ZooKeeper-era controller's requests, the
    # producers' metadata requests): a regex that kept every line would not be worth its cost.
    assert dropped["METADATA"] > 0 and dropped["API_VERSIONS"] > 0, dropped


def test_the_fixtures_hold_all_three_kinds_the_filter_keeps():
    apis: Counter = Counter()
    for label in FIXTURES:
        for b in json.loads((DATA / label / "facts.json").read_text())["brokers"]:
            apis.update(
                m.group(1) for line in _lines(label, b) if kept(line) and (m := API_NAME.search(line))
            )
    assert {"FETCH", "PRODUCE", "BROKER_HEARTBEAT"} <= set(apis), apis
