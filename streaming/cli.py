"""`replmon`: run the monitor, simulate a cluster, check conformance, manage local services."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from replmon.streaming.console import setup_logging

log = logging.getLogger(__name__)
# Development conveniences that only exist in a replmon checkout, found from the working
# directory (installed code never guesses where its source lives).
CHECKOUT_SERVICES = Path("deploy") / "local" / "services.sh"
CHECKOUT_JARS = Path("deploy") / "local" / "jars"  # where deploy/local/fetch-jars.sh puts them
# A checkpoint the state format refuses (state/codec.py), as it appears in a worker's traceback.
STATE_REFUSAL = re.compile(r"StateFormatError: ([^\n]+)")


def _common() -> argparse.ArgumentParser:
    """Options every subcommand has."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--verbose", action="store_true", help="show Spark's, py4j's and replmon's log lines (default: quiet)"
    )
    return common


def _run_parser(sub, common) -> None:
    p = sub.add_parser(
        "run", parents=[common], help="run the monitor over Kafka or files (--demo: a simulated cluster)"
    )
    p.add_argument("--config", help="TOML settings file (also REPLMON_CONFIG)")
    p.add_argument("--input", help="file or folder of JSON-lines events instead of Kafka")
    p.add_argument("--once", action="store_true", help="process what is there, then stop")
    p.add_argument("--output", help="output folder (default ./replmon-out)")
    p.add_argument("--kafka-bootstrap", help="read the metrics topic from this Kafka cluster")
    p.add_argument("--redis-url", help="also write alerts and metrics to this Redis")
    p.add_argument(
        "--demo",
        action="store_true",
        help="no input of your own: simulate a cluster with faults and monitor it",
    )
    p.add_argument("--scenario", help="simulated scenario for --demo (default: demo)")
    p.add_argument("--master", help="Spark master, e.g. spark://host:7077 (default local[2])")
    p.add_argument("--quiet", action="store_true", help="do not print the alert timeline")
    p.add_argument("--all", action="store_true", help=ALL_HELP)


ALL_HELP = (
    "print every alert transition in the timeline (default: what was notified, one line each, "
    "with each root's consequences folded under it)"
)


def build_parser() -> argparse.ArgumentParser:
    """The `replmon` command line (deployment files are checked against it: tests/test_deploy.py)."""
    parser = argparse.ArgumentParser(prog="replmon", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    common = _common()
    _run_parser(sub, common)
    from replmon.streaming.replay_cmd import add_parser as replay_parser

    replay_parser(sub, common)
    sub.add_parser("simulate", help="simulate a Kafka cluster's fetch metrics", add_help=False)
    sub.add_parser("grafana-annotations", help="alerts from Redis as Grafana annotations", add_help=False)
    conf = sub.add_parser(
        "conformance", parents=[common], help="check the rules engine against scenario files"
    )
    conf.add_argument("paths", nargs="+")
    from replmon.streaming.silence_cmd import add_parser as add_silence_parser

    add_silence_parser(sub, parents=[common])
    svc = sub.add_parser("services", parents=[common], help="local Kafka broker and Redis for development")
    svc.add_argument("action", choices=["up", "down", "status"])
    svc.add_argument("--brokers", type=int, default=1, choices=[1, 3])
    sub.add_parser("collect", help="a real cluster's request logs -> the metrics topic", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv and argv[0] == "collect":
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        from replmon.streaming.collect.cli import main as collect_main

        return collect_main(argv[1:])
    if argv and argv[0] == "simulate":
        from replmon.streaming.simulator.cli import main as simulate_main

        rest = [a for a in argv[1:] if a != "--verbose"]
        setup_logging(verbose=len(rest) < len(argv) - 1)
        return simulate_main(rest)
    if argv and argv[0] == "grafana-annotations":
        from replmon.sinks.grafana_annotation_consumer import main as annotations_main

        rest = [a for a in argv[1:] if a != "--verbose"]
        setup_logging(verbose=len(rest) < len(argv) - 1)
        return annotations_main(rest)
    args = parser.parse_args(argv)
    setup_logging(verbose=args.verbose)
    if args.command == "replay":
        from replmon.streaming.replay_cmd import run as replay_run

        return replay_run(args)
    if args.command == "conformance":
        from replmon.streaming.conformance_cmd import run

        return run(args.paths)
    if args.command == "silence":
        from replmon.streaming.silence_cmd import run as run_silence

        return run_silence(args)
    if args.command == "services":
        if not CHECKOUT_SERVICES.is_file():
            print(
                f"replmon services: run it from a replmon checkout ({CHECKOUT_SERVICES} not found "
                "in the current directory)",
                file=sys.stderr,
            )
            return 2
        return subprocess.call(["bash", str(CHECKOUT_SERVICES), args.action, "--brokers", str(args.brokers)])
    return run_command(args)


def run_command(args) -> int:
    from replmon.streaming.settings import load_settings

    overrides = {}
    if args.output:
        overrides["output_dir"] = args.output
    if args.input:
        overrides["input_path"] = args.input
    settings = load_settings(args.config, **overrides)
    if args.kafka_bootstrap:
        settings = settings.model_copy(
            update={"kafka": settings.kafka.model_copy(update={"bootstrap_servers": args.kafka_bootstrap})}
        )
    if args.redis_url:
        settings = settings.model_copy(
            update={"redis": settings.redis.model_copy(update={"url": args.redis_url})}
        )
    if args.master:
        settings = settings.model_copy(
            update={"spark": settings.spark.model_copy(update={"master": args.master})}
        )
    no_input = settings.input_path is None and settings.kafka.bootstrap_servers is None
    if args.demo or args.scenario:
        if not no_input:
            print(
                "replmon run: --demo simulates its own input; drop it, or drop input_path and "
                "kafka.bootstrap_servers",
                file=sys.stderr,
            )
            return 2
        return run_embedded(settings, args)
    if no_input:
        if not interactive():
            print(NO_INPUT, file=sys.stderr)
            return 2
        print(
            "replmon: no input configured; running the simulated demo (`replmon run --demo`). "
            "A deployment sets kafka.bootstrap_servers or input_path."
        )
        return run_embedded(settings, args)
    from replmon.streaming.preflight import PreflightError

    try:
        return run_monitor(settings, once=args.once, quiet=args.quiet, every_transition=args.all)
    except PreflightError as exc:
        print(f"replmon: {exc}", file=sys.stderr)
        return 2


NO_INPUT = (
    "replmon run: no input configured: set kafka.bootstrap_servers (--kafka-bootstrap, "
    "REPLMON_KAFKA__BOOTSTRAP_SERVERS, or [kafka] bootstrap_servers in the --config file) or "
    "input_path (--input, REPLMON_INPUT_PATH). Use `replmon run --demo` for the simulated cluster."
)


def interactive() -> bool:
    """A person at a terminal (who may just be trying replmon), not a service or a script."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def run_embedded(settings, args) -> int:
    """No input configured: simulate a cluster with faults and monitor it, all in-process."""
    from replmon.streaming.simulator.cli import main as simulate_main

    scenario = args.scenario or "demo"
    sim_dir = Path(tempfile.mkdtemp(prefix="replmon-sim-"))
    print(f"replmon: simulating scenario '{scenario}' into {sim_dir}")
    rc = simulate_main(["--scenario", scenario, "--out", str(sim_dir)])
    if rc != 0:
        return rc
    settings = settings.model_copy(update={"input_path": str(sim_dir / "events")})
    return run_monitor(
        settings, once=True, quiet=args.quiet, truth=sim_dir / "truth.jsonl", every_transition=args.all
    )


def run_monitor(
    settings, *, once: bool, quiet: bool = False, truth: Path | None = None, every_transition: bool = False
) -> int:
    from replmon.streaming import preflight
    from replmon.streaming.bridge import OutputRouter
    from replmon.streaming.cluster_state import ClusterStepRunner
    from replmon.streaming.checkpoint import with_checkpoint_buckets
    from replmon.streaming.query import start_query
    from replmon.streaming.session import build_session
    from replmon.streaming.sources import file_source, kafka_options, kafka_source
    from replmon.streaming.supervise import Supervisor

    settings = with_checkpoint_buckets(settings)
    redis_sink = silences = alertmanager = None
    if settings.redis.url is not None:
        from replmon.sinks.silences import SilenceStore
        from replmon.streaming.redis_out import build_redis_sink

        redis_sink = build_redis_sink(settings.redis)
        # redis.url never holds a password (RedisConnectionSettings refuses one)
        preflight.check_redis(redis_sink.client, settings.redis.prefix, settings.redis.url)
        silences = SilenceStore(redis_sink.client, settings.redis.prefix)
    if settings.alertmanager.url is not None:
        from replmon.streaming.alertmanager_out import build_alertmanager_sink

        alertmanager = build_alertmanager_sink(settings.alertmanager)
        if redis_sink is not None:  # what a previous run notified and is still firing
            firing = redis_sink.client.hvals(redis_sink.keys.alerts_notify_firing())
            alertmanager.restore(json.loads(v) for v in firing)
    spark_conf = settings.spark
    if not settings.input_path and not spark_conf.jars:
        spark_conf = spark_conf.model_copy(update={"jars": local_kafka_jars()})
    spark = build_session(spark_conf)
    if settings.input_path:
        source = file_source(spark, settings.input_path, settings.spark.max_files_per_trigger)
    else:
        preflight.check_kafka(
            spark,
            kafka_options(settings.kafka),
            settings.kafka.subscribe if not settings.kafka.subscribe_pattern else None,
            settings.kafka.startup_timeout_ms,
        )
        source = kafka_source(spark, settings.kafka)
    router = OutputRouter(
        settings.output_dir if settings.write_files else None,
        redis_sink,
        alertmanager=alertmanager,
        silences=silences,
        cluster_step=ClusterStepRunner(settings.monitor_config(), settings.checkpoint_dir),
    )
    outlets = monitor_outlets(settings, redis_sink, alertmanager)
    if alertmanager is not None:
        alertmanager.start()
    try:
        with stop_on_signals() as stop:
            supervisor = Supervisor(
                lambda: start_query(spark, source, settings, router, once=once, name=QUERY_NAME),
                settings.supervise,
                name=QUERY_NAME,
                once=once,
                stop=stop,
                outlets=outlets,
                fatal=checkpoint_refusal(settings),
            )
            rc = supervisor.run()
        if once and rc == 0 and not supervisor.report.fatal:
            router.flush()  # the input has ended: what the cluster step still holds is decided
    finally:
        if alertmanager is not None:
            alertmanager.close()
    if supervisor.report.fatal:
        print(f"replmon: {supervisor.report.fatal}", file=sys.stderr)
        return 2
    print(
        f"replmon: outputs in {settings.output_dir}: "
        + ", ".join(f"{k} {v}" for k, v in sorted(router.totals.items()))
        + (
            f"; the query was restarted {supervisor.report.restarts} times"
            if supervisor.report.restarts
            else ""
        )
    )
    if not quiet and settings.write_files:
        print_timeline(Path(settings.output_dir) / "alerts", every_transition=every_transition)
    return rc


QUERY_NAME = "replmon"


def checkpoint_refusal(settings):
    """A failure no restart can mend: the checkpoint's state is in a format this replmon refuses
    (state/codec.py). Returns the message to exit with, or None (then the query is restarted)."""

    def fatal(exc: BaseException) -> str | None:
        refusal = STATE_REFUSAL.search(str(exc))
        if refusal is None:
            return None
        return f"cannot continue from the checkpoint {settings.checkpoint_dir}: {refusal.group(1)}"

    return fatal


def monitor_outlets(settings, redis_sink, alertmanager):
    """Where the supervisor's heartbeat and MonitorLagging transitions go: Redis and
    Alertmanager when configured; the alerts also to the alerts folder, like the query's own."""
    from replmon.streaming.supervise import Outlets

    writer = None
    if redis_sink is not None:
        from replmon.streaming.redis_out import build_heartbeat_writer

        writer = build_heartbeat_writer(settings.redis, settings.supervise, redis_sink.client)

    def heartbeat(hb) -> None:
        if writer is not None:
            writer.write(hb.query, hb.as_fields())

    def alert(record: dict) -> None:
        if settings.write_files:
            write_monitor_alert(Path(settings.output_dir) / "alerts", record)
        if redis_sink is not None:
            redis_sink.write_batch(-1, [record], [], [], [])
        if alertmanager is not None:
            alertmanager.send([record])

    return Outlets(heartbeat=heartbeat, alert=alert)


def write_monitor_alert(folder: Path, record: dict) -> None:
    """One file per transition, named by its id and status: writing it again changes nothing."""
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"monitor-{record['alert_id']}-{record['status']}.jsonl"
    tmp = folder / f".{final.name}.tmp"
    tmp.write_text(json.dumps(record, sort_keys=True) + "\n")
    os.replace(tmp, final)


@contextlib.contextmanager
def stop_on_signals():
    """SIGINT and SIGTERM set the yielded event, so that a running query is stopped cleanly.
    pyspark's own SIGINT handler calls into the JVM from inside the py4j call the main thread
    is blocked in (awaitTermination), which breaks that py4j connection."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in signals}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def local_kafka_jars() -> list[str]:
    """spark.jars for a Kafka input when none are set: pyspark ships no Kafka source, and jars
    must be on the session before it starts. Uses what deploy/local/fetch-jars.sh fetched, when
    run from a checkout."""
    from replmon.streaming.settings import SettingsError

    if connector_installed():
        return []
    jars = sorted(str(p.resolve()) for p in CHECKOUT_JARS.glob("*.jar"))
    if not jars:
        raise SettingsError(
            "replmon: reading Kafka needs Spark's Kafka connector jars: set spark.jars (e.g. "
            "REPLMON_SPARK__JARS='[\"/path/spark-sql-kafka-0-10_2.13-X.jar\", ...]'), or run "
            f"deploy/local/fetch-jars.sh in a checkout and run replmon from there ({CHECKOUT_JARS})"
        )
    log.info("spark.jars not set: using the Kafka connector jars in %s", CHECKOUT_JARS.resolve())
    return jars


def connector_installed() -> bool:
    """The Kafka connector is already in pyspark's own jars folder (replmon's image puts it
    there: deploy/docker/Dockerfile), so it is on every classpath without spark.jars."""
    from pyspark.find_spark_home import _find_spark_home

    return any((Path(_find_spark_home()) / "jars").glob("spark-sql-kafka-0-10_*.jar"))


def print_timeline(alerts_dir: Path, out=None, every_transition: bool = False) -> None:
    """The alerts in event-time order: what was notified, one line each, with each root's
    consequences folded under it (streaming/timeline.py); every transition with `--all`."""
    from replmon.streaming.timeline import timeline_lines, transition_line

    out = out or sys.stdout
    rows = []
    for f in sorted(alerts_dir.glob("*.jsonl")):
        rows += [json.loads(line) for line in f.read_text().splitlines() if line]
    if every_transition:
        rows.sort(key=lambda r: (r["ts"], r["status"] != "resolved", r["subject"], r["name"]))
        print(f"\nAlert timeline ({len(rows)} transitions)", file=out)
        for r in rows:
            print(transition_line(r), file=out)
        return
    print(f"\nAlert timeline ({len(rows)} transitions; --all lists each)", file=out)
    for line in timeline_lines(rows):
        print(line, file=out)


if __name__ == "__main__":
    sys.exit(main())
