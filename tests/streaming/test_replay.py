"""`replmon replay` on the shared Spark session: a window gives the live run's transitions with
the live run's ids; an episode that began before the window is already firing, not new; what-if
variants in one pass (KIP-16: Kafka 0.8's message-count rule shrinks the ISR on bursts, the
time-only rule does not; a cluster report that predates a 0.8 shrink does not undo it); the
report renders in headless Chromium; `--input FILE`; a window in the middle of session form
carries in what its idle followers' progress needs."""

from __future__ import annotations

import json
import uuid
from operator import itemgetter
from pathlib import Path

import pytest

from replmon.streaming.bridge import OutputRouter
from replmon.streaming.cli import main as replmon
from replmon.streaming.collect.sessions import session_form
from replmon.streaming.query import start_query
from replmon.streaming.settings import Settings
from replmon.streaming.simulator.model import simulate
from replmon.streaming.sources import file_source
from tests.browser import pixel_shares, screenshot
from tests.collect.test_compact import fold
from tests.state.test_session_form import _with_tail, random_cluster
from tests.streaming.helpers import await_end, read_outputs

pytestmark = pytest.mark.spark

START_MS = 1_767_225_600_000  # the simulator's default start, 2026-01-01T00:00:00Z


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@pytest.fixture
def config(tmp_path) -> Path:
    path = tmp_path / "replmon.toml"
    path.write_text("[stream]\nbuckets = 2\n")  # 64 by default: slow for a tiny input
    return path


def test_a_window_replay_gives_the_live_transitions_and_ids(spark, tmp_path, config, capsys):
    from replmon.streaming import cli

    assert replmon(["simulate", "--scenario", "paused_and_slow", "--output", str(tmp_path / "sim")]) == 0
    (events_file,) = sorted((tmp_path / "sim" / "events").glob("*.jsonl"))  # one FILE, not a folder
    # The live query over the whole input, from the single file (a streaming file source used
    # to fail on a file: "Option 'basePath' must be a directory").
    settings = Settings(stream={"buckets": 2}, output_dir=str(tmp_path / "live"))
    query = start_query(
        spark,
        file_source(spark, str(events_file)),
        settings,
        OutputRouter(settings.output_dir, None),
        once=True,
        name=f"replay_live_{uuid.uuid4().hex[:8]}",
    )
    await_end(query, 300)
    live = read_outputs(tmp_path / "live")["alerts"]
    t1, t2 = START_MS + 30_000, START_MS + 90_000
    rc = cli.main(
        [
            "replay",
            "--config",
            str(config),
            "--input",
            str(events_file),
            "--from",
            "2026-01-01T00:00:30Z",
            "--to",
            str(t2),
            "--output",
            str(tmp_path / "replay"),
        ]
    )
    printed = capsys.readouterr().out
    assert rc == 0
    replayed = _jsonl(tmp_path / "replay" / "alerts.jsonl")
    firing_at_start = _jsonl(tmp_path / "replay" / "firing_at_start.jsonl")

    key = itemgetter("alert_id", "status", "ts", "name", "subject")
    expected = sorted(key(r) for r in live if t1 <= r["ts"] <= t2)
    assert expected, "the window must hold transitions for the comparison to mean something"
    assert sorted(key(r) for r in replayed) == expected
    # Episodes open at T1 in the live run are reported as already firing, with their live ids,
    # and never as a new firing inside the window.
    open_live = {r["alert_id"] for r in live if r["status"] == "firing" and r["ts"] < t1} - {
        r["alert_id"] for r in live if r["status"] == "resolved" and r["ts"] < t1
    }
    assert open_live, "the window must start inside an episode"
    assert {r["alert_id"] for r in firing_at_start} == open_live
    assert not {r["alert_id"] for r in replayed if r["status"] == "firing"} & open_live
    assert "Already firing at the start of the window" in printed


def test_what_if_v0_8_on_bursts_and_the_report_in_a_browser(spark, tmp_path, config, capsys):
    from replmon.streaming import cli

    assert replmon(["simulate", "--scenario", "bursty", "--output", str(tmp_path / "sim")]) == 0
    report = tmp_path / "report"
    rc = cli.main(
        [
            "replay",
            "--config",
            str(config),
            "--input",
            str(tmp_path / "sim" / "events"),
            "--last",
            "60s",
            "--what-if",
            "rules.rule_set=v0_8",
            "--what-if",
            "rules.replica_lag_time_max_ms=30000",
            "--output",
            str(tmp_path / "replay"),
            "--report",
            str(report),
        ]
    )
    printed = capsys.readouterr().out
    assert rc == 0
    actual = _jsonl(tmp_path / "replay" / "alerts.jsonl")
    v08 = _jsonl(tmp_path / "replay" / "what-if-1" / "alerts.jsonl")
    longer = _jsonl(tmp_path / "replay" / "what-if-2" / "alerts.jsonl")
    # KIP-16: a burst puts followers > 4000 messages behind for a moment; 0.8 drops them from
    # the ISR, the time-only rule does not (they keep fetching and catch up within L).
    assert not [r for r in actual if r["name"] == "ReplicaOutOfSync"]
    out_of_sync = {r["subject"] for r in v08 if r["name"] == "ReplicaOutOfSync" and r["status"] == "firing"}
    assert {s.rsplit("/", 1)[0] for s in out_of_sync} == {"sim/clicks-0", "sim/clicks-1"}, out_of_sync
    assert longer == actual  # a longer limit changes nothing when nothing lags in time
    assert "only with the variant: ReplicaOutOfSync sim/clicks-" in printed
    table = {
        line.split()[0]: line.split()[1:]
        for line in printed.splitlines()
        if line.startswith(("actual ", "rules.rule_set=v0_8 "))
    }
    assert table["actual"][1] == "0" and int(table["rules.rule_set=v0_8"][1]) > 0  # ISR shrinks

    page = report / "index.html"
    text = page.read_text()
    pngs = (
        "alerts.png",
        "replica_lag.png",
        "isr.png",
        "hw.png",
        "variants.png",
        "alerts-what-if-1.png",
    )  # v0_8's alerts differ from the actual ones: own timeline
    for png in pngs:
        assert (report / png).stat().st_size > 5_000, png
    assert not (report / "alerts-what-if-2.png").exists()  # same alerts as actual: no own timeline
    assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text  # offline
    assert text.count("data:image/png;base64,") == len(pngs)
    shot = screenshot(page, tmp_path / "screenshot.png")
    shares = pixel_shares(shot)
    # An empty or broken page is white with a little text; the plots put colour on it.
    assert shares["ink"] > 0.05, shares
    assert shares["colour"] > 0.005, shares


def test_what_if_v0_8_keeps_out_of_the_isr_whom_0_8_shrank(spark, tmp_path, config, capsys):
    """The engine case of tests/state/test_monitor.py (a report that predates a 0.8 shrink
    keeps the replica out) through `replmon replay --what-if`: the variant's rule set, not
    today's, decides who a same-epoch report may put back."""
    from replmon.state.events import EVENT_FIELDS
    from replmon.streaming import cli
    from tests.state.test_monitor import T0, meta, steady

    events = [meta(T0), *steady(T0 + 100, T0 + 8000, leo0=1000, slow=600, stop=T0 + 5000)]
    events.append(meta(T0 + 6000, isr=(1, 2, 3)))
    events.sort(key=lambda e: e[EVENT_FIELDS.index("ts")])
    path = tmp_path / "events.jsonl"
    path.write_text(
        "".join(
            json.dumps({f: v for f, v in zip(EVENT_FIELDS, e, strict=True) if v is not None and f != "raw"})
            + "\n"
            for e in events
        )
    )
    rc = cli.main(
        [
            "replay",
            "--config",
            str(config),
            "--input",
            str(path),
            "--from",
            str(T0),
            "--what-if",
            "rules.rule_set=v0_8,rules.replica_lag_max_messages=500",
            "--output",
            str(tmp_path / "replay"),
        ]
    )
    capsys.readouterr()
    assert rc == 0

    def under_replicated(alerts):
        return [(r["status"], r["ts"] - T0) for r in alerts if r["name"] == "UnderReplicated"]

    actual = _jsonl(tmp_path / "replay" / "alerts.jsonl")
    v08 = _jsonl(tmp_path / "replay" / "what-if-1" / "alerts.jsonl")
    assert under_replicated(actual) == []  # today's rule: caught up within L, never out
    # 0.8 shrinks at +5 s (600 > 500 messages behind); the report at +6 s does not put it back
    assert under_replicated(v08) == [("firing", 5000)]


def test_a_window_in_the_middle_of_session_form_raises_no_false_alert(spark, tmp_path):
    """Session form (docs/events.md) says an idle follower's progress only by its session's
    reads, which count for a partition after a fetch of its own that named the session: a
    window whose warm-up starts after that fetch must get it carried in. Without it, this window
    gave false ReplicaOutOfSync, UnderMinIsr and AtMinIsr on the idle topic. The reference is
    the engine over the whole run in per-partition form (compaction off)."""
    spec = random_cluster(9)  # an idle topic, slow and paused followers, L = 10 s
    events, _ = simulate(spec, seed=9)
    t0 = min(e["ts"] for e in events)
    t1, t2 = t0 + 30_000, t0 + 58_000
    whole, _, _ = fold(_with_tail(events), spec.replica_lag_time_max_ms, compaction_resolution_ms=1000)
    key = itemgetter("alert_id", "status", "ts", "name", "subject")
    expected = sorted(key(r) for r in whole if t1 <= r["ts"] <= t2)
    assert any(r[3] == "ReplicaOutOfSync" for r in expected), "the window must hold lag alerts"

    source = tmp_path / "sessions.jsonl"
    source.write_text("".join(json.dumps(e) + "\n" for e in _with_tail(session_form(events, 1000))))
    config = tmp_path / "replmon.toml"
    config.write_text("[stream]\nbuckets = 2\n[alerts]\ncompaction_resolution_ms = 1000\n")
    args = ["replay", "--config", str(config), "--input", str(source), "--output", str(tmp_path / "out")]
    assert replmon([*args, "--from", str(t1), "--to", str(t2), "--warmup", "22s"]) == 0
    replayed = _jsonl(tmp_path / "out" / "alerts.jsonl")
    assert sorted(key(r) for r in replayed) == expected
