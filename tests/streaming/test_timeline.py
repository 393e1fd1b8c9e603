"""The grouped alert timeline (streaming/timeline.py): records built by hand, expected values
taken from the rule (an alert belongs to the root its caused_by chain leads to; a root is shown
when it was notified or explains something, else only counted as quiet)."""

from __future__ import annotations

from collections import Counter

import pytest

from replmon.streaming.timeline import group, incident_lines, root_episodes, root_of, timeline_lines

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z: clock 00:00:00.000


def rec(aid, name, status, ts_s, *, by=None, notify=False, severity="warning", subject=None, **extra):
    return {
        "alert_id": aid,
        "name": name,
        "status": status,
        "severity": severity,
        "subject": subject or f"sim/{aid}",
        "started_ms": T0,
        "ts": T0 + int(ts_s * 1000),
        "caused_by": by,
        "root_cause": by is None,
        "notify": notify,
        "reason": f"{name} {status}",
        **extra,
    }


COUNTS_FIRST = {"under_replicated": 1, "under_min_isr": 0, "offline": 0, "leaders_lost": 0}
COUNTS_LAST = {"under_replicated": 4, "under_min_isr": 1, "offline": 0, "leaders_lost": 2}
# A broker that went silent, was fenced, then came back; 7 alerts explained by it, one of them
# (the HW stall) through an UnderReplicated, one (UnderMinIsr) that pages on its own.
CRASH = [
    rec("bu", "BrokerUnavailable", "firing", 10, notify=True, severity="critical", cause="broker_silent",
        counts=COUNTS_FIRST, subject="sim/broker-3"),
    rec("bu", "BrokerUnavailable", "updated", 20, severity="critical", cause="broker_fenced",
        counts=COUNTS_FIRST, subject="sim/broker-3"),
    *[rec(f"ur{i}", "UnderReplicated", "firing", 12, by="bu") for i in range(3)],
    *[rec(f"oos{i}", "ReplicaOutOfSync", "firing", 12, by="bu", cause="broker_silent") for i in range(2)],
    rec("hw", "HighWatermarkStalled", "firing", 13, by="ur0", severity="critical"),
    rec("umi", "UnderMinIsr", "firing", 14, by="bu", notify=True, severity="critical"),
    rec("ur0", "UnderReplicated", "resolved", 65, by="bu"),
    rec("bu", "BrokerUnavailable", "resolved", 70, severity="critical", cause="broker_fenced",
        counts=COUNTS_LAST, notify=True, subject="sim/broker-3"),
]  # fmt: skip
# A follower broker lagging for its own reason on two partitions: its first ReplicaOutOfSync
# stands for the second (the cluster step's lag group), and an UnderReplicated names the first.
LAG = [
    rec("lag1", "ReplicaOutOfSync", "firing", 30, notify=True, cause="lag"),
    rec("lag2", "ReplicaOutOfSync", "firing", 31, by="lag1", cause="lag"),
    rec("urlag", "UnderReplicated", "firing", 31, by="lag2"),
]
CRASH_NAMES = {"UnderReplicated": 3, "ReplicaOutOfSync": 2, "HighWatermarkStalled": 1, "UnderMinIsr": 1}
IMMINENT = rec("imm", "IsrExitImminent", "firing", 5, severity="info")


@pytest.mark.parametrize(
    "records, incidents, quiet, why",
    [
        (
            CRASH,
            [("bu", CRASH_NAMES)],
            {},
            "a broker crash is one incident; the HW stall joins through its UnderReplicated",
        ),
        (LAG, [("lag1", {"ReplicaOutOfSync": 1, "UnderReplicated": 1})], {}, "a chain of two links"),
        ([IMMINENT], [], {"IsrExitImminent": 1}, "an info alert no one was told of, explaining nothing"),
        (
            [rec("q", "ReplicaOutOfSync", "firing", 1), rec("q", "ReplicaOutOfSync", "resolved", 2)],
            [],
            {"ReplicaOutOfSync": 1},
            "over within group_wait: recorded, not notified, explains nothing",
        ),
        (
            [rec("b2", "BrokerUnavailable", "firing", 1), rec("u", "UnderReplicated", "firing", 1, by="b2")],
            [("b2", {"UnderReplicated": 1})],
            {},
            "not notified but explains something: shown, so its consequence has a home",
        ),
        (
            [rec("u", "UnderReplicated", "firing", 40, by="gone")],
            [("gone", {"UnderReplicated": 1})],
            {},
            "the root is not among the records (a replay window after it resolved): its id stands",
        ),
        (
            [rec("a", "ReplicaOutOfSync", "firing", 1, by="b"), rec("b", "UnderReplicated", "firing", 1, by="a")],  # noqa: E501 - one case per row reads best
            [],
            {"ReplicaOutOfSync": 1, "UnderReplicated": 1},
            "a loop of caused_by (never in the step's output): each stands alone, no hang",
        ),
        (
            [*LAG, IMMINENT, *reversed(CRASH)],
            [
                ("bu", CRASH_NAMES),
                ("lag1", {"ReplicaOutOfSync": 1, "UnderReplicated": 1}),
            ],
            {"IsrExitImminent": 1},
            "in event-time order of their roots (10 s, then 30 s), whatever the input order",
        ),
    ],
)  # fmt: skip
def test_group(records, incidents, quiet, why):
    tl = group(records)
    assert [(i.alert_id, dict(i.consequence_names())) for i in tl.incidents] == incidents, why
    assert dict(tl.quiet) == quiet, why


def test_the_root_carries_its_latest_cause_counts_and_resolve():
    (inc,) = group(CRASH).incidents
    assert inc.notified
    assert inc.causes == ["broker_silent", "broker_fenced"]
    assert inc.counts == COUNTS_LAST  # the resolve's counts are the newest
    assert inc.resolved_ms == T0 + 70_000
    assert inc.notified_consequences() == Counter({"UnderMinIsr": 1})


def test_root_of_follows_the_chain():
    parent = {"c": "b", "b": "a", "a": None, "x": "missing"}
    assert [root_of(k, parent) for k in ("a", "b", "c", "x")] == ["a", "a", "a", "missing"]


def test_the_crash_reads_as_one_line_with_its_consequences_under_it():
    lines = incident_lines(group(CRASH).incidents[0])
    assert len(lines) == 2
    head, folded = lines
    assert head.startswith("00:00:10.000  NOTIFIED critical BrokerUnavailable")
    assert "sim/broker-3" in head
    assert head.endswith(
        "broker_silent -> broker_fenced: 4 partitions under-replicated, 1 under min ISR, 0 offline, "
        "2 leaders lost; resolved 00:01:10.000"
    )
    assert folded == (
        " " * 14 + "+7 consequences: 3 UnderReplicated, 2 ReplicaOutOfSync, 1 HighWatermarkStalled, "
        "1 UnderMinIsr; notified themselves: 1 UnderMinIsr"
    )


def test_the_whole_timeline_summarises_the_quiet_in_one_line():
    lines = timeline_lines([*CRASH, *LAG, IMMINENT])
    assert len(lines) == 5  # crash (2 lines), lag (2 lines), the quiet summary
    assert lines[2].startswith("00:00:30.000  NOTIFIED warning  ReplicaOutOfSync")
    assert lines[2].endswith("lag: ReplicaOutOfSync firing; still firing")
    assert lines[3].strip() == "+2 consequences: 1 ReplicaOutOfSync, 1 UnderReplicated"
    assert lines[4].strip() == "not notified, explaining nothing: 1 alert (1 IsrExitImminent)"


def test_a_root_outside_the_records_is_named_by_its_id():
    (line, folded) = timeline_lines([rec("u", "UnderReplicated", "firing", 40, by="gone")])
    assert line.startswith("00:00:40.000") and line.endswith("id gone")
    assert "root not in these records" in line
    assert folded.strip() == "+1 consequence: 1 UnderReplicated"


def ep(aid, from_s, to_s, *, resolved=True, name="X", subject=None):
    """A flat episode as streaming/replay_compare.py's `episodes` gives it."""
    return {
        "name": name,
        "subject": subject or f"sim/{aid}",
        "alert_id": aid,
        "severity": "warning",
        "started_ms": T0 + from_s * 1000,
        "from_ms": T0 + from_s * 1000,
        "to_ms": T0 + to_s * 1000,
        "resolved": resolved,
    }


def test_the_chart_has_one_bar_per_root_with_its_consequences_counted():
    eps = [
        ep("bu", 10, 70, name="BrokerUnavailable"),
        ep("ur0", 12, 65),
        *[ep(f"ur{i}", 12, 100, resolved=False) for i in (1, 2)],  # outlast the root
        *[ep(f"oos{i}", 12, 60) for i in range(2)],
        ep("hw", 13, 50),
        ep("umi", 14, 40),
        ep("imm", 5, 6, name="IsrExitImminent"),
    ]
    bars = root_episodes([*CRASH, IMMINENT], eps)
    # roots in the order they began: the quiet IsrExitImminent (5 s), then the crash (10 s)
    assert [b["alert_id"] for b in bars] == ["imm", "bu"]
    imm, crash = bars
    assert imm["consequences"] == {} and imm["span"] == (T0 + 5000, T0 + 6000)
    assert crash["consequences"] == CRASH_NAMES
    assert (crash["from_ms"], crash["to_ms"]) == (T0 + 10_000, T0 + 70_000)  # the root's own bar
    assert crash["span"] == (T0 + 10_000, T0 + 100_000)  # to the last consequence's end


def test_a_root_outside_the_window_is_a_bar_over_its_consequences():
    records = [
        rec("u", "UnderReplicated", "firing", 40, by="gone"),
        rec("v", "AtMinIsr", "firing", 45, by="gone"),
    ]
    (bar,) = root_episodes(records, [ep("u", 40, 50), ep("v", 45, 55, resolved=False)])
    assert (bar["name"], bar["subject"]) == ("(root not in the window)", "gone")
    assert (bar["from_ms"], bar["to_ms"]) == bar["span"] == (T0 + 40_000, T0 + 55_000)
    assert bar["resolved"] is False  # one of them still fires at the window's end
    assert bar["consequences"] == {"UnderReplicated": 1, "AtMinIsr": 1}


def test_the_replay_prints_roots_already_firing_at_the_start_apart(capsys):
    from replmon.streaming.replay_cmd import print_view
    from replmon.streaming.replay_compare import WindowView

    crash_firing, *crash_rest = CRASH
    view = WindowView(transitions=[*crash_rest, *LAG], firing_at_start=[crash_firing])
    print_view(view, None)
    printed = capsys.readouterr().out.splitlines()
    start = printed.index("Already firing at the start of the window (1)")
    assert printed[start + 1].startswith("  00:00:10.000  NOTIFIED critical BrokerUnavailable")
    assert printed[start + 2].strip().startswith("+7 consequences")
    window = printed.index(
        f"Alert timeline in the window ({len(crash_rest) + len(LAG)} transitions; --all lists each)"
    )
    assert printed[window + 1].startswith("00:00:30.000  NOTIFIED warning  ReplicaOutOfSync")
    assert printed[window + 2].strip() == "+2 consequences: 1 ReplicaOutOfSync, 1 UnderReplicated"
    assert len(printed) == window + 3

    print_view(view, None, every_transition=True)
    flat = capsys.readouterr().out.splitlines()
    assert flat[flat.index("Already firing at the start of the window (1)") + 1].startswith(
        "  00:00:10.000  FIRING   critical BrokerUnavailable"
    )
    window = flat.index(f"Alert timeline in the window ({len(crash_rest) + len(LAG)} transitions)")
    assert len(flat) == window + 1 + len(crash_rest) + len(LAG)  # one line per transition
