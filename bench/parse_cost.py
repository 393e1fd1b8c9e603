"""What Spark's JVM spends per record to read the events, and what its other JSON readers would.

    python bench/parse_cost.py [--records 1000000] [--repeats 5]

One million fetch and append records (two fetches to an append, shaped as `replmon collect`
publishes them: docs/events.md) as a cached binary column, read by each way below and written
to Spark's `noop` sink, so every column is computed and nothing else is (no Kafka, no shuffle,
no Python step). Prints each way's wall time, median and min-max of `--repeats`, and its CPU per
record (wall x cores / records: the 2 tasks keep both cores busy). The last line is one JSON
object.

- `from_json`: Spark's typed parser on the text, the contract's schema (streaming/contract.py);
- `parse_events`: the monitor's whole parse (streaming/parse.py: byte checks, `from_json` with
  the corrupt-record column, the typed fields);
- `monitor_input`: that and the contract checks, the bucket and the event time (what the
  monitor's query computes before its shuffle);
- `json_tuple`: one parse per record, every field as a string;
- `parse_json + variant_get`: Spark 4's variant, then each field by path.

docs/performance.md ("100k partitions") gives the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time

TS0 = 1_764_300_000_000


def records(n: int, seed: int = 1) -> list[tuple[bytes, int]]:
    """n records over 50,000 partitions, every third an append, the others fetches."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        p = rnd.randrange(50_000)
        head = {"ts": TS0 + i, "cluster": "bench", "topic": f"t{p % 50}", "partition": p}
        if i % 3 == 0:
            e = {"type": "append", **head, "replica": 1, "leader_leo": 100_000 + i}
        else:
            e = {"type": "fetch", **head, "replica": 2 + i % 2, "fetch_offset": 99_000 + i}
            e |= {"leader_leo": 100_000 + i, "session_id": 1234 + p % 7}
        e |= {"leader_epoch": 3, "broker_epoch": 12, "log_start_offset": 0}
        out.append((json.dumps(e, separators=(",", ":")).encode(), i))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cores", type=int, default=2)
    args = ap.parse_args()

    from pyspark.sql import functions as F

    from replmon.state.events import FIELDS
    from replmon.streaming.contract import SPARK_SCHEMA
    from replmon.streaming.parse import monitor_input, parse_events
    from replmon.streaming.session import build_session
    from replmon.streaming.settings import SparkConf

    spark = build_session(
        SparkConf(driver_memory="4g", master=f"local[{args.cores}]"), app_name="replmon-parse"
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = (
        spark.createDataFrame(records(args.records), "value binary, seq long").repartition(args.cores).cache()
    )
    df.count()
    text = F.col("value").cast("string")
    typed = df.select(F.from_json(text, SPARK_SCHEMA).alias("j")).select("j.*")
    types = {f.name: f.dataType.simpleString() for f in typed.schema}
    variant = df.select(F.try_parse_json(text).alias("v"))
    ways = {
        "from_json": typed,
        "parse_events": parse_events(df, seq=F.col("seq")),
        "monitor_input": monitor_input(parse_events(df, seq=F.col("seq")), 16, 60_000),
        "json_tuple": df.select(F.json_tuple(text, *FIELDS)),
        "parse_json + variant_get": variant.select(
            *[F.try_variant_get("v", f"$.{n}", types[n]).alias(n) for n in FIELDS]
        ),
    }
    result = {"records": args.records, "cores": args.cores}
    try:
        for name, frame in ways.items():
            walls = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                frame.write.format("noop").mode("overwrite").save()
                walls.append(time.perf_counter() - t)
            wall = statistics.median(walls)
            us = wall * args.cores / args.records * 1e6
            result[name] = {
                "wall_s": round(wall, 3),
                "min_s": round(min(walls), 3),
                "max_s": round(max(walls), 3),
                "cpu_us_per_record": round(us, 2),
            }
            print(
                f"{name:26s} {wall:6.2f} s ({min(walls):.2f}-{max(walls):.2f})  {us:5.1f} µs CPU per record",
                flush=True,
            )
    finally:
        spark.stop()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
