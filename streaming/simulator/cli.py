"""`replmon simulate`: run a scenario and write its events (files or Kafka) and its truth.

    replmon simulate [--scenario NAME] [--seed N] [--start TIME] [--cluster NAME]
                     [--output DIR] [--to file|kafka] [--metrics-bootstrap HOST:PORT]
                     [--metrics-topic NAME] [--create-topic] [--partitions N] [--replication-factor N]
                     [--scale-partitions N] [--scale-duration DURATION] [--scale-topics N]

Files: DIR/events/part-00000.jsonl (events in ts order) and DIR/truth.jsonl. Kafka: every event to
the metrics topic (acks=all, key cluster/topic/partition or cluster), and DIR/truth.jsonl if
--output is given. The flags are declared here and parsed by `replmon`'s one parser
(streaming/cli.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from replmon.streaming.cli_flags import UsageError, duration, in_unit, old_spelling
from replmon.streaming.contract import METRICS_TOPIC

if TYPE_CHECKING:
    from .events import Event
    from .model import Simulation

log = logging.getLogger(__name__)

DEFAULT_BOOTSTRAP = "localhost:9092"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`replmon simulate`'s flags, in the order `--help` lists them."""
    _scenario_arguments(parser)
    _output_arguments(parser)
    _kafka_arguments(parser)
    _scale_arguments(parser)


def _scenario_arguments(parser: argparse.ArgumentParser) -> None:
    """What is simulated: the scenario, its randomness, its start and its cluster's name."""
    parser.add_argument(
        "--scenario",
        default="demo",
        metavar="NAME",
        # the names are scenarios.SCENARIOS; not imported here, as that imports numpy, and every
        # `replmon` subcommand builds this parser
        help="a scenario of docs/simulator.md, or scale (default demo)",
    )
    parser.add_argument("--seed", metavar="N", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--start",
        metavar="TIME",
        type=instant,
        default=None,
        help="event time of the start: ISO-8601 (UTC unless an offset is given) or ms since the "
        "epoch, as replay's --from (default 2026-01-01T00:00:00Z)",
    )
    old_spelling(parser, "--start-ms", "--start", type=int)
    parser.add_argument(
        "--cluster",
        metavar="NAME",
        help="the cluster this command is about: its name in the events (default: the scenario's, 'sim')",
    )


def _output_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the events and the truth go: files, or the metrics topic."""
    parser.add_argument("--output", type=Path, metavar="DIR", help="output folder (events/ and truth.jsonl)")
    old_spelling(parser, "--out", "--output")
    parser.add_argument(
        "--to", choices=("file", "kafka"), default="file", help="where events go (default file)"
    )


def _kafka_arguments(parser: argparse.ArgumentParser) -> None:
    """With --to kafka: the metrics topic, and the topic --create-topic creates."""
    parser.add_argument(
        "--metrics-bootstrap",
        metavar="HOST:PORT",
        help="with --to kafka: the Kafka cluster that holds the metrics topic (default: the settings' "
        f"kafka.bootstrap_servers, else {DEFAULT_BOOTSTRAP})",
    )
    old_spelling(parser, "--bootstrap", "--metrics-bootstrap")
    parser.add_argument(
        "--metrics-topic",
        metavar="NAME",
        help=f"with --to kafka: the metrics topic (default: kafka.subscribe, {METRICS_TOPIC})",
    )
    old_spelling(parser, "--topic", "--metrics-topic")
    parser.add_argument("--create-topic", action="store_true", help="create the topic first (admin client)")
    parser.add_argument(
        "--partitions", metavar="N", type=int, default=3, help="partitions of the created topic (default 3)"
    )
    parser.add_argument(
        "--replication-factor",
        metavar="N",
        type=int,
        default=1,
        help="replication factor of the created topic (default 1)",
    )


def _scale_arguments(parser: argparse.ArgumentParser) -> None:
    """The size of the `scale` scenario."""
    parser.add_argument(
        "--scale-partitions",
        metavar="N",
        type=int,
        default=100,
        help="scale scenario: partitions (default 100)",
    )
    parser.add_argument(
        "--scale-duration",
        metavar="DURATION",
        type=duration,
        default=60_000,
        help="scale scenario: event time simulated, whole seconds (default 60s)",
    )
    old_spelling(parser, "--scale-seconds", "--scale-duration", type=in_unit("s"))
    parser.add_argument(
        "--scale-topics", metavar="N", type=int, default=1, help="scale scenario: topics (default 1)"
    )


def instant(text: str) -> int:
    """argparse type of a TIME flag: ms since the epoch, from ISO-8601 or ms (replay's --from)."""
    from replmon.streaming.replay_window import WindowError, parse_time_ms

    try:
        return parse_time_ms(text, "--start")
    except WindowError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--start: ")) from None


def metrics_destination(args) -> tuple[str, str]:
    """With --to kafka: (bootstrap, topic), from the flags, else the settings' kafka section (the
    cluster and topic `replmon run` reads), else the local defaults."""
    from replmon.streaming.settings import load_settings

    kafka = load_settings(args.config).kafka
    return (
        args.metrics_bootstrap or kafka.bootstrap_servers or DEFAULT_BOOTSTRAP,
        args.metrics_topic or kafka.subscribe or METRICS_TOPIC,
    )


def run(args) -> int:
    """`replmon simulate`, on arguments parsed by `replmon`'s parser."""
    from . import scenarios, writers
    from .model import DEFAULT_START_MS, Simulation
    from .scale import scale

    start_ms = DEFAULT_START_MS if args.start is None else args.start
    if args.to == "file" and args.output is None:
        raise UsageError("--output DIR is required with --to file")
    if args.scale_duration < 1000 or args.scale_duration % 1000:
        raise UsageError(f"--scale-duration takes whole seconds (e.g. 60s), not {args.scale_duration} ms")
    if args.scenario != "scale" and args.scenario not in scenarios.SCENARIOS:
        raise UsageError(
            f"--scenario: unknown {args.scenario!r}; known: {', '.join([*scenarios.SCENARIOS, 'scale'])}"
        )
    # with --to file nothing in the settings applies, but a --config given is still read and checked
    bootstrap, topic = metrics_destination(args) if args.to == "kafka" or args.config else ("", "")
    logging.getLogger("kafka").setLevel(logging.WARNING)

    sim: Simulation | None = None
    if args.scenario == "scale":
        events: Iterable[Event | str] = scale(
            args.scale_partitions,
            args.scale_duration // 1000,
            seed=args.seed,
            start_ms=start_ms,
            cluster=args.cluster or "sim",
            topics=args.scale_topics,
        )
    else:
        spec = scenarios.get(args.scenario)
        if args.cluster:
            spec = dataclasses.replace(spec, name=args.cluster)
        sim = Simulation(spec, seed=args.seed, start_ms=start_ms)
        events = sim.run()

    if args.to == "file":
        count = writers.write_events(args.output, events)
    else:
        if args.create_topic:
            writers.create_topic(bootstrap, topic, args.partitions, args.replication_factor)
        producer = writers.kafka_producer(bootstrap)
        try:
            count = writers.publish(events, producer, topic)
        finally:
            producer.close()
    truth_count = 0
    if args.output is not None:
        truth_count = writers.write_truth(args.output, sim.truth_records() if sim is not None else [])
    where = args.output if args.to == "file" else f"{bootstrap}/{topic}"
    print(
        f"scenario {args.scenario} seed {args.seed}: {count} events to {where}, {truth_count} truth records",
        file=sys.stderr,
    )
    return 0
