"""One bucket's stateful step without Spark: where the Python time of a micro-batch goes.

    python bench/bucket_step.py [--partitions 6250] [--batches 12] [--miss] [--repeats 3] [--busy 0.1]
                                [--buckets 1] [--plain-gc] [--plain-constructors] [--full-save]
                                [--eager-load] [--every-run] [--sessions]

Feeds the real stateful function (streaming/stateful.make_state_func) the bench's steady traffic
for one bucket (bench/throughput.py: per partition and round an append and a fetch by each of
two followers, plus a heartbeat; 6,250 partitions is one bucket's share of 100k partitions over
16 buckets, the default), as pandas frames shaped as Arrow hands them over, with a stand-in for Spark's
GroupState. Prints the CPU time of each phase per call (validation and sort, state load, engine,
state save, output), median and min over the steady calls. `--miss` makes every call decode the
bucket, as when the task lands on the other Python worker. `--buckets N`: the worker serves N
such buckets per batch (a worker of a 100k-partition run with 16 buckets on 2 tasks serves 8),
the figures are over all of them. `--plain-gc`, `--plain-constructors`, `--full-save` and
`--eager-load` turn the stateful step's speed tricks off (the cyclic collector as Python runs it;
a setattr per field when decoding; the incremental save; the lazy load; the isr-expiration
runs only where a follower can lag: `--every-run` evaluates every partition at every run), to
measure what each buys. `--busy 0.1`: a cluster most of whose partitions are
idle, as the collector's compaction leaves them (issue 21): a tenth of the partitions has the
traffic above every round, the others only a caught-up fetch per follower every `--idle-every`
rounds (8: one per L/8 at L = 30 s), so about a fifth of the partitions changes per call; with
`--batches` of 30 or more, the isr-expiration run at L/2 falls in the run (with `--every-run`,
every partition is evaluated at it). `--sessions`: the idle partitions in session form, as
`replmon collect` publishes them (`--busy 0`: a bucket in which nothing happens). The
Arrow-to-pandas step and the JVM are not in it: bench/throughput.py measures those. Iterate on
the Python side with this; confirm with bench/throughput.py.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from replmon.state import codec, monitor
from replmon.state.events import FIELDS
from replmon.streaming import stateful
from replmon.streaming.contract import pack_extra
from replmon.streaming.settings import monitor_config

T0 = 1_767_225_600_000
INTERVAL_MS = 500
PHASES = ("quarantine_and_sort", "state_load", "engine", "state_save", "output")


class GroupStateStandIn:
    """The calls the adapter makes on Spark's GroupState."""

    def __init__(self) -> None:
        self.blob: bytes | None = None
        self.watermark_ms = 0
        self.hasTimedOut = False

    @property
    def exists(self) -> bool:
        return self.blob is not None

    @property
    def get(self) -> tuple:
        return (self.blob,)

    def update(self, row: tuple) -> None:
        self.blob = row[0]

    def getCurrentWatermarkMs(self) -> int:
        return self.watermark_ms

    def setTimeoutTimestamp(self, ms: int) -> None:
        pass


def is_busy(i: int, busy: float) -> bool:
    """Whether partition i is in the busy share (spread over the partitions, not the first ones)."""
    return (i * 7919) % 1000 < busy * 1000


def session_of(follower: int, leader: int) -> int:
    """The fetch session of a follower from a leader in --sessions (one fetcher thread)."""
    return 10 * follower + leader


def rounds(
    partitions: int, n: int, busy: float = 1.0, idle_every: int = 8, sessions: bool = False
) -> list[list[dict]]:
    """Round 0: every partition's metadata; then `n` rounds of the steady traffic: the busy
    share of the partitions (`busy`, all by default) appends and is fetched every round; the
    others append nothing and each follower's caught-up fetch reaches the monitor once every
    `idle_every` rounds (what the collector's compaction leaves of an idle partition: one
    caught-up fetch per resolution, L/8 = 3.75 s at the default L of 30 s, 8 rounds of 500 ms),
    staggered so that a 1/idle_every of them shows up in each round. With `sessions`, as
    `replmon collect` publishes them by default: each idle follower's first fetch names its
    session, then only the sessions' reads say them (a `session` event per follower and leader
    every other round, once a second)."""
    out = []
    for s in range(n + 1):
        t, leo, rows = T0 + s * INTERVAL_MS, s * 10, []
        for i in range(partitions):
            leader = 1 + i % 6
            f1, f2 = 1 + leader % 6, 1 + (leader + 1) % 6
            key = {"cluster": "bench", "topic": f"topic-{i // 1000}", "partition": i}
            if s == 0:
                rows.append(
                    {
                        "type": "metadata",
                        "ts": T0,
                        **key,
                        "leader": leader,
                        "leader_epoch": 1,
                        "replicas": [leader, f1, f2],
                        "isr": [leader, f1, f2],
                        "leader_leo": 0,
                        "hw": 0,
                    }
                )
                continue
            jt = t + i % 97
            if not is_busy(i, busy):
                # an idle follower's caught-up fetch: once per idle_every rounds, or in session
                # form once, naming its session (then its session's reads say it)
                if (s == 1) if sessions else ((s + i) % idle_every == 0):
                    rows += [
                        {
                            "type": "fetch",
                            "ts": jt + 1,
                            **key,
                            "replica": f,
                            "fetch_offset": 0,
                            "leader_leo": 0,
                            **({"session_id": session_of(f, leader)} if sessions else {}),
                        }
                        for f in (f1, f2)
                    ]
                continue
            rows += [
                {"type": "append", "ts": jt, **key, "leader_leo": leo},
                {"type": "fetch", "ts": jt + 1, **key, "replica": f1, "fetch_offset": leo, "leader_leo": leo},
                {
                    "type": "fetch",
                    "ts": jt + 2,
                    **key,
                    "replica": f2,
                    "fetch_offset": leo - 5,
                    "leader_leo": leo,
                },
            ]
        if s > 1 and sessions and s % 2 == 0:
            rows += [
                {
                    "type": "session",
                    "ts": t + 100,
                    "cluster": "bench",
                    "replica": f,
                    "leader": leader,
                    "session_id": session_of(f, leader),
                }
                for leader in range(1, 7)
                for f in (1 + leader % 6, 1 + (leader + 1) % 6)
            ]
        if s:
            rows.append({"type": "heartbeat", "ts": t, "cluster": "bench"})
        out.append(rows)
    return out


def frame(rows: list[dict], seq0: int) -> pd.DataFrame:
    """The rows as Arrow hands them to pandas: ints with a null as float64 NaN, strings as
    objects, the rare fields packed in `extra`; valid events, so no `reason` and no `raw`
    (streaming/parse.monitor_input)."""
    data: dict = {}
    for name in stateful.INPUT_COLUMNS:
        if name == "seq":
            values = list(range(seq0, seq0 + len(rows)))
        elif name == "extra":
            values = [pack_extra(r) for r in rows]
        elif name == "raw":
            values = [None] * len(rows)
        else:
            values = [r.get(name) for r in rows]
        if (name in FIELDS and FIELDS[name].kind == "int") or name == "seq":
            if all(v is not None for v in values):
                data[name] = np.array(values, dtype=np.int64)
            else:
                data[name] = np.array([np.nan if v is None else v for v in values], dtype=float)
        else:
            data[name] = pd.Series(values, dtype=object)
    return pd.DataFrame(data)


def _plain_builder(cls, names: tuple):
    """state/codec._builder's plain equivalent: a setattr per field."""

    def build(row):
        o = object.__new__(cls)
        for name, value in zip(names, row, strict=True):
            setattr(o, name, value)
        return o

    return build


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=6250, help="partitions in the bucket")
    ap.add_argument("--batches", type=int, default=12, help="steady micro-batches")
    ap.add_argument("--miss", action="store_true", help="decode the bucket on every call")
    ap.add_argument("--repeats", type=int, default=3, help="runs; the figures are over all")
    ap.add_argument(
        "--busy",
        type=float,
        default=1.0,
        help="share of partitions with traffic every round; the rest idle (one caught-up fetch "
        "per follower every --idle-every rounds)",
    )
    ap.add_argument("--idle-every", type=int, default=8, help="rounds between an idle partition's fetches")
    ap.add_argument(
        "--sessions",
        action="store_true",
        help="idle partitions in session form: a fetch naming its session, then the sessions' reads",
    )
    ap.add_argument("--buckets", type=int, default=1, help="buckets this worker serves per batch")
    ap.add_argument("--plain-gc", action="store_true", help="the collector on during calls, nothing frozen")
    ap.add_argument(
        "--plain-constructors", action="store_true", help="decode with a setattr per field, not _builder"
    )
    ap.add_argument("--full-save", action="store_true", help="every save encodes the whole bucket")
    ap.add_argument("--eager-load", action="store_true", help="a miss decodes every partition (no lazy load)")
    ap.add_argument(
        "--every-run", action="store_true", help="every isr-expiration run evaluates every partition"
    )
    args = ap.parse_args()
    if args.every_run:
        monitor.SKIP_IDLE_RUNS = False
    if args.full_save:
        stateful.INCREMENTAL_SAVE = False
    if args.eager_load:
        stateful.LAZY_LOAD = False
    if args.plain_gc:
        stateful.quiet_collector = contextlib.nullcontext
    if args.plain_constructors:
        codec._builder = _plain_builder
    frames, seq = [], 0
    for rows in rounds(args.partitions, args.batches, args.busy, args.idle_every, args.sessions):
        frames.append(frame(rows, seq))
        seq += len(rows)
    cfg = monitor_config(status_interval_ms=10_000)  # as bench/throughput.py
    calls: list[dict] = []
    runs: list[list[dict]] = []  # the steady calls of each run
    whole: list[float] = []  # CPU ms of each whole call, the collector's work at its end included
    for _ in range(args.repeats):
        folder = tempfile.mkdtemp(prefix="replmon-bucket-step-")
        func = stateful.make_state_func(cfg, 64, profile_dir=folder)
        states = [GroupStateStandIn() for _ in range(args.buckets)]
        stateful._WRITTEN.clear()
        for s, f in enumerate(frames):
            if args.miss:
                stateful._WRITTEN.clear()
            for b, state in enumerate(states):
                state.watermark_ms = T0 + s * INTERVAL_MS - 10_000
                t = time.thread_time()
                for _ in func((b,), iter([f]), state):
                    pass
                if s >= 2:
                    whole.append((time.thread_time() - t) * 1000)
        lines = [
            json.loads(line)
            for p in Path(folder).glob("phases-*.jsonl")
            for line in p.read_text().splitlines()
        ]
        runs.append(lines[2 * args.buckets :])  # leave out the metadata round and the first steady call
        calls += runs[-1]
    events = round(statistics.mean(len(f) for f in frames[1:]))
    print(
        f"one bucket: {args.partitions:,} partitions, {events:,} events per call, "
        f"{'decoding the bucket every call' if args.miss else 'the kept bucket reused'}; "
        f"state blob {len(state.blob):,} B ({len(state.blob) / (3 * args.partitions):.1f} B "
        f"per replica); CPU ms per call over {len(calls)} calls:"
    )
    total = []
    for k in PHASES:
        v = [c.get(f"{k}_cpu", 0.0) for c in calls]
        per_run = [statistics.median(c.get(f"{k}_cpu", 0.0) for c in run) for run in runs]
        print(
            f"  {k:18s} median {statistics.median(v):7.2f}  min {min(v):7.2f}  mean {statistics.mean(v):7.2f}"
            f"  | median of the {len(runs)} runs' medians {statistics.median(per_run):7.2f} "
            f"({min(per_run):.2f}-{max(per_run):.2f})"
        )
    total = [sum(c.get(f"{k}_cpu", 0.0) for k in PHASES) for c in calls]
    med = statistics.median(total)
    print(
        f"  {'total':18s} median {med:7.2f}  min {min(total):7.2f}  max {max(total):7.2f}  "
        f"({events / med * 1000:,.0f} events/s on one core; the max is the call with the "
        "isr-expiration run, when --batches reaches it)"
    )
    print(
        f"  {'whole call':18s} median {statistics.median(whole):7.2f}  min {min(whole):7.2f}  "
        f"(the phases and the collector's work at the end of the call; {gc.get_freeze_count():,} "
        "objects frozen)"
    )
    print(
        json.dumps(
            {
                "partitions": args.partitions,
                "events_per_call": events,
                "miss": args.miss,
                "full_save": args.full_save,
                "eager_load": args.eager_load,
                "every_run": args.every_run,
                "busy": args.busy,
                "sessions": args.sessions,
                "state_bytes": len(state.blob),
                "cpu_ms_median": {
                    k: round(statistics.median(c.get(f"{k}_cpu", 0.0) for c in calls), 2) for k in PHASES
                },
                "cpu_ms_min": {k: round(min(c.get(f"{k}_cpu", 0.0) for c in calls), 2) for k in PHASES},
                "cpu_ms_mean": {
                    k: round(statistics.mean(c.get(f"{k}_cpu", 0.0) for c in calls), 2) for k in PHASES
                },
                "total_ms_median": round(med, 2),
                "total_ms_max": round(max(total), 2),
                "total_ms_mean": round(statistics.mean(total), 2),
                "call_ms_median": round(statistics.median(whole), 2),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
