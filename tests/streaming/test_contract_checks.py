"""The contract checks the query runs on the JVM (parse.contract_reason) give, row by row, the
reason of their Python reference (streaming/validate.invalid_reasons): on a case of every check
and on seeded random damage to valid events of every type."""

from __future__ import annotations

import json
import math
import random
import time

import pytest
from pyspark.sql import functions as F

from replmon.state.events import AT_LEAST_ONE, EVENT_FIELDS, FIELDS, NON_NEGATIVE, REQUIRED
from replmon.state.sessions import NO_LEADER, NOT_A_SESSION, OWN_LEADER
from replmon.streaming.contract import PACKED_FIELDS, pack_extra
from replmon.streaming.parse import contract_reason, monitor_input, parse_events
from replmon.streaming.stateful import INPUT_COLUMNS, events_from_frames
from replmon.streaming.validate import invalid_reasons

pytestmark = pytest.mark.spark

T = 1_767_225_600_000
MAX_FUTURE_MS = 3_600_000
VALID = {
    "fetch": {
        "type": "fetch",
        "ts": T,
        "cluster": "c",
        "topic": "t",
        "partition": 1,
        "replica": 2,
        "fetch_offset": 10,
        "leader_leo": 12,
        "leader_epoch": 3,
        "broker_epoch": 7,
        "log_start_offset": 0,
    },
    "append": {"type": "append", "ts": T, "cluster": "c", "topic": "t", "partition": 1, "leader_leo": 12},
    "metadata": {
        "type": "metadata",
        "ts": T,
        "cluster": "c",
        "topic": "t",
        "partition": 1,
        "leader": 1,
        "leader_epoch": 3,
        "replicas": [1, 2, 3],
        "isr": [1, 2],
        "hw": 10,
        "min_insync_replicas": 2,
        "replica_lag_time_max_ms": 30000,
    },
    "broker": {"type": "broker", "ts": T, "cluster": "c", "broker": 3, "state": "fenced", "broker_epoch": 9},
    "heartbeat": {"type": "heartbeat", "ts": T, "cluster": "c", "compaction_resolution_ms": 7500},
    "session": {"type": "session", "ts": T, "cluster": "c", "replica": 2, "leader": 1, "session_id": 77},
}


def _cases() -> list:
    """Records (bytes, None for no value): every check failing on its own, then random damage."""
    cases = [json.dumps(e).encode() for e in VALID.values()]

    def one(e: dict, **kw: object) -> bytes:
        return json.dumps({**e, **kw}).encode()

    for kind, event in VALID.items():
        for name in ("type", "ts", "cluster", *REQUIRED[kind]):
            cases.append(json.dumps({k: v for k, v in event.items() if k != name}).encode())
        cases.append(one(event, cluster=""))
        cases.append(one(event, ts=int(time.time() * 1000) + 100 * MAX_FUTURE_MS))
        for name in (*NON_NEGATIVE, *AT_LEAST_ONE):
            cases.append(one(event, **{name: -1 if name in NON_NEGATIVE else 0}))
    cases += [
        one(VALID["broker"], state="asleep"),
        one(VALID["session"], session_id=0),
        one(VALID["session"], leader=-1),
        one(VALID["session"], leader=2),
        one(VALID["heartbeat"], type="gossip"),
        one(VALID["fetch"], ts="soon"),
        one(VALID["metadata"], isr=[1, "2"]),
        b"[1, 2]",
        b'{"type": "fetch", ',
        None,
        b"",
        b'{"cluster": "a\x00b"}',
        b"\xff\xfe",
        one(VALID["broker"], state=None),
        one(VALID["fetch"], fetch_offset=2**63),
    ]
    rng = random.Random(13)
    ints = [n for n, f in FIELDS.items() if f.kind == "int"]
    for _ in range(600):
        event = dict(rng.choice(list(VALID.values())))
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(list(FIELDS))
            action = rng.random()
            if action < 0.35:
                event.pop(name, None)
            elif action < 0.7 and name in ints:
                event[name] = rng.choice([-1, 0, 1, -(2**40)])
            elif action < 0.8:
                event[name] = None
            elif action < 0.9:
                event["type"] = rng.choice([*REQUIRED, "x", ""])
            else:
                event[name] = rng.choice(["", "fenced", "running", [1], 2.5, True])
        cases.append(json.dumps(event).encode())
    return cases


def test_the_jvm_checks_give_the_python_references_reason_for_every_row(spark):
    cases = _cases()
    values = spark.createDataFrame([(c,) for c in cases], "value binary")
    parsed = parse_events(values, max_record_bytes=4096)
    pdf = parsed.select("*", contract_reason(MAX_FUTURE_MS).alias("jvm_reason")).toPandas()
    python = invalid_reasons(pdf, int(time.time() * 1000), MAX_FUTURE_MS)
    assert len(pdf) == len(cases)
    mismatches = [
        (raw, jvm, py)
        for raw, jvm, py in zip(pdf["raw"], pdf["jvm_reason"], python, strict=True)
        if jvm != py
    ]
    assert not mismatches, mismatches[:5]
    reasons = set(pdf["jvm_reason"].dropna())
    # the corpus reaches every kind of check, and valid events stay valid
    assert pdf["jvm_reason"].isna().sum() >= len(VALID)
    for expected in (
        "malformed",
        "missing field: type",
        "unknown type: gossip",
        "missing field: ts",
        "missing field: cluster",
        "missing field for fetch: fetch_offset",
        "negative partition",
        "min_insync_replicas must be at least 1",
        "unknown broker state: asleep",
        NOT_A_SESSION,
        NO_LEADER,
        OWN_LEADER,
        "empty record: no value",
        "contains a NUL byte",
        "not valid UTF-8",
    ):
        assert expected in reasons, expected
    assert any(r.startswith("event time ") and r.endswith("ahead of the wall clock") for r in reasons)


def test_the_jvm_packs_the_rare_fields_as_pack_extra_does_and_the_adapter_reads_them_back(spark):
    """parse.monitor_input sends contract.PACKED_FIELDS (and a bad record's size and digest) in
    one JSON column; every row of the corpus packs as the Python definition does, and the valid
    events of every type come out of the adapter with every field they had."""
    cases = _cases()
    values = spark.createDataFrame([(c, i) for i, c in enumerate(cases)], "value binary, seq long")
    rows = monitor_input(parse_events(values, seq=F.col("seq"), max_record_bytes=4096), 1, MAX_FUTURE_MS)
    pdf = rows.select(*INPUT_COLUMNS, *[F.col(n).alias(f"_{n}") for n in PACKED_FIELDS]).toPandas()
    assert len(pdf) == len(cases)

    def plain(v):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return None
        if hasattr(v, "tolist"):
            return v.tolist()
        return v.item() if hasattr(v, "item") else v

    mismatches = []
    for i, row in enumerate(pdf.to_dict("records")):
        expected = pack_extra({n: plain(row[f"_{n}"]) for n in PACKED_FIELDS})
        got = row["extra"]
        if (json.loads(got) if got else None) != (json.loads(expected) if expected else None):
            mismatches.append((cases[i], got, expected))
    assert not mismatches, mismatches[:5]
    assert pdf["extra"].isna().sum() >= 2  # a valid fetch and append pack nothing
    assert pdf["extra"].notna().sum() >= 3  # metadata, broker, a bad record's size

    events = events_from_frames([pdf[INPUT_COLUMNS].iloc[: len(VALID)]], [])
    got = {e[EVENT_FIELDS.index("type")]: e for e in events}
    for kind, event in VALID.items():
        expected = tuple(
            tuple(event[f]) if isinstance(event.get(f), list) else event.get(f) for f in EVENT_FIELDS
        )
        assert got[kind] == expected, kind
