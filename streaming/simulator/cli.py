"""`replmon simulate`: run a scenario and write its events (files or Kafka) and its truth.

    replmon simulate [--scenario NAME] [--seed N] [--start-ms MS] [--cluster NAME]
                     [--out DIR] [--to file|kafka] [--bootstrap HOST:PORT] [--topic T]
                     [--create-topic] [--partitions N] [--replication-factor N]
                     [--scale-partitions N] [--scale-seconds S] [--scale-topics N]

Files: DIR/events/part-00000.jsonl (events in ts order) and DIR/truth.jsonl. Kafka: every event to
--topic (acks=all, key cluster/topic/partition or cluster), and DIR/truth.jsonl if --out is given.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Iterable
from pathlib import Path

from replmon.streaming.contract import METRICS_TOPIC

from . import scenarios, writers
from .events import Event
from .model import DEFAULT_START_MS, Simulation
from .scale import scale

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replmon simulate", description="Simulate a Kafka cluster's replication: events and truth."
    )
    parser.add_argument(
        "--scenario",
        default="demo",
        help=f"one of {', '.join([*scenarios.SCENARIOS, 'scale'])} (default demo)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--start-ms",
        type=int,
        default=DEFAULT_START_MS,
        help="event time of the start, ms since the epoch (default 2026-01-01T00:00:00Z)",
    )
    parser.add_argument("--cluster", help="cluster name in the events (default: the scenario's, 'sim')")
    parser.add_argument("--out", type=Path, help="output directory (events/ and truth.jsonl)")
    parser.add_argument(
        "--to", choices=("file", "kafka"), default="file", help="where events go (default file)"
    )
    parser.add_argument(
        "--bootstrap", default="localhost:9092", help="Kafka bootstrap servers (with --to kafka)"
    )
    parser.add_argument("--topic", default=METRICS_TOPIC, help=f"Kafka topic (default {METRICS_TOPIC})")
    parser.add_argument("--create-topic", action="store_true", help="create the topic first (admin client)")
    parser.add_argument(
        "--partitions", type=int, default=3, help="partitions of the created topic (default 3)"
    )
    parser.add_argument(
        "--replication-factor",
        type=int,
        default=1,
        help="replication factor of the created topic (default 1)",
    )
    parser.add_argument(
        "--scale-partitions", type=int, default=100, help="scale scenario: partitions (default 100)"
    )
    parser.add_argument("--scale-seconds", type=int, default=60, help="scale scenario: seconds (default 60)")
    parser.add_argument("--scale-topics", type=int, default=1, help="scale scenario: topics (default 1)")
    return parser


def main(argv: list[str]) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.to == "file" and args.out is None:
            parser.error("--out DIR is required with --to file")
        if args.scenario != "scale" and args.scenario not in scenarios.SCENARIOS:
            parser.error(
                f"--scenario: unknown {args.scenario!r}; known: {', '.join([*scenarios.SCENARIOS, 'scale'])}"
            )
    except SystemExit as exit_:  # usage errors (2) and --help (0) as a return code
        return int(exit_.code or 0)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)

    sim: Simulation | None = None
    if args.scenario == "scale":
        events: Iterable[Event | str] = scale(
            args.scale_partitions,
            args.scale_seconds,
            seed=args.seed,
            start_ms=args.start_ms,
            cluster=args.cluster or "sim",
            topics=args.scale_topics,
        )
    else:
        spec = scenarios.get(args.scenario)
        if args.cluster:
            spec = dataclasses.replace(spec, name=args.cluster)
        sim = Simulation(spec, seed=args.seed, start_ms=args.start_ms)
        events = sim.run()

    if args.to == "file":
        count = writers.write_events(args.out, events)
    else:
        if args.create_topic:
            writers.create_topic(args.bootstrap, args.topic, args.partitions, args.replication_factor)
        producer = writers.kafka_producer(args.bootstrap)
        try:
            count = writers.publish(events, producer, args.topic)
        finally:
            producer.close()
    truth_count = 0
    if args.out is not None:
        truth_count = writers.write_truth(args.out, sim.truth_records() if sim is not None else [])
    where = args.out if args.to == "file" else f"{args.bootstrap}/{args.topic}"
    print(
        f"scenario {args.scenario} seed {args.seed}: {count} events to {where}, {truth_count} truth records",
        file=sys.stderr,
    )
    return 0


def _main() -> None:  # `python -m replmon.streaming.simulator.cli ...`
    raise SystemExit(main(sys.argv[1:]))


if __name__ == "__main__":
    _main()
