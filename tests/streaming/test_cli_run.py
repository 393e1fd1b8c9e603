"""`replmon run`: over an input folder once (in-process, on the shared session), and the embedded
default that simulates the `demo` cluster and monitors it (a subprocess, as a user runs it)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from replmon.streaming.cli import main as replmon
from tests.streaming.helpers import read_outputs

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
START_MS = 1_767_225_600_000  # the simulator's default start: 00:00:00 on the timeline
# A line of the flat timeline (--all):
#   "00:00:29.975  FIRING   warning  ReplicaOutOfSync  sim/orders-0/2  reason";
# of the grouped one, followed by the count of its consequences when it explains any:
#   "00:00:29.975  NOTIFIED warning  ReplicaOutOfSync  sim/orders-0/2  lag: reason; resolved 00:00:40.216"
#   "              +2 consequences: 1 AtMinIsr, 1 UnderReplicated"
TIMELINE_LINE = re.compile(
    r"^(\d\d):(\d\d):(\d\d)\.(\d{3})  (FIRING|UPDATED|RESOLVED|NOTIFIED|RECORDED) +\w+ +(\w+) +(\S+) "
)
CONSEQUENCES_LINE = re.compile(r"^ {14}\+(\d+) consequences?: ")


def timeline(stdout: str) -> list[tuple[int, str, str, str]]:
    """(ms after the start, status or NOTIFIED/RECORDED, alert name, subject) of each printed line."""
    rows = []
    for line in stdout.splitlines():
        m = TIMELINE_LINE.match(line)
        if m:
            h, mi, s, ms, status, name, subj = m.groups()
            rows.append((((int(h) * 60 + int(mi)) * 60 + int(s)) * 1000 + int(ms), status, name, subj))
    return rows


def explained_by(alerts: list[dict], root_id: str) -> set[str]:
    """The ids of the alerts whose caused_by leads to `root_id`, directly or through a chain."""
    parent = {a["alert_id"]: a.get("caused_by") for a in alerts if a["status"] == "firing"}
    found: set[str] = set()
    while grown := {a for a, p in parent.items() if (p == root_id or p in found) and a not in found}:
        found |= grown
    return found


def notified_roots(alerts: list[dict]) -> set[tuple[int, str, str]]:
    """(ms after the start, name, subject) of each root whose firing went to on-call."""
    return {
        (a["ts"] - START_MS, a["name"], a["subject"])
        for a in alerts
        if a["status"] == "firing" and a["notify"] and a.get("caused_by") is None
    }


def test_run_over_an_input_folder_once_writes_the_outputs_and_prints_the_timeline(spark, tmp_path, capsys):
    from replmon.streaming import cli  # the `spark` session exists: the command's getOrCreate returns it

    assert replmon(["simulate", "--scenario", "paused_and_slow", "--output", str(tmp_path / "sim")]) == 0
    config = tmp_path / "replmon.toml"
    config.write_text("[stream]\nbuckets = 4\n")  # 64 by default: slow for a tiny input
    out_dir = tmp_path / "out"
    rc = cli.main(
        [
            "run",
            "--config",
            str(config),
            "--input",
            str(tmp_path / "sim" / "events"),
            "--once",
            "--output",
            str(out_dir),
        ]
    )
    printed = capsys.readouterr().out

    assert rc == 0
    outputs = read_outputs(out_dir)
    for kind in ("alerts", "partition_status", "replica_status"):
        assert outputs[kind], kind
    assert outputs["quarantine"] == []
    assert f"replmon run: outputs in {out_dir}: " in printed
    assert f"alerts {len(outputs['alerts'])}" in printed
    alerts = outputs["alerts"]
    # The default timeline: what was notified, one line each, every consequence folded.
    assert f"Alert timeline ({len(alerts)} transitions; --all lists each)" in printed
    printed_rows = timeline(printed)
    assert {(t, name, subj) for t, mark, name, subj in printed_rows if mark == "NOTIFIED"} == notified_roots(
        alerts
    )
    roots = {(a["name"], a["subject"]) for a in alerts if a.get("caused_by") is None}
    assert {(name, subj) for _, _, name, subj in printed_rows} <= roots  # no consequence on a line of its own
    assert [t for t, *_ in printed_rows] == sorted(t for t, *_ in printed_rows)  # in event-time order
    # the paused and the slow follower lag for their own reasons: each pages on its own
    assert ("NOTIFIED", "ReplicaOutOfSync", "sim/orders-0/2") in {r[1:] for r in printed_rows}
    assert ("NOTIFIED", "ReplicaOutOfSync", "sim/orders-1/3") in {r[1:] for r in printed_rows}

    # --all: every transition, one line each, in event-time order (the same folder, printed again)
    cli.print_timeline(out_dir / "alerts", every_transition=True)
    flat = capsys.readouterr().out
    assert f"Alert timeline ({len(alerts)} transitions)" in flat
    flat_rows = timeline(flat)
    assert sorted(flat_rows) == sorted(
        (a["ts"] - START_MS, a["status"].upper(), a["name"], a["subject"]) for a in alerts
    )
    assert [t for t, *_ in flat_rows] == sorted(t for t, *_ in flat_rows)


def test_run_without_input_when_not_interactive_refuses_naming_the_settings(tmp_path):
    # A service whose settings went missing must not look healthy running the demo.
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLMON_")}
    proc = subprocess.run(
        [sys.executable, "-m", "replmon.streaming.cli", "run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert "no input configured" in proc.stderr
    assert "kafka.bootstrap_servers" in proc.stderr and "input_path" in proc.stderr
    assert "--demo" in proc.stderr
    assert not (tmp_path / "replmon-out").exists()


def test_embedded_default_simulates_the_demo_and_alerts_on_each_fault(tmp_path):
    # `replmon run --demo`: simulates `demo` into a temporary folder, monitors it once and
    # prints the timeline. Its own process (and JVM), with the temporary folder and the default
    # ./replmon-out kept under tmp_path.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env = {k: v for k, v in env.items() if not k.startswith("REPLMON_")}
    proc = subprocess.run(
        [sys.executable, "-m", "replmon.streaming.cli", "run", "--demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "simulating scenario 'demo'" in proc.stdout
    # The quiet console (streaming/console.py): no py4j, Spark or JVM log lines unless --verbose.
    # The JVM's own "WARNING: Using incubator modules" cannot be configured away.
    noise = [
        line
        for line in (proc.stdout + proc.stderr).splitlines()
        if re.search(r"Received command|\b(INFO|WARN)\b|Setting default log level|NativeCodeLoader", line)
    ]
    assert noise == [], noise[:5]
    (sim_dir,) = [p for p in tmp_path.iterdir() if p.name.startswith("replmon-sim-")]
    truth = [json.loads(line) for line in (sim_dir / "truth.jsonl").read_text().splitlines()]
    outputs = read_outputs(tmp_path / "replmon-out")
    alerts = outputs["alerts"]
    fired = [(a["ts"] - START_MS, a["name"], a["subject"]) for a in alerts if a["status"] == "firing"]

    def alerted(names, subj_prefix, start, end):
        return [f for f in fired if f[1] in names and f[2].startswith(subj_prefix) and start <= f[0] <= end]

    faults = {f["fault"]: f for f in truth if f["kind"] == "fault"}
    assert set(faults) == {
        "paused_follower",
        "slow_follower",
        "bursty_producer",
        "bootstrap_replica",
        "broker_crash",
    }

    def window(f: dict) -> tuple[int, int]:
        return f["start_ms"] - START_MS, (f["end_ms"] or START_MS + 180_000) - START_MS

    paused, slow, crash = faults["paused_follower"], faults["slow_follower"], faults["broker_crash"]
    assert alerted(
        {"ReplicaOutOfSync"},
        f"sim/{paused['topic']}-{paused['partition']}/{paused['replica']}",
        *window(paused),
    )
    assert alerted(
        {"IsrExitImminent", "ReplicaOutOfSync"},
        f"sim/{slow['topic']}-{slow['partition']}/{slow['replica']}",
        *window(slow),
    )
    assert alerted({"UnderReplicated"}, "sim/", *window(crash))
    assert [
        f
        for f in alerted({"ReplicaOutOfSync"}, "sim/", *window(crash))
        if f[2].endswith(f"/{crash['broker']}")
    ]
    # The printed timeline: the broker crash reads as one line with its consequences counted
    # under it; besides it, only the two followers that lag for their own reason page.
    lines = proc.stdout.splitlines()
    rows = timeline(proc.stdout)
    assert {(t, name, subj) for t, mark, name, subj in rows if mark == "NOTIFIED"} == notified_roots(alerts)
    (crash_root,) = [
        a
        for a in alerts
        if a["name"] == "BrokerUnavailable" and a["status"] == "firing" and a["broker"] == crash["broker"]
    ]
    (i,) = [
        n
        for n, line in enumerate(lines)
        if (m := TIMELINE_LINE.match(line)) and m.group(6, 7) == ("BrokerUnavailable", crash_root["subject"])
    ]
    assert lines[i].split()[1] == "NOTIFIED"
    folded = CONSEQUENCES_LINE.match(lines[i + 1])
    assert folded and int(folded.group(1)) == len(explained_by(alerts, crash_root["alert_id"])) > 20
    assert not [
        r for r in rows if window(crash)[0] <= r[0] <= window(crash)[1] and r[2] != "BrokerUnavailable"
    ]
    assert {(name, subj.rsplit("/", 1)[0]) for _, mark, name, subj in rows if mark == "NOTIFIED"} == {
        ("BrokerUnavailable", "sim/broker"),
        ("ReplicaOutOfSync", f"sim/{paused['topic']}-{paused['partition']}"),
        ("ReplicaOutOfSync", f"sim/{slow['topic']}-{slow['partition']}"),
    }
    # The reassignment's new replica is catching up, not out of sync: no lag alert about it.
    boot = faults["bootstrap_replica"]
    assert not alerted(
        {"ReplicaOutOfSync", "IsrExitImminent"},
        f"sim/{boot['topic']}-{boot['partition']}/{boot['replica']}",
        0,
        180_000,
    )
    # Bursts far above 0.8's 4000 messages: nothing about the bursty partition while they go on
    # (it is led by the broker that crashes later, which then alerts like every other partition).
    bursty = faults["bursty_producer"]
    subj = f"sim/{bursty['topic']}-{bursty['partition']}"
    assert not [
        f for f in fired if (f[2] == subj or f[2].startswith(subj + "/")) and f[0] <= window(bursty)[1]
    ]
