"""The replay's window, what-if parsing and comparison: pure functions, no Spark."""

from __future__ import annotations

import pytest

from replmon.streaming.progress import progress_line
from replmon.streaming.replay_compare import compare, episodes, summarize, window_view
from replmon.streaming.replay_window import (
    Window,
    WindowError,
    default_warmup_ms,
    parse_duration_ms,
    parse_time_ms,
    resolve_window,
)
from replmon.streaming.settings import Settings, SettingsError
from replmon.streaming.whatif import build_variants

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@pytest.mark.parametrize(
    "text, ms, why",
    [
        ("1767225600000", T0, "ms since the epoch"),
        ("2026-01-01T00:00:00Z", T0, "ISO-8601 with Z"),
        ("2026-01-01T00:00:30", T0 + 30_000, "no offset: UTC, like every time replmon prints"),
        ("2026-01-01T01:00:00+01:00", T0, "an offset is honoured"),
        ("2026-01-01T00:00:00.250Z", T0 + 250, "milliseconds"),
    ],
)
def test_parse_time(text, ms, why):
    assert parse_time_ms(text, "--from") == ms, why


@pytest.mark.parametrize(
    "text, ms",
    [("30m", 1_800_000), ("90s", 90_000), ("1.5h", 5_400_000), ("250ms", 250), ("2d", 172_800_000)],
)
def test_parse_duration(text, ms):
    assert parse_duration_ms(text, "--last") == ms


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: parse_time_ms("yesterday", "--from"), "--from: 'yesterday'"),
        (lambda: parse_duration_ms("30 minutes", "--last"), "--last: '30 minutes'"),
        (lambda: Window(T0, T0, 0, 0, 0), "must be after --from"),
        (
            lambda: resolve_window(
                from_="1767225600000",
                to=None,
                last="5m",
                newest_ms=lambda: T0,
                warmup=None,
                metadata_lookback="1h",
                lag_limits_ms=[30000],
                lateness_ms=0,
            ),
            "not both",
        ),
        (
            lambda: resolve_window(
                from_=None,
                to=None,
                last=None,
                newest_ms=lambda: T0,
                warmup=None,
                metadata_lookback="1h",
                lag_limits_ms=[30000],
                lateness_ms=0,
            ),
            "--last DURATION",
        ),
    ],
)
def test_bad_window_options_name_the_option(call, message):
    with pytest.raises(WindowError, match=message.replace("(", r"\(")):
        call()


def test_last_ends_at_the_newest_event_and_the_default_warmup_covers_the_largest_limit():
    w = resolve_window(
        from_=None,
        to=None,
        last="2m",
        newest_ms=lambda: T0 + 600_000,
        warmup=None,
        metadata_lookback="1h",
        lag_limits_ms=[30000, 10000],
        lateness_ms=10_000,
    )
    assert (w.start_ms, w.end_ms) == (T0 + 480_000, T0 + 600_000)
    assert w.warmup_ms == default_warmup_ms([30000, 10000], 10_000) == 70_000
    assert w.read_from_ms == T0 + 410_000  # warm-up before T1
    assert w.read_to_ms == T0 + 610_000  # lateness after T2: partition time reaches T2
    assert w.carry_from_ms == T0 + 410_000 - 3_600_000


def _alert(aid, status, ts, started, name="ReplicaOutOfSync", subject="c/t-0/2"):
    return {
        "alert_id": aid,
        "name": name,
        "status": status,
        "ts": ts,
        "started_ms": started,
        "subject": subject,
        "severity": "warning",
    }


WINDOW = Window(T0 + 100_000, T0 + 200_000, 60_000, 0, 0)
TRANSITIONS = [
    _alert("a", "firing", T0 + 50_000, T0 + 50_000),  # fired and resolved in the warm-up
    _alert("a", "resolved", T0 + 60_000, T0 + 50_000),
    _alert("b", "firing", T0 + 90_000, T0 + 90_000),  # firing at T1, resolves inside
    _alert("b", "resolved", T0 + 150_000, T0 + 90_000),
    _alert("c", "firing", T0 + 120_000, T0 + 120_000, name="UnderReplicated", subject="c/t-0"),
    _alert("d", "firing", T0 + 100_000, T0 + 100_000, name="HighWatermarkStalled", subject="c/t-1"),
    _alert("d", "resolved", T0 + 130_000, T0 + 100_000, name="HighWatermarkStalled", subject="c/t-1"),
    _alert("e", "firing", T0 + 200_001, T0 + 200_001),  # after T2: not reported
]


def test_window_view_reports_an_earlier_episode_as_already_firing_not_as_new():
    view = window_view(TRANSITIONS, WINDOW)
    assert [r["alert_id"] for r in view.firing_at_start] == ["b"]
    assert [(r["alert_id"], r["status"]) for r in view.transitions] == [
        ("d", "firing"),
        ("c", "firing"),
        ("d", "resolved"),
        ("b", "resolved"),
    ]
    assert all(WINDOW.start_ms <= r["ts"] <= WINDOW.end_ms for r in view.transitions)


def test_episodes_are_clipped_to_the_window():
    eps = {e["alert_id"]: e for e in episodes(window_view(TRANSITIONS, WINDOW), WINDOW)}
    assert (eps["b"]["from_ms"], eps["b"]["to_ms"], eps["b"]["resolved"]) == (
        WINDOW.start_ms,
        T0 + 150_000,
        True,
    )
    assert (eps["c"]["from_ms"], eps["c"]["to_ms"], eps["c"]["resolved"]) == (
        T0 + 120_000,
        WINDOW.end_ms,
        False,
    )
    assert set(eps) == {"b", "c", "d"}


def test_summary_and_comparison():
    exits = [
        {"cluster": "c", "topic": "t", "partition": 0, "replica": r, "ts": ts}
        for r, ts in ((2, T0 + 95_000), (2, T0 + 120_000), (3, T0 + 120_000))
    ]
    actual = summarize("actual", TRANSITIONS, exits, WINDOW)
    # one shrink at 120 s removed two replicas; the one at 95 s is before T1
    assert (actual.isr_shrinks, actual.replicas_removed) == (1, 2)
    assert actual.under_replicated_min == pytest.approx(80 / 60)  # 120 s .. T2
    assert actual.hw_stalled_s == pytest.approx(30)
    other = summarize(
        "v",
        [_alert("x", "firing", T0 + 110_000, T0 + 110_000, name="UnderReplicated", subject="c/t-0")],
        [],
        WINDOW,
    )
    c = compare(actual, other)
    assert c.only_in_variant == []
    assert c.only_in_actual == [("HighWatermarkStalled", "c/t-1"), ("ReplicaOutOfSync", "c/t-0/2")]
    assert c.detection_delta_ms == {("UnderReplicated", "c/t-0"): -10_000}  # 10 s earlier


def test_what_if_variants_are_validated_and_replace_per_partition_overrides():
    variants = build_variants(
        Settings(), ["rules.replica_lag_time_max_ms=10000", "rules.rule_set=v0_8,alerts.hw_stall_ms=5000"]
    )
    assert next(v.name for v in variants) == "actual"
    assert variants[1].config.replica_lag_time_max_ms == 10000
    assert variants[1].ignore_event_fields == ("replica_lag_time_max_ms",)
    assert (variants[2].config.rule_set, variants[2].config.hw_stall_ms) == ("v0_8", 5000)
    assert variants[2].ignore_event_fields == ()


@pytest.mark.parametrize(
    "what_if, message",
    [
        ("rules.replica_lag_time_max_ms=0", "rules.replica_lag_time_max_ms"),
        ("rules.rule_set=v9", "rules.rule_set"),
        ("rules.no_such=1", "rules.no_such"),
        ("kafka.subscribe=x", "only rules, alerts, stream"),
        ("replica_lag_time_max_ms=1", "expected section.setting=value"),
    ],
)
def test_bad_what_if_names_the_setting(what_if, message):
    with pytest.raises(SettingsError, match=message):
        build_variants(Settings(), [what_if])


def test_progress_line():
    assert progress_line(12_000, 48_000, 4.0) == "12,000 / 48,000 events (25%), 3,000 events/s, ETA 0:00:12"
    assert progress_line(0, 10, 0.0).endswith("ETA ?")
