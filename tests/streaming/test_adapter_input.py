"""The stateful adapter's input side (streaming/stateful.events_from_frames): columns as Arrow
hands them to pandas become EVENT_FIELDS tuples in event-time order, nulls as None, whatever
mix of null and non-null a column holds; rows the parser found to break the contract go to
quarantine with their raw text and reason. No Spark."""

from __future__ import annotations

import numpy as np
import pandas as pd

from replmon.state.events import EVENT_FIELDS, FIELDS
from replmon.streaming.contract import pack_extra
from replmon.streaming.stateful import INPUT_COLUMNS, events_from_frames

NAN = np.nan
T = 1_767_225_600_000


def _frame(rows: list[dict]) -> pd.DataFrame:
    """Rows as Arrow delivers them: ints with a null become float64 with NaN, strings object
    with None; the rare fields packed in `extra`, as the JVM packs them (a Spark test,
    tests/streaming/test_contract_checks.py, checks that it packs as pack_extra does)."""
    data = {}
    for name in INPUT_COLUMNS:
        values = [pack_extra(r) if name == "extra" else r.get(name) for r in rows]
        if (name in FIELDS and FIELDS[name].kind == "int") or name == "seq":
            if all(isinstance(v, int) for v in values):
                data[name] = np.array(values, dtype=np.int64)
            else:
                data[name] = np.array([NAN if v is None else v for v in values], dtype=float)
        else:
            data[name] = pd.Series(values, dtype=object)
    return pd.DataFrame(data)


def _expected(row: dict) -> tuple:
    return tuple(row.get(f) for f in EVENT_FIELDS)


ROWS = [
    # (row as parsed, why it is here)
    (
        {
            "type": "fetch",
            "ts": T + 2,
            "cluster": "c",
            "topic": "t",
            "partition": 0,
            "replica": 2,
            "fetch_offset": 10,
            "leader_leo": 10,
            "raw": "f",
            "seq": 3,
        },
        "a fetch: its replica and offsets are ints although the column also holds nulls",
    ),
    (
        {
            "type": "append",
            "ts": T + 1,
            "cluster": "c",
            "topic": "t",
            "partition": 0,
            "leader_leo": 10,
            "raw": "a",
            "seq": 1,
        },
        "an append, earlier in event time than the fetch read before it: comes first",
    ),
    (
        {
            "type": "metadata",
            "ts": T + 1,
            "cluster": "c",
            "topic": "t",
            "partition": 0,
            "leader": 1,
            "leader_epoch": 3,
            "replicas": [1, 2, 3],
            "isr": [1, 2],
            "adding_replicas": [],
            "replica_lag_time_max_ms": 10000,
            "raw": "m",
            "seq": 2,
        },
        "metadata at the append's time: first on the tie (rank), its packed arrays as tuples",
    ),
    (
        {"type": "heartbeat", "ts": T + 2, "cluster": "c", "raw": "h", "seq": 0},
        "a heartbeat at the fetch's time: after it on the tie although read first",
    ),
]


def test_columns_become_event_tuples_in_event_time_order_with_nulls_as_none():
    quarantine: list = []
    got = events_from_frames([_frame([r for r, _ in ROWS])], quarantine)
    fetch, append, metadata, heartbeat = (dict(r) for r, _ in ROWS)
    metadata.update(replicas=(1, 2, 3), isr=(1, 2), adding_replicas=())
    assert got == [_expected(metadata), _expected(append), _expected(fetch), _expected(heartbeat)]
    ints = [EVENT_FIELDS.index(f) for f in ("ts", "partition", "replica", "fetch_offset", "leader_leo")]
    assert [type(got[2][i]) for i in ints] == [int] * len(ints)  # ints, not the floats of NaN columns
    assert quarantine == []


def test_a_row_that_breaks_the_contract_is_quarantined_with_its_raw_text_and_the_rest_go_on():
    bad = {
        "type": "fetch",
        "ts": T + 3,
        "cluster": "c",
        "topic": "t",
        "partition": 0,
        "replica": 2,
        "leader_leo": 10,
        "raw": '{"no": "fetch_offset"}',
        "seq": 4,
        "reason": "missing field for fetch: fetch_offset",
    }
    malformed = {"raw": '{"type": "fetch", "ts": "soon"}', "reason": "malformed", "seq": 5}
    quarantine: list = []
    got = events_from_frames([_frame([ROWS[1][0], bad, malformed])], quarantine)
    assert got == [_expected(ROWS[1][0])]
    assert [(q["raw"], q["reason"], q["stage"], q["ts"]) for q in quarantine] == [
        (bad["raw"], "missing field for fetch: fetch_offset", "parse", T + 3),
        # the parser's mark is turned into what exactly is wrong
        (malformed["raw"], "mistyped field: ts is not an integer", "parse", None),
    ]


def test_ignored_fields_are_taken_as_absent():
    metadata = ROWS[2][0]
    got = events_from_frames([_frame([metadata])], [], ignore=("replica_lag_time_max_ms", "leader"))
    expected = dict(
        metadata,
        replicas=(1, 2, 3),
        isr=(1, 2),
        adding_replicas=(),
        replica_lag_time_max_ms=None,
        leader=None,
    )
    assert got == [_expected(expected)]


def test_a_record_with_bad_bytes_keeps_the_size_and_digest_the_parser_packed():
    bad = {"raw": "abc\ufffd", "reason": "not valid UTF-8", "seq": 0, "size": 5000, "sha256": "ab" * 32}
    quarantine: list = []
    assert events_from_frames([_frame([ROWS[0][0], bad])], quarantine) == [_expected(ROWS[0][0])]
    [q] = quarantine
    assert (q["reason"], q["size"], q["sha256"], q["raw_truncated"]) == (
        "not valid UTF-8",
        5000,
        "ab" * 32,
        True,
    )
