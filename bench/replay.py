"""Speed of `replmon replay` over files: events per second with 0 and with 2 what-if variants.

    python bench/replay.py [--partitions 1000] [--seconds 60] [--runs 3] [--buckets 16]

Simulates the `scale` scenario (steady partitions, RF 3) into a temporary folder, then runs the
replay command in-process on one Spark session, `--runs` times per variant count, over the last
half of the input (the first half is the warm-up). Prints each run and, per variant count, the
median and the spread (min..max) of events read per second of wall time (the whole command:
count, the grouped job, collecting and writing the outputs; not the session start). Ends with
one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--buckets", type=int, default=16)
    args = ap.parse_args(argv)

    from replmon.streaming import cli

    tmp = Path(tempfile.mkdtemp(prefix="replmon-bench-replay-"))
    try:
        assert (
            cli.main(
                [
                    "simulate",
                    "--scenario",
                    "scale",
                    "--scale-partitions",
                    str(args.partitions),
                    "--scale-duration",
                    f"{args.seconds}s",
                    "--output",
                    str(tmp / "sim"),
                ]
            )
            == 0
        )
        events = sum(1 for f in (tmp / "sim" / "events").glob("*.jsonl") for _ in f.open())
        config = tmp / "replmon.toml"
        config.write_text(f"[stream]\nbuckets = {args.buckets}\n")
        half = f"{args.seconds // 2}s"
        variants = {
            0: [],
            2: ["--what-if", "rules.replica_lag_time_max_ms=10000", "--what-if", "rules.rule_set=v0_8"],
        }
        results: dict[int, list[float]] = {}
        for n, extra in variants.items():
            for run in range(args.runs + 1):  # run 0 warms the session up, not counted
                out = io.StringIO()
                t = time.monotonic()
                with contextlib.redirect_stdout(out):
                    rc = cli.main(
                        [
                            "replay",
                            "--config",
                            str(config),
                            "--input",
                            str(tmp / "sim" / "events"),
                            "--last",
                            half,
                            "--output",
                            str(tmp / f"out-{n}-{run}"),
                            *extra,
                        ]
                    )
                wall = time.monotonic() - t
                assert rc == 0, out.getvalue()[-2000:]
                read = int(
                    next(line for line in out.getvalue().splitlines() if "events read" in line)
                    .split()[2]
                    .replace(",", "")
                )
                if run:
                    results.setdefault(n, []).append(read / wall)
                print(
                    f"variants {n} run {run}: {read:,} events in {wall:.1f} s"
                    f"{' (warm-up, not counted)' if not run else ''}",
                    file=sys.stderr,
                )
        summary = {"partitions": args.partitions, "input_events": events, "buckets": args.buckets}
        for n, rates in results.items():
            summary[f"events_per_s_{n}_variants"] = {
                "median": round(statistics.median(rates)),
                "min": round(min(rates)),
                "max": round(max(rates)),
                "runs": len(rates),
            }
            print(
                f"{n} what-if variants: median {statistics.median(rates):,.0f} events/s "
                f"(min {min(rates):,.0f}, max {max(rates):,.0f}, {len(rates)} runs)"
            )
        print(json.dumps(summary))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
