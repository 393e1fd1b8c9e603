"""No byte sequence in a JSON-lines file can stop the query: each bad line is quarantined once,
with its reason, a bounded prefix, its size and digest, and the good lines around it count."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from tests.streaming.helpers import run_once

pytestmark = pytest.mark.spark

T0 = 1_767_225_600_000
MAX = 2048


def good(i: int) -> bytes:
    return json.dumps({"type": "heartbeat", "ts": T0 + i, "cluster": "c1"}).encode()


# (line bytes, expected reason); no line holds b"\n" (it would be two lines)
POISON = [
    (b'{"type":"heartbeat","ts":1767225600001,"cluster":"s\xffim"}', "not valid UTF-8"),
    (os.urandom(64).replace(b"\n", b"\x80").replace(b"\r", b"\x80") + b"\xff", "not valid UTF-8"),
    (b'\xff\xfe\x00\x01{"type":"heartbeat","ts":1,"cluster":"c1"}', "not valid UTF-8"),
    (b'{"type":"heartbeat","ts":1767225600002,"cluster":"a\x00b"}', "contains a NUL byte"),
    (
        b'{"type":"heartbeat","ts":1767225600003,"cluster":"' + b"x" * 5000 + b'"}',
        f"record too large: 5052 bytes, more than stream.max_record_bytes ({MAX})",
    ),
    (b'{"type":"heartbeat","ts":1767225600004,"cluster":"\xed\xa0\x80"}', "not valid UTF-8"),
]


def test_poison_lines_are_quarantined_with_prefix_size_and_digest(spark, tmp_path):
    lines = [good(0)]
    for i, (line, _) in enumerate(POISON):
        lines += [line, good(10 + i)]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part-0.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    out = run_once(spark, tmp_path / "in", tmp_path / "out", stream={"buckets": 2, "max_record_bytes": MAX})
    got = sorted((q["sha256"], q["size"], q["reason"]) for q in out["quarantine"])
    want = sorted((hashlib.sha256(line).hexdigest(), len(line), reason) for line, reason in POISON)
    assert got == want
    for q in out["quarantine"]:
        assert len(q["raw"].encode()) <= 1024 * 3  # a 1 KiB prefix, U+FFFD for bad bytes
        assert q["raw_truncated"] == (q["size"] > 1024)
    assert not [q for q in out["quarantine"] if q["reason"].startswith("late")]
