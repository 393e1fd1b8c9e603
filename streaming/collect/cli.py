"""`replmon collect`: the request logs of a real Kafka cluster -> the metrics topic."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import replace
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from replmon.streaming.cli_flags import SwitchOrOldValue, UsageError, duration, in_unit, old_spelling
from replmon.streaming.collect.collector import ROLES, source_name
from replmon.streaming.collect.tail import MAX_LINE_BYTES
from replmon.streaming.contract import METRICS_TOPIC

if TYPE_CHECKING:  # the settings and the Kafka clients are imported when the command runs
    from replmon.streaming.collect.connect import Cluster
    from replmon.streaming.settings import Collect as CollectSettings

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`replmon collect`'s flags, in the order `--help` lists them."""
    # From --create-topic on, every flag overrides the setting of the same name in the settings'
    # collect section (a duration flag: its `_ms` setting); their defaults are stated there
    # (streaming/settings.py).
    _source_arguments(p)
    _destination_arguments(p)
    _timing_arguments(p)
    _volume_arguments(p)
    _reading_arguments(p)


def _source_arguments(p: argparse.ArgumentParser) -> None:
    """What is collected: the cluster, its request logs, and this collector's share of them."""
    p.add_argument(
        "--cluster",
        required=True,
        metavar="NAME",
        help="the cluster this command is about: its name, stamped in every event",
    )
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


def _destination_arguments(p: argparse.ArgumentParser) -> None:
    """Where the events go (the metrics topic), and where the collector keeps its checkpoint."""
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
        action=SwitchOrOldValue,
        old_flag="--partitions",
        old_dest="partitions",
        help="create the metrics topic if it is missing (collect.create_topic)",
    )
    p.add_argument(
        "--partitions",
        metavar="N",
        type=int,
        help="partitions of the metrics topic --create-topic creates (collect.partitions, default 3)",
    )
    p.add_argument(
        "--state-dir",
        metavar="DIR",
        help="checkpoint folder (collect.state_dir, default ./replmon-collect-state)",
    )


def _timing_arguments(p: argparse.ArgumentParser) -> None:
    """How long events are held, how often heartbeats and metadata go out, when to give up."""
    p.add_argument(
        "--hold",
        metavar="DURATION",
        type=duration,
        help="how long events wait to be released in event-time order (collect.hold_ms, default 1500ms)",
    )
    old_spelling(p, "--hold-ms", "--hold", type=in_unit("ms"))
    p.add_argument(
        "--silent-hold",
        metavar="DURATION",
        type=duration,
        help="how long the release waits for a silent leader whose port still accepts "
        "connections, whose parked requests come when it runs again; delays every event "
        "meanwhile (collect.silent_hold_ms, default 0: off)",
    )
    p.add_argument(
        "--heartbeat-interval",
        metavar="DURATION",
        type=duration,
        help="how often a heartbeat event is sent (collect.heartbeat_interval_ms, default 1s)",
    )
    old_spelling(p, "--heartbeat-ms", "--heartbeat-interval", type=in_unit("ms"))
    p.add_argument(
        "--metadata-interval",
        metavar="DURATION",
        type=duration,
        help="Admin API poll interval (collect.metadata_interval_ms, default 1s)",
    )
    old_spelling(p, "--metadata-ms", "--metadata-interval", type=in_unit("ms"))
    p.add_argument(
        "--publish-timeout",
        metavar="DURATION",
        type=duration,
        help="give up (exit 3) when the metrics topic takes nothing for this long "
        "(collect.publish_timeout_ms, default 60s)",
    )
    old_spelling(p, "--publish-timeout-s", "--publish-timeout", type=in_unit("s"))


def _volume_arguments(p: argparse.ArgumentParser) -> None:
    """How much is read, sent and held: the line bound, the compaction, the session form."""
    p.add_argument(
        "--max-line-bytes",
        metavar="BYTES",
        type=int,
        help="skip (and count) request-log lines longer than this "
        f"(collect.max_line_bytes, default {MAX_LINE_BYTES})",
    )
    p.add_argument(
        "--no-compact",
        action="store_true",
        help="no lossless compaction of caught-up fetches and appends (collect.compact = false); "
        "with --no-session-form too, every event is sent",
    )
    form = p.add_mutually_exclusive_group()
    form.add_argument(
        "--session-form",
        action="store_true",
        help="publish each fetch session's reads as `session` events (at most one per session per "
        "resolution) and a partition's own fetches only when its picture changes "
        "(collect.session_form, the default; docs/events.md)",
    )
    form.add_argument(
        "--no-session-form",
        action="store_true",
        help="a fetch event for every read of every partition that compaction keeps, no `session` "
        "events (collect.session_form = false)",
    )
    p.add_argument(
        "--compact-resolution",
        metavar="DURATION",
        type=duration,
        help="at most one caught-up fetch per replica (and one append per partition) per DURATION "
        "during a run (collect.compact_resolution_ms; default, by each partition's "
        "replica.lag.time.max.ms L: L / 8 up to 1s, and L / 10 up to 3s above L = 10s, so 1s at "
        "L = 10s and 3s at Kafka's default 30s; never above L / 4; above 1s, one fetch per broker "
        "per second still goes out, docs/real-cluster.md)",
    )
    old_spelling(p, "--compact-resolution-ms", "--compact-resolution", type=in_unit("ms"))
    p.add_argument(
        "--max-held", metavar="N", type=int, help="bound on events waiting for release (collect.max_held)"
    )


def _reading_arguments(p: argparse.ArgumentParser) -> None:
    """How the request log's lines are read: their time zone, and which topics are reported."""
    p.add_argument(
        "--log-timezone",
        metavar="ZONE",
        help="time zone of the request log's dates when they are not epoch ms "
        "(collect.log_timezone, default UTC)",
    )
    p.add_argument(
        "--exclude-topic",
        action="append",
        metavar="NAME",
        help="do not report this topic (repeatable; collect.exclude_topics)",
    )
    p.add_argument(
        "--include-internal", action="store_true", help="also report __* topics (collect.include_internal)"
    )


# flag dest -> the collect setting it overrides
FLAG_SETTINGS = {
    "create_topic": "create_topic",
    "partitions": "partitions",
    "state_dir": "state_dir",
    "hold": "hold_ms",
    "silent_hold": "silent_hold_ms",
    "heartbeat_interval": "heartbeat_interval_ms",
    "metadata_interval": "metadata_interval_ms",
    "publish_timeout": "publish_timeout_ms",
    "max_line_bytes": "max_line_bytes",
    "compact_resolution": "compact_resolution_ms",
    "max_held": "max_held",
    "log_timezone": "log_timezone",
    "exclude_topic": "exclude_topics",
    "include_internal": "include_internal",
    "session_form": "session_form",
}


def collect_settings(args, section: CollectSettings) -> CollectSettings:
    """The settings' collect section with the flags given on top (a flag not given: None or
    False). A flag's bad value is a usage error naming the flag."""
    from pydantic import ValidationError

    given = {setting: getattr(args, dest) for dest, setting in FLAG_SETTINGS.items()}
    given = {k: v for k, v in given.items() if v is not None and v is not False}
    if args.no_compact:
        given["compact"] = False
    if args.no_session_form:
        given["session_form"] = False
    try:
        return type(section).model_validate({**section.model_dump(), **given})
    except ValidationError as exc:
        raise UsageError("; ".join(_flag_problem(e) for e in exc.errors())) from None


def _flag_problem(error) -> str:
    """A bad collect setting given by a flag, named as the flag (`--publish-timeout`)."""
    setting = str(error["loc"][0])
    flag = next(("--" + d.replace("_", "-") for d, s in FLAG_SETTINGS.items() if s == setting), setting)
    unit = " ms" if setting.endswith("_ms") and "than" in error["msg"] else ""
    return f"{flag}: {error['msg'].replace('Input should be', 'must be')}{unit}"


def request_logs(specs: list[str]) -> dict[int, str]:
    out = {}
    for spec in specs:
        broker, sep, path = spec.partition("=")
        if not sep or not broker.isdigit() or not path:
            raise UsageError(f"--request-log wants BROKER=PATH, not {spec!r}")
        out[int(broker)] = path
    return out


def topic_filter(conf: CollectSettings, metrics_topic: str):
    excluded = set(conf.exclude_topics) | {metrics_topic}

    def wanted(topic: str) -> bool:
        return topic not in excluded and (conf.include_internal or not topic.startswith("__"))

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

    settings = load_settings(args.config)
    conf = collect_settings(args, settings.collect)
    try:
        tz = ZoneInfo(conf.log_timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"--log-timezone {conf.log_timezone!r} is not a time zone") from None
    logs = request_logs(args.request_log)
    if (args.role == "cluster") != (not logs):
        raise UsageError(
            "--role cluster reads no request log" if logs else f"--role {args.role} wants --request-log"
        )
    metrics_bootstrap, args.metrics_topic = metrics_destination(args, settings)
    monitored, metrics = clusters(args, settings, metrics_bootstrap)
    try:
        return collect(args, conf, logs, tz, monitored, metrics)
    except PreflightError as exc:  # a cluster refused or did not answer: one line, exit 2
        raise UsageError(str(exc)) from None


def collect(
    args, conf: CollectSettings, logs: dict[int, str], tz: ZoneInfo, monitored: Cluster, metrics: Cluster
) -> int:
    """Connect to both clusters, then collect until stopped: the exit code (docs/cli.md; 3: the
    metrics cluster did not answer, or the metrics topic failed; 4: fenced by another instance)."""
    from replmon.streaming.collect.publish import PublishError

    logging.getLogger("kafka").setLevel(logging.WARNING)
    if conf.create_topic:
        ensure_topic(metrics, args.metrics_topic, conf.partitions, args.verbose)
    wanted = topic_filter(conf, args.metrics_topic)
    admin = admin_view(args, monitored, wanted)
    try:
        publisher = metrics_publisher(args, conf, logs, metrics)
    except PublishError as e:
        print(f"replmon collect: {e}", file=sys.stderr)
        return 3
    collector = build_collector(args, conf, logs, tz, admin, publisher, wanted)
    rc = collect_until_stopped(collector, conf.state_dir)
    log.info("collect stopped: %s", collector.counts())
    publisher.close(abandon=rc == 3)
    return rc


def admin_view(args, monitored: Cluster, wanted):
    """The monitored cluster's Admin API, polled for the topics `wanted` (metadata, brokers)."""
    from kafka.admin import KafkaAdminClient

    from replmon.streaming.collect.admin import AdminView
    from replmon.streaming.collect.connect import connected

    return AdminView(
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


def metrics_publisher(args, conf: CollectSettings, logs: dict[int, str], metrics: Cluster):
    """The producer to the metrics topic. One writer per source: a per-broker or cluster-role
    collector publishes in transactions under a fixed id, so a second instance (a failover, a
    zombie) fences the first. Raises PublishError when the topic cannot be reached."""
    from replmon.streaming.collect.connect import connected
    from replmon.streaming.collect.publish import Publisher

    txn = None if args.role == "all" else f"replmon-collect.{source_name(args.cluster, args.role, logs)}"
    return connected(
        lambda **kw: Publisher(
            metrics.bootstrap,
            args.metrics_topic,
            kw,
            timeout_s=conf.publish_timeout_ms / 1000,
            transactional_id=txn,
        ),
        metrics,
        verbose=args.verbose,
    )


def build_collector(
    args, conf: CollectSettings, logs: dict[int, str], tz: ZoneInfo, admin, publisher, wanted
):
    """The collector of this role, with the collect settings."""
    from replmon.streaming.collect.collector import Collector
    from replmon.streaming.collect.compact import RESOLUTION_CAP_MS, Compactor
    from replmon.streaming.collect.sessions import SessionForm

    return Collector(
        args.cluster,
        logs,
        admin,
        publisher,
        conf.state_dir,
        role=args.role,
        hold_ms=conf.hold_ms,
        silent_hold_ms=conf.silent_hold_ms,
        heartbeat_ms=conf.heartbeat_interval_ms,
        metadata_ms=conf.metadata_interval_ms,
        max_held=conf.max_held,
        compactor=Compactor(requested_ms=conf.compact_resolution_ms) if conf.compact else None,
        session_form=(
            SessionForm(conf.compact_resolution_ms or RESOLUTION_CAP_MS, session_key=None)
            if conf.session_form
            else None
        ),
        wanted=wanted,
        tz=tz,
        max_line_bytes=conf.max_line_bytes,
    )


def collect_until_stopped(collector, state_dir: str) -> int:
    """Run the collector until a signal stops it (0), another instance fences it (4), or the
    metrics topic or the bound on held events fails it (3; its checkpoint keeps the position)."""
    from replmon.streaming.collect.publish import Fenced, PublishError
    from replmon.streaming.signals import stop_on_signals

    with stop_on_signals() as stop:
        try:
            collector.run(stop)
        except Fenced as e:
            print(f"replmon collect: {e}; this one stops", file=sys.stderr)
            return 4
        except (PublishError, OverflowError) as e:
            print(
                f"replmon collect: {e}; the checkpoint in {state_dir} keeps the position, "
                "a restart resumes from it",
                file=sys.stderr,
            )
            return 3
    return 0
