"""The Alertmanager v2 payload (sinks/alertmanager.py `to_postable`), checked against the
postableAlert contract: string labels, no empty ones, RFC 3339 times, endsAt only to resolve."""

from replmon.sinks.alertmanager import to_postable

FIRING = {
    "alert_id": "a3",
    "name": "UnderMinIsr",
    "status": "firing",
    "severity": "critical",
    "cluster": "c1",
    "topic": "orders",
    "partition": 0,
    "replica": None,
    "broker": None,
    "subject": "c1/orders-0",
    "started_ms": 1_767_225_600_000,
    "ts": 1_767_225_600_000,
    "reason": "orders-0 ISR [1] is below min.insync.replicas 2",
    "cause": "min_isr",
    "caused_by": "a1",
    "notify": True,
}


def test_firing_alert_labels_and_annotations():
    body = to_postable(FIRING)
    assert body["labels"] == {
        "alertname": "UnderMinIsr",
        "cluster": "c1",
        "topic": "orders",
        "partition": "0",
        "severity": "critical",
        "caused_by": "a1",
        "root_cause_id": "a1",
        "alert_id": "a3",
    }
    assert body["annotations"] == {"summary": FIRING["reason"], "subject": "c1/orders-0", "cause": "min_isr"}
    assert body["startsAt"] == "2026-01-01T00:00:00.000+00:00"
    assert "endsAt" not in body, "firing: Alertmanager keeps it until resolve_timeout; we resend"


def test_resolved_alert_has_its_end_and_a_root_is_its_own_root():
    body = to_postable(dict(FIRING, status="resolved", ts=FIRING["ts"] + 1500, caused_by=None))
    assert body["endsAt"] == "2026-01-01T00:00:01.500+00:00"
    assert body["labels"]["root_cause_id"] == "a3" and "caused_by" not in body["labels"]
