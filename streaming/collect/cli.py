"""`replmon collect`: the request logs of a real Kafka cluster -> the metrics topic."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import replace
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from replmon.streaming.cli_flags import UsageError
from replmon.streaming.collect.collector import ROLES, source_name
from replmon.streaming.collect.tail import MAX_LINE_BYTES
from replmon.streaming.contract import METRICS_TOPIC

if TYPE_CHECKING:  # the settings and the Kafka clients are imported when the command runs
    from replmon.streaming.collect.connect import Cluster

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", required=True, metavar="NAME", help="the cluster's name in every event")
    p.add_argument(
        "--bootstrap", required=True, metavar="HOST:PORT", help="the monitored cluster (Admin API)"
    )
    p.add_argument(
        "--request-log",
        action="append",
        default=[],
        metavar="BROKER=PATH",
        help="a broker id and its kafka-request.log (repeat per broker; none with --role cluster)",
    )
    p.add_argument(
        "--role",
        choices=ROLES,
        default="all",
        help="all: everything (one collector per cluster); broker: only the request logs given "
        "(one per broker host); cluster: only the Admin API's events and the heartbeats (one "
        "per cluster; a second one fences the first)",
    )
    p.add_argument(
        "--metrics-bootstrap",
        metavar="HOST:PORT",
        help="the Kafka cluster that holds the metrics topic (default: the settings' "
        "kafka.bootstrap_servers, else --bootstrap)",
    )
    p.add_argument(
        "--metrics-topic",
        metavar="NAME",
        help=f"the metrics topic (default: the settings' kafka.subscribe, {METRICS_TOPIC})",
    )
    p.add_argument(
        "--create-topic",
        type=int,
        default=0,
        metavar="PARTITIONS",
        help="create the metrics topic with this many partitions if it is missing",
    )
    p.add_argument(
        "--state-dir",
        default="replmon-collect-state",
        metavar="DIR",
        help="checkpoint folder (default ./replmon-collect-state)",
    )
    p.add_argument(
        "--hold-ms",
        metavar="MS",
        type=int,
        default=1500,
        help="how long events wait to be released in event-time order",
    )
    p.add_argument(
        "--heartbeat-ms",
        metavar="MS",
        type=int,
        default=1000,
        help="how often a heartbeat event is sent (default 1000)",
    )
    p.add_argument("--metadata-ms", metavar="MS", type=int, default=1000, help="Admin API poll interval")
    p.add_argument(
        "--publish-timeout-s",
        metavar="SECONDS",
        type=float,
        default=60.0,
        help="give up (exit 3) when the metrics topic takes nothing for this long (default 60)",
    )
    p.add_argument(
        "--max-line-bytes",
        metavar="BYTES",
        type=int,
        default=MAX_LINE_BYTES,
        help=f"skip (and count) request-log lines longer than this (default {MAX_LINE_BYTES})",
    )
    p.add_argument(
        "--no-compact",
        action="store_true",
        help="send every event: no lossless compaction of caught-up fetches and appends",
    )
    p.add_argument(
        "--session-form",
        action="store_true",
        help="publish each fetch session's reads as `session` events (at most one per session per "
        "resolution) and a partition's own fetches only when its picture changes (docs/events.md)",
    )
    p.add_argument(
        "--compact-resolution-ms",
        metavar="MS",
        type=int,
        default=None,
        help="at most one caught-up fetch per replica (and one append per partition) per MS "
        "during a run (default: replica.lag.time.max.ms / 8, at most 1000; never above L / 4; "
        "above 1000, one fetch per broker per second still goes out, docs/real-cluster.md)",
    )
    p.add_argument(
        "--max-held", metavar="N", type=int, default=1_000_000, help="bound on events waiting for release"
    )
    p.add_argument(
        "--log-timezone",
        metavar="ZONE",
        default="UTC",
        help="time zone of the request log's dates when they are not epoch ms",
    )
    p.add_argument(
        "--exclude-topic",
        action="append",
        default=[],
        metavar="NAME",
        help="do not report this topic (repeatable)",
    )
    p.add_argument("--include-internal", action="store_true", help="also report __* topics")


def request_logs(specs: list[str]) -> dict[int, str]:
    out = {}
    for spec in specs:
        broker, sep, path = spec.partition("=")
        if not sep or not broker.isdigit() or not path:
            raise UsageError(f"--request-log wants BROKER=PATH, not {spec!r}")
        out[int(broker)] = path
    return out


def topic_filter(args):
    excluded = set(args.exclude_topic) | {args.metrics_topic}

    def wanted(topic: str) -> bool:
        return topic not in excluded and (args.include_internal or not topic.startswith("__"))

    return wanted


def ensure_topic(metrics: Cluster, topic: str, partitions: int, verbose: bool = False) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    from replmon.streaming.collect.connect import connected

    admin = connected(
        lambda **kw: KafkaAdminClient(bootstrap_servers=metrics.bootstrap.split(","), **kw),
        metrics,
        verbose=verbose,
    )
    try:
        if topic not in admin.list_topics():
            admin.create_topics([NewTopic(topic, partitions, -1)])
            log.info("created the metrics topic %s (%d partitions)", topic, partitions)
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()


def metrics_destination(args, settings) -> tuple[str, str]:
    """Where the events go: (bootstrap, topic). The flags, else the settings' kafka section (the
    cluster and topic `replmon run` reads), else the monitored cluster and the default topic."""
    bootstrap = args.metrics_bootstrap or settings.kafka.bootstrap_servers or args.bootstrap
    return bootstrap, args.metrics_topic or settings.kafka.subscribe or METRICS_TOPIC


def clusters(args, settings, metrics_bootstrap: str) -> tuple[Cluster, Cluster]:
    """(monitored, metrics): each cluster with its settings section's client options,
    `monitored.*` and `kafka.*`. A metrics topic on the monitored cluster (no --metrics-bootstrap,
    no kafka.bootstrap_servers) is reached with the monitored cluster's."""
    from replmon.streaming.collect.connect import cluster

    monitored = cluster("the monitored cluster", args.bootstrap, "--bootstrap", settings.monitored)
    if args.metrics_bootstrap or settings.kafka.bootstrap_servers:
        flag = "--metrics-bootstrap" if args.metrics_bootstrap else "kafka.bootstrap_servers"
        return monitored, cluster("the metrics cluster", metrics_bootstrap, flag, settings.kafka)
    if settings.kafka.options:
        raise UsageError(
            "kafka.options are set but would not take effect: the metrics topic is on the "
            "monitored cluster (no --metrics-bootstrap or kafka.bootstrap_servers), reached with "
            "monitored.options"
        )
    return monitored, replace(monitored, role="the monitored cluster, for the metrics topic")


def run(args) -> int:
    from replmon.streaming.preflight import PreflightError
    from replmon.streaming.settings import load_settings

    try:
        tz = ZoneInfo(args.log_timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"--log-timezone {args.log_timezone!r} is not a time zone") from None
    if not args.publish_timeout_s > 0:
        raise UsageError(f"--publish-timeout-s wants seconds above 0, not {args.publish_timeout_s}")
    if args.max_line_bytes < 1:
        raise UsageError(f"--max-line-bytes wants a positive size, not {args.max_line_bytes}")
    logs = request_logs(args.request_log)
    if args.compact_resolution_ms is not None and args.compact_resolution_ms < 1:
        raise UsageError(f"--compact-resolution-ms wants a positive number, not {args.compact_resolution_ms}")
    if (args.role == "cluster") != (not logs):
        raise UsageError(
            "--role cluster reads no request log" if logs else f"--role {args.role} wants --request-log"
        )
    settings = load_settings(args.config)
    metrics_bootstrap, args.metrics_topic = metrics_destination(args, settings)
    monitored, metrics = clusters(args, settings, metrics_bootstrap)
    try:
        return collect(args, logs, tz, monitored, metrics)
    except PreflightError as exc:  # a cluster refused or did not answer: one line, exit 2
        raise UsageError(str(exc)) from None


def collect(args, logs: dict[int, str], tz: ZoneInfo, monitored: Cluster, metrics: Cluster) -> int:
    from kafka.admin import KafkaAdminClient

    from replmon.streaming.collect.admin import AdminView
    from replmon.streaming.collect.collector import Collector
    from replmon.streaming.collect.compact import RESOLUTION_CAP_MS, Compactor
    from replmon.streaming.collect.connect import connected
    from replmon.streaming.collect.publish import Fenced, Publisher, PublishError
    from replmon.streaming.collect.sessions import SessionForm
    from replmon.streaming.signals import stop_on_signals

    logging.getLogger("kafka").setLevel(logging.WARNING)
    if args.create_topic:
        ensure_topic(metrics, args.metrics_topic, args.create_topic, args.verbose)
    wanted = topic_filter(args)
    admin = AdminView(
        connected(
            lambda **kw: KafkaAdminClient(
                bootstrap_servers=monitored.bootstrap.split(","), request_timeout_ms=5000, **kw
            ),
            monitored,
            verbose=args.verbose,
        ),
        args.cluster,
        wanted,
    )
    # One writer per source: a per-broker or cluster-role collector publishes in transactions
    # under a fixed id, so a second instance (a failover, a zombie) fences the first.
    txn = None if args.role == "all" else f"replmon-collect.{source_name(args.cluster, args.role, logs)}"
    try:
        publisher = connected(
            lambda **kw: Publisher(
                metrics.bootstrap,
                args.metrics_topic,
                kw,
                timeout_s=args.publish_timeout_s,
                transactional_id=txn,
            ),
            metrics,
            verbose=args.verbose,
        )
    except PublishError as e:
        print(f"replmon collect: {e}", file=sys.stderr)
        return 3
    collector = Collector(
        args.cluster,
        logs,
        admin,
        publisher,
        args.state_dir,
        role=args.role,
        hold_ms=args.hold_ms,
        heartbeat_ms=args.heartbeat_ms,
        metadata_ms=args.metadata_ms,
        max_held=args.max_held,
        compactor=None if args.no_compact else Compactor(requested_ms=args.compact_resolution_ms),
        session_form=(
            SessionForm(args.compact_resolution_ms or RESOLUTION_CAP_MS, session_key=None)
            if args.session_form
            else None
        ),
        wanted=wanted,
        tz=tz,
        max_line_bytes=args.max_line_bytes,
    )
    rc = 0
    with stop_on_signals() as stop:
        try:
            collector.run(stop)
        except Fenced as e:
            print(f"replmon collect: {e}; this one stops", file=sys.stderr)
            rc = 4
        except (PublishError, OverflowError) as e:
            print(
                f"replmon collect: {e}; the checkpoint in {args.state_dir} keeps the position, "
                "a restart resumes from it",
                file=sys.stderr,
            )
            rc = 3
    log.info("collect stopped: %s", collector.counts())
    publisher.close(abandon=rc == 3)
    return rc
