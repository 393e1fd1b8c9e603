"""End to end through the real services: simulated events in Kafka, the monitor query, Redis.

    bash deploy/local/services.sh up
    python bench/kafka_to_redis.py [--partitions 2000] [--seconds 30] [--max-offsets 500000]
    python bench/kafka_to_redis.py --partitions 100000 --seconds 2 --max-offsets 300000

1. Produces the scale generator's steady cluster (streaming/simulator/scale.py: about 30
   events per partition-second) to a fresh topic on the local broker (kafka-python, acks=all).
2. Runs the monitor query over that topic with trigger availableNow and maxOffsetsPerTrigger,
   writing to the local Redis under a fresh prefix through OutputRouter and the Redis sink.
3. Prints the produce rate, the end-to-end rate (events / wall time from query start to its
   end), the micro-batches, the time spent in the Redis sink and what it wrote; ends with one
   JSON line of the figures, with the sink's records written per second, its round trips
   per batch and its share of the batch time (it runs inside each batch: it keeps up while
   that share stays small). The topic and the Redis keys are deleted afterwards (--keep: not).

Addresses come from deploy/local/.run/env (written by services.sh up) unless given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

TIMEOUT_S = 3600  # a benchmark query that runs longer than this is hung, not slow

ROOT = Path(__file__).resolve().parents[1]
ENV_FILE = ROOT / "deploy" / "local" / ".run" / "env"


def local_env() -> dict[str, str]:
    if not ENV_FILE.is_file():
        return {}
    pairs = (line.split("=", 1) for line in ENV_FILE.read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs}


class TimedSink:
    """The Redis sink, timed, with its WriteReports kept."""

    def __init__(self, sink) -> None:
        self.sink = sink
        self.reports: list = []
        self.seconds = 0.0
        self.per_batch: dict[int, tuple[float, int]] = {}  # batch id: (seconds, status records handed in)

    def write_batch(
        self,
        batch_id,
        alerts,
        partition_status,
        replica_status,
        quarantine,
        clocks=None,
        series_points=None,
        verdicts=None,
    ):
        start = time.perf_counter()
        report = self.sink.write_batch(
            batch_id, alerts, partition_status, replica_status, quarantine, clocks, series_points, verdicts
        )
        took = time.perf_counter() - start
        self.seconds += took
        self.per_batch[batch_id] = (took, len(partition_status) + len(replica_status))
        self.reports.append(report)
        return report

    def total(self, name: str) -> int:
        return sum(getattr(r, name) for r in self.reports)


def batch_printer():
    """A listener that prints each micro-batch as it ends (a failing run still shows its
    progress)."""
    from pyspark.sql.streaming import StreamingQueryListener

    class Printer(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            p = event.progress
            d = p.durationMs
            print(
                f"  batch {p.batchId}: {p.numInputRows:,} rows read, "
                f"{d.get('triggerExecution', 0) / 1000:.1f} s (addBatch "
                f"{d.get('addBatch', 0) / 1000:.1f} s)",
                flush=True,
            )

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    return Printer()


def offsets_read(progress: dict) -> int:
    """Records one micro-batch read from Kafka: its end offsets less its start offsets.
    (numInputRows counts a record once per scan of the source in the plan.)"""
    total = 0
    for source in progress["sources"]:
        end = json.loads(source["endOffset"])
        start = json.loads(source.get("startOffset") or "null") or {}  # "null": from earliest
        for topic, partitions in end.items():
            for partition, offset in partitions.items():
                total += offset - start.get(topic, {}).get(partition, 0)
    return total


def produce(
    bootstrap: str, topic: str, kafka_partitions: int, partitions: int, seconds: int
) -> tuple[int, float]:
    from replmon.streaming.simulator import writers
    from replmon.streaming.simulator.scale import scale

    writers.create_topic(bootstrap, topic, kafka_partitions)
    producer = writers.kafka_producer(bootstrap)
    start = time.perf_counter()
    try:
        count = writers.publish(scale(partitions, seconds), producer, topic)
    finally:
        producer.close()
    return count, time.perf_counter() - start


def cleanup(bootstrap: str, topic: str | None, client, prefix: str) -> None:
    from kafka.admin import KafkaAdminClient

    if topic is not None:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="replmon-bench")
        try:
            admin.delete_topics([topic], timeout_ms=30000)
        finally:
            admin.close()
    for key in client.scan_iter(match=f"{prefix}:*", count=5000):
        client.delete(key)


def main() -> int:
    env = local_env()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=2000, help="simulated Kafka partitions")
    ap.add_argument("--seconds", type=int, default=30, help="event time to simulate")
    ap.add_argument("--kafka-partitions", type=int, default=6, help="partitions of the events topic")
    ap.add_argument("--max-offsets", type=int, default=500_000, help="maxOffsetsPerTrigger")
    ap.add_argument("--buckets", type=int, default=16, help="stream.buckets (its default)")
    ap.add_argument("--status-interval-ms", type=int, default=1000)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--bootstrap", default=env.get("REPLMON_KAFKA_BOOTSTRAP", "127.0.0.1:19092"))
    ap.add_argument("--redis-url", default=env.get("REPLMON_REDIS_URL", "redis://127.0.0.1:16379/0"))
    ap.add_argument("--topic", help="read this topic as it is (kept afterwards) instead of producing")
    ap.add_argument("--keep", action="store_true", help="keep the topic and the Redis keys")
    args = ap.parse_args()

    import redis

    from replmon.sinks.keys import Keys
    from replmon.streaming.bridge import OutputRouter
    from replmon.streaming.query import start_query
    from replmon.streaming.redis_out import build_redis_sink
    from replmon.streaming.session import build_session
    from replmon.streaming.settings import Settings, SparkConf
    from replmon.streaming.sources import kafka_source

    tag = uuid.uuid4().hex[:8]
    topic, prefix = args.topic or f"bench-k2r-{tag}", f"benchk2r{tag}"
    events, produce_s = 0, 0.0
    if args.topic is None:
        events, produce_s = produce(
            args.bootstrap, topic, args.kafka_partitions, args.partitions, args.seconds
        )
        print(
            f"produced {events:,} events ({args.partitions:,} partitions x {args.seconds} s) "
            f"to {args.bootstrap}/{topic} in {produce_s:.1f} s: "
            f"{events / produce_s:,.0f} events/s"
        )

    jars = [j for j in env.get("REPLMON_SPARK_JARS", "").split(",") if j] or sorted(
        str(p) for p in (ROOT / "deploy" / "local" / "jars").glob("*.jar")
    )
    spark = build_session(
        SparkConf(driver_memory=args.driver_memory, jars=jars), app_name="replmon-bench-k2r"
    )
    work = Path(tempfile.mkdtemp(prefix="replmon-bench-k2r-"))
    settings = Settings(
        kafka={
            "bootstrap_servers": args.bootstrap,
            "subscribe": topic,
            "starting_offsets": "earliest",
            "max_offsets_per_trigger": args.max_offsets,
        },
        redis={"url": args.redis_url, "prefix": prefix},
        spark={"checkpoint_dir": str(work / "checkpoint")},
        stream={"buckets": args.buckets, "status_interval_ms": args.status_interval_ms},
        write_files=False,
    )
    sink = TimedSink(build_redis_sink(settings.redis))
    router = OutputRouter(None, sink)
    client = redis.Redis.from_url(args.redis_url)
    spark.streams.addListener(batch_printer())
    try:
        start = time.perf_counter()
        query = start_query(
            spark, kafka_source(spark, settings.kafka), settings, router, once=True, name=f"bench_k2r_{tag}"
        )
        try:
            if not query.awaitTermination(TIMEOUT_S):
                raise RuntimeError(f"the query did not end within {TIMEOUT_S} s")
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
        finally:
            query.stop()
        wall = time.perf_counter() - start
        progress = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0]
        read = sum(offsets_read(p) for p in progress)
        scanned = sum(p["numInputRows"] for p in progress)
        durations = sorted(p["durationMs"]["triggerExecution"] for p in progress)
        keys = Keys(prefix)
        redis_keys = sum(1 for _ in client.scan_iter(match=f"{prefix}:*", count=5000))
        figures = {
            "events": events,
            "events_read": read,
            "rows_scanned": scanned,
            "partitions": args.partitions,
            "seconds": args.seconds,
            "kafka_partitions": args.kafka_partitions,
            "max_offsets_per_trigger": args.max_offsets,
            "buckets": args.buckets,
            "produce_events_per_s": round(events / produce_s) if produce_s else None,
            "wall_s": round(wall, 1),
            "events_per_s": round(read / wall),
            "batches": len(durations),
            "batch_ms_p50": round(statistics.median(durations)) if durations else 0,
            "batch_ms_max": durations[-1] if durations else 0,
            "sink_s": round(sink.seconds, 1),
            "records": dict(router.totals),
            "redis_records_written": sum(r.written for r in sink.reports),
            "redis_series_points": sink.total("series_points_written"),
            "redis_cluster_points": sink.total("cluster_points_written"),
            "redis_round_trips": sink.total("round_trips"),
            "redis_keys": redis_keys,
            "redis_writes_per_s": round(sum(r.written for r in sink.reports) / sink.seconds)
            if sink.seconds
            else None,
            "redis_round_trips_per_batch": round(sink.total("round_trips") / len(sink.reports), 1)
            if sink.reports
            else 0,
            # The sink keeps up when it takes a small share of each batch (it runs inside it).
            "sink_share_of_batch_time": round(sink.seconds * 1000 / sum(durations), 3) if durations else None,
            "redis_alerts_stream": client.xlen(keys.alerts_stream()),
        }
        print(
            f"query: {read:,} events ({scanned:,} rows scanned) in {len(durations)} "
            f"micro-batches, {wall:.1f} s wall: "
            f"{figures['events_per_s']:,} events/s end to end; batch ms p50 "
            f"{figures['batch_ms_p50']} max {figures['batch_ms_max']}"
        )
        print(f"outputs: {dict(router.totals)}")
        print(
            f"redis: {figures['redis_records_written']:,} records written "
            f"({figures['redis_series_points']:,} series points, "
            f"{figures['redis_cluster_points']} cluster points) in {figures['redis_round_trips']} "
            f"round trips, {sink.seconds:.1f} s in the sink; {redis_keys:,} keys under {prefix}"
        )
        print(
            f"redis sink: {figures['redis_writes_per_s'] or 0:,} records written per second in "
            f"the sink, {figures['redis_round_trips_per_batch']} round trips per batch, "
            f"{100 * (figures['sink_share_of_batch_time'] or 0):.0f}% of the batch time"
        )
        print(json.dumps(figures))
    finally:
        if not args.keep:
            cleanup(args.bootstrap, None if args.topic else topic, client, prefix)
        client.close()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
