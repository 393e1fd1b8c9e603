"""The stateful adapter's input side (streaming/stateful.events_from_frames): columns as Arrow
hands them to pandas become EVENT_FIELDS tuples in event-time order, nulls as None, whatever
mix of null and non-null a column holds; rows the parser found to break the contract go to
quarantine with their raw text and reason. No Spark."""
from __future__ import annotations

import numpy as np
import pandas as pd

from replmon.state.bucket import EVENT_FIELDS
from replmon.streaming.contract import FIELDS
from replmon.streaming.stateful import INPUT_COLUMNS, events_from_frames

NAN = np.nan
T = 1_767_225_600_000


def _frame(rows: list[dict]) -> pd.DataFrame:
    """Rows as Arrow delivers them: ints with a null become float64 with NaN, strings object
    with None, arrays as "1,2,3"."""
    data = {}
    for name in INPUT_COLUMNS:
        values = [r.get(name) for r in rows]
        if FIELDS.get(name) == "int" or name in ("seq", "size"):
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
    ({"type": "fetch", "ts": T + 2, "cluster": "c", "topic": "t", "partition": 0, "replica": 2,
      "fetch_offset": 10, "leader_leo": 10, "raw": "f", "seq": 3},
     "a fetch: its replica and offsets are ints although the column also holds nulls"),
    ({"type": "append", "ts": T + 1, "cluster": "c", "topic": "t", "partition": 0,
      "leader_leo": 10, "raw": "a", "seq": 1},
     "an append, earlier in event time than the fetch read before it: comes first"),
    ({"type": "metadata", "ts": T + 1, "cluster": "c", "topic": "t", "partition": 0,
      "leader": 1, "leader_epoch": 3, "replicas": "1,2,3", "isr": "1,2", "adding_replicas": "",
      "raw": "m", "seq": 2},
     "metadata at the append's time: first on the tie (rank), its arrays as tuples, '' as ()"),
    ({"type": "heartbeat", "ts": T + 2, "cluster": "c", "raw": "h", "seq": 0},
     "a heartbeat at the fetch's time: after it on the tie although read first"),
]


def test_columns_become_event_tuples_in_event_time_order_with_nulls_as_none():
    quarantine: list = []
    got = events_from_frames([_frame([r for r, _ in ROWS])], quarantine)
    fetch, append, metadata, heartbeat = (dict(r) for r, _ in ROWS)
    metadata.update(replicas=(1, 2, 3), isr=(1, 2), adding_replicas=())
    assert got == [_expected(metadata), _expected(append), _expected(fetch), _expected(heartbeat)]
    ints = [EVENT_FIELDS.index(f) for f in ("ts", "partition", "replica", "fetch_offset", "leader_leo")]
    assert [type(got[2][i]) for i in ints] == [int] * len(ints)   # ints, not the floats of NaN columns
    assert quarantine == []


def test_a_row_that_breaks_the_contract_is_quarantined_with_its_raw_text_and_the_rest_go_on():
    bad = {"type": "fetch", "ts": T + 3, "cluster": "c", "topic": "t", "partition": 0,
           "replica": 2, "leader_leo": 10, "raw": "{\"no\": \"fetch_offset\"}", "seq": 4,
           "reason": "missing field for fetch: fetch_offset"}
    malformed = {"raw": '{"type": "fetch", "ts": "soon"}', "reason": "malformed", "seq": 5}
    quarantine: list = []
    got = events_from_frames([_frame([ROWS[1][0], bad, malformed])], quarantine)
    assert got == [_expected(ROWS[1][0])]
    assert [(q["raw"], q["reason"], q["stage"], q["ts"]) for q in quarantine] == [
        (bad["raw"], "missing field for fetch: fetch_offset", "parse", T + 3),
        # the parser's mark is turned into what exactly is wrong
        (malformed["raw"], "mistyped field: ts is not an integer", "parse", None)]
