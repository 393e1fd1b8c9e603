"""Silences at the bridge (streaming/bridge.py): a matched alert goes out as a new, marked
record, encoded anew; every other alert keeps its record and its payload."""

from __future__ import annotations

import json

from replmon.sinks.silences import Silence
from replmon.streaming.bridge import silence, split_batch


class Store:
    def __init__(self, silences):
        self.silences = silences

    def active(self, now_ms):
        return [s for s in self.silences if s.is_active(now_ms)]


def alert(alert_id, broker, notify):
    return {
        "alert_id": alert_id,
        "name": "BrokerUnavailable",
        "cluster": "c1",
        "topic": None,
        "partition": None,
        "replica": None,
        "broker": broker,
        "severity": "critical",
        "caused_by": None,
        "notify": notify,
        "silenced_by": [],
        "ts": 5,
    }


def test_a_silenced_alert_is_a_new_record_and_the_others_pass_as_they_were():
    down3, down4 = alert("a1", 3, True), alert("a2", 4, True)
    records = split_batch(
        [
            ("alerts", json.dumps(down3, separators=(",", ":"))),
            ("alerts", json.dumps(down4, separators=(",", ":"))),
        ]
    )
    before = list(records["alerts"])
    held = silence(records, Store([Silence("s1", {"broker": "3"}, 0, 1000)]), now_ms=500)
    assert held == 1, "broker 3's page is held back"
    (p3, r3), (p4, r4) = records["alerts"]
    assert json.loads(p3) == r3 == {**down3, "silenced_by": ["s1"], "notify": False}
    assert before[0][1] == down3 and r3 is not before[0][1], "the record decoded is left as it was"
    assert (p4, r4) == before[1] and r4 is before[1][1], "not matched: the same record and payload"


def test_no_active_silence_leaves_the_batch_alone():
    records = split_batch([("alerts", json.dumps(alert("a1", 3, True)))])
    before = list(records["alerts"])
    assert silence(records, Store([Silence("s1", {"broker": "3"}, 0, 1000)]), now_ms=1000) == 0
    assert records["alerts"] == before
