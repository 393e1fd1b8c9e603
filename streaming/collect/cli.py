"""`replmon collect`: the request logs of a real Kafka cluster -> the metrics topic."""

from __future__ import annotations

import argparse
import logging
import sys
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

log = logging.getLogger(__name__)
DEFAULT_TOPIC = "replmon.fetch-metrics"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="replmon collect", description=__doc__)
    p.add_argument("--cluster", required=True, help="the cluster's name in every event")
    p.add_argument("--bootstrap", required=True, help="the monitored cluster (Admin API)")
    p.add_argument(
        "--request-log",
        action="append",
        required=True,
        metavar="BROKER=PATH",
        help="a broker id and its kafka-request.log (repeat per broker)",
    )
    p.add_argument("--metrics-bootstrap", help="where the metrics topic lives (default: --bootstrap)")
    p.add_argument("--metrics-topic", default=DEFAULT_TOPIC)
    p.add_argument(
        "--create-topic",
        type=int,
        default=0,
        metavar="PARTITIONS",
        help="create the metrics topic with this many partitions if it is missing",
    )
    p.add_argument("--state-dir", default="replmon-collect-state", help="checkpoint folder")
    p.add_argument(
        "--hold-ms", type=int, default=1500, help="how long events wait to be released in event-time order"
    )
    p.add_argument("--heartbeat-ms", type=int, default=1000)
    p.add_argument("--metadata-ms", type=int, default=1000, help="Admin API poll interval")
    p.add_argument(
        "--publish-timeout-s",
        type=float,
        default=60.0,
        help="give up (exit 3) when the metrics topic takes nothing for this long",
    )
    p.add_argument("--max-held", type=int, default=1_000_000, help="bound on events waiting for release")
    p.add_argument(
        "--log-timezone",
        default="UTC",
        help="time zone of the request log's dates when they are not epoch ms",
    )
    p.add_argument("--exclude-topic", action="append", default=[])
    p.add_argument("--include-internal", action="store_true", help="also report __* topics")
    return p


def request_logs(specs: list[str]) -> dict[int, str]:
    out = {}
    for spec in specs:
        broker, sep, path = spec.partition("=")
        if not sep or not broker.isdigit() or not path:
            raise SystemExit(f"replmon collect: --request-log wants BROKER=PATH, not {spec!r}")
        out[int(broker)] = path
    return out


def topic_filter(args):
    excluded = set(args.exclude_topic) | {args.metrics_topic}

    def wanted(topic: str) -> bool:
        return topic not in excluded and (args.include_internal or not topic.startswith("__"))

    return wanted


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        if topic not in admin.list_topics():
            admin.create_topics([NewTopic(topic, partitions, -1)])
            log.info("created the metrics topic %s (%d partitions)", topic, partitions)
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        tz = ZoneInfo(args.log_timezone)
    except (ZoneInfoNotFoundError, ValueError):
        print(f"replmon collect: --log-timezone {args.log_timezone!r} is not a time zone", file=sys.stderr)
        return 2
    logs = request_logs(args.request_log)
    from kafka.admin import KafkaAdminClient

    from replmon.streaming.collect.admin import AdminView
    from replmon.streaming.collect.collector import Collector
    from replmon.streaming.collect.publish import Publisher, PublishError
    from replmon.streaming.signals import stop_on_signals

    metrics_bootstrap = args.metrics_bootstrap or args.bootstrap
    if args.create_topic:
        ensure_topic(metrics_bootstrap, args.metrics_topic, args.create_topic)
    wanted = topic_filter(args)
    logging.getLogger("kafka").setLevel(logging.WARNING)
    admin = AdminView(
        KafkaAdminClient(bootstrap_servers=args.bootstrap.split(","), request_timeout_ms=5000),
        args.cluster,
        wanted,
    )
    publisher = Publisher(metrics_bootstrap, args.metrics_topic, timeout_s=args.publish_timeout_s)
    collector = Collector(
        args.cluster,
        logs,
        admin,
        publisher,
        args.state_dir,
        hold_ms=args.hold_ms,
        heartbeat_ms=args.heartbeat_ms,
        metadata_ms=args.metadata_ms,
        max_held=args.max_held,
        wanted=wanted,
        tz=tz,
    )
    rc = 0
    with stop_on_signals() as stop:
        try:
            collector.run(stop)
        except (PublishError, OverflowError) as e:
            print(
                f"replmon collect: {e}; the checkpoint in {args.state_dir} keeps the position, "
                "a restart resumes from it",
                file=sys.stderr,
            )
            rc = 3
    log.info("collect stopped: %s", collector.counts())
    publisher.close()
    return rc
