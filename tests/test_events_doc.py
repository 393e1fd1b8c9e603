"""docs/events.md says what state/events.py declares: the same event types, in each type's
table the same fields with the same type, bounds and required flag, the same order on ties; and
the derived pieces (builders, record key, Spark schema) follow the declaration."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replmon.state.events import (
    COMMON,
    EVENT_FIELDS,
    FIELDS,
    TIE_RANK,
    TYPES,
    Field,
    as_tuple,
    event,
    record_key,
)
from replmon.streaming.contract import COLUMN_FIELDS, PACKED_FIELDS, SPARK_SCHEMA

DOC = (Path(__file__).resolve().parents[1] / "docs" / "events.md").read_text()
_DOC_TYPE = re.compile(r"^(string|integer|array of integers)(?: ≥ (\d+))?$")
_KIND = {"string": "str", "integer": "int", "array of integers": "ints"}


def _section(name: str) -> str:
    """The text of the section `## \\`name\\`: ...`, up to the next `## ` heading."""
    match = re.search(rf"^## `{name}`:.*?(?=^## |\Z)", DOC, re.S | re.M)
    assert match, f"docs/events.md has no section for {name}"
    return match.group(0)


def _table(text: str) -> list[list[str]]:
    """The rows (cells) of the first `| field | type | ...` table in `text`."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("| field | type |")), None)
    if start is None:
        return []
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _documented_field(cells: list[str]) -> tuple[str, Field]:
    """(name, kind and bound) of one table row."""
    names = re.findall(r"`([^`]+)`", cells[0])
    assert len(names) == 1, f"one field per row: {cells[0]}"
    found = _DOC_TYPE.match(cells[1])
    assert found, f"{names[0]}: type {cells[1]!r} is none of string, integer [≥ n], array of integers"
    minimum = int(found.group(2)) if found.group(2) else None
    return names[0], Field(_KIND[found.group(1)], minimum=minimum)  # type: ignore[arg-type]  # a Kind by _KIND


def _same_kind(documented: Field, declared: Field) -> bool:
    return (documented.kind, documented.minimum) == (declared.kind, declared.minimum)


def test_the_common_fields_are_documented_as_declared():
    rows = _table(DOC.split("\n## ", 1)[0])
    documented = dict(_documented_field(cells) for cells in rows)
    assert list(documented) == list(COMMON)
    for name, field in documented.items():
        assert _same_kind(field, FIELDS[name]), name
    types_cell = rows[0][2]
    assert set(re.findall(r"`(\w+)`", types_cell)) == set(TYPES)


@pytest.mark.parametrize("name", list(TYPES))
def test_each_event_type_is_documented_as_declared(name):
    spec = TYPES[name]
    rows = _table(_section(name))
    documented = {}
    for cells in rows:
        field_name, field = _documented_field(cells)
        assert cells[2] in ("yes", "no"), f"{name}.{field_name}: required is yes or no"
        documented[field_name] = (field, cells[2] == "yes")
    declared = {n: (FIELDS[n], True) for n in spec.required} | {n: (FIELDS[n], False) for n in spec.optional}
    assert set(documented) == set(declared), f"{name}: the fields differ"
    for field_name, (field, required) in documented.items():
        want, want_required = declared[field_name]
        assert _same_kind(field, want), f"{name}.{field_name}: documented {field}, declared {want}"
        assert required == want_required, f"{name}.{field_name}: required"


@pytest.mark.parametrize("name", [n for n, f in FIELDS.items() if f.choices])
def test_the_fixed_values_of_a_string_are_documented(name):
    """Its meaning opens with them: "`a`, `b` or `c`", then ": ..." if it says more."""
    [row] = [
        cells
        for t, spec in TYPES.items()
        if name in spec.required + spec.optional
        for cells in _table(_section(t))
        if cells[0] == f"`{name}`"
    ][:1]
    assert re.findall(r"`(\w+)`", row[3].split(":")[0]) == list(FIELDS[name].choices)


def test_every_declared_field_belongs_to_an_event_type():
    used = set(COMMON) | {n for t in TYPES.values() for n in t.required + t.optional}
    assert used == set(FIELDS)


def test_the_order_on_ties_is_the_documented_one():
    sentence = re.search(r"Events of the same time are applied in this order of types: (.*?)\(", DOC, re.S)
    assert sentence, "docs/events.md states the order on ties"
    assert re.findall(r"`(\w+)`", sentence.group(1)) == sorted(TIE_RANK, key=TIE_RANK.__getitem__)


# --- what is derived from the declaration ---------------------------------------------------
def test_the_record_key_is_the_documented_one():
    assert "`cluster/topic/partition`" in DOC and "`cluster` alone for `broker` and `heartbeat`" in DOC
    fetch = event("fetch", 1, "c1", topic="t", partition=3, replica=2, fetch_offset=0, leader_leo=0)
    assert record_key(fetch) == "c1/t/3"
    assert record_key(event("broker", 1, "c1", broker=2, state="fenced")) == "c1"
    assert record_key(event("heartbeat", 1, "c1")) == "c1"


def test_the_builder_keeps_the_given_order_drops_absent_fields_and_refuses_what_is_not_in_the_contract():
    ev = event("append", 5, "c", topic="t", partition=0, leader_leo=7)
    assert list(ev.items()) == [
        ("type", "append"),
        ("ts", 5),
        ("cluster", "c"),
        ("topic", "t"),
        ("partition", 0),
        ("leader_leo", 7),
    ]
    assert event("broker", 5, "c", broker=1, state="running", broker_epoch=None) == {
        "type": "broker",
        "ts": 5,
        "cluster": "c",
        "broker": 1,
        "state": "running",
    }
    with pytest.raises(ValueError, match="not a field of a append event: replica"):
        event("append", 5, "c", topic="t", partition=0, leader_leo=7, replica=1)
    with pytest.raises(ValueError, match="missing field for metadata: isr"):
        event("metadata", 5, "c", topic="t", partition=0, leader=1, leader_epoch=0, replicas=[1])
    with pytest.raises(ValueError, match="unknown event type: produce"):
        event("produce", 5, "c")


def test_the_engine_tuple_has_the_fields_the_engine_reads_then_raw():
    assert EVENT_FIELDS[-1] == "raw"
    assert [n for n in FIELDS if n not in EVENT_FIELDS] == ["leader_hw"]  # not read: replmon computes the HW
    ev = event("metadata", 5, "c", topic="t", partition=0, leader=1, leader_epoch=0, replicas=[1, 2], isr=[1])
    row = as_tuple(ev)
    assert row[EVENT_FIELDS.index("replicas")] == (1, 2) and row[EVENT_FIELDS.index("hw")] is None


def test_every_field_the_engine_reads_travels_as_a_column_or_packed_once():
    travels = [*COLUMN_FIELDS, *PACKED_FIELDS]
    assert sorted(travels) == sorted({*EVENT_FIELDS, "size", "sha256"} - {"raw"})


def test_the_spark_schema_has_every_field_with_its_type():
    assert SPARK_SCHEMA.count("`") == 2 * len(FIELDS)
    assert "`replicas` array<bigint>" in SPARK_SCHEMA and "`leader_hw` bigint" in SPARK_SCHEMA
    assert "`state` string" in SPARK_SCHEMA
