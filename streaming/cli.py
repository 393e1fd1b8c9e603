"""`replmon`: run the monitor, simulate a cluster, check conformance, manage local services."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from replmon.streaming.cli_flags import SwitchFormatter, UsageError, add_common, old_spelling
from replmon.streaming.console import mute_py4j_for_stop, quiet_accumulator_server, setup_logging
from replmon.streaming.signals import stop_on_signals, stopped_meanwhile
from replmon.streaming.timeline import print_timeline

log = logging.getLogger(__name__)
# A development convenience that only exists in a replmon checkout, found from the working
# directory (installed code never guesses where its source lives).


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", metavar="PATH", help="file or folder of JSON-lines events instead of Kafka")
    p.add_argument("--once", action="store_true", help="process what is there, then stop")
    p.add_argument("--output", metavar="DIR", help="output folder (default ./replmon-out)")
    p.add_argument(
        "--metrics-bootstrap",
        metavar="HOST:PORT",
        help="the Kafka cluster that holds the metrics topic, which run reads (kafka.bootstrap_servers)",
    )
    old_spelling(p, "--kafka-bootstrap", "--metrics-bootstrap")
    p.add_argument(
        "--metrics-topic", metavar="NAME", help="the metrics topic, which run reads (kafka.subscribe)"
    )
    p.add_argument("--redis-url", metavar="URL", help="also write alerts and metrics to this Redis")
    p.add_argument(
        "--demo",
        action="store_true",
        help="no input of your own: simulate a cluster with faults and monitor it",
    )
    p.add_argument("--scenario", metavar="NAME", help="simulated scenario for --demo (default: demo)")
    p.add_argument("--master", metavar="URL", help="Spark master, e.g. spark://host:7077 (default local[2])")
    p.add_argument("--no-timeline", action="store_true", help="do not print the alert timeline at the end")
    old_spelling(p, "--quiet", "--no-timeline")
    p.add_argument("--all", action="store_true", help=ALL_HELP)


ALL_HELP = (
    "print every alert transition in the timeline (default: what was notified, one line each, "
    "with each root's consequences folded under it)"
)


def build_parser() -> argparse.ArgumentParser:
    """The `replmon` command line: every subcommand, one grammar (docs/cli.md, checked by
    tests/streaming/test_cli_grammar.py; deployment files by tests/test_deploy.py)."""
    parser = argparse.ArgumentParser(prog="replmon", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # in the order `replmon --help` lists them
    _monitoring_commands(sub)
    _checking_commands(sub)
    _silence_commands(sub)
    _side_commands(sub)
    _dashboards_commands(sub)
    return parser


def _command(sub, name, help, declare, handler, nested=False) -> argparse.ArgumentParser:
    """A subcommand that runs `handler`: the common flags, then the flags `declare` adds."""
    p = sub.add_parser(name, help=help, description=help, formatter_class=SwitchFormatter)
    add_common(p, inherited=nested)
    declare(p)
    p.set_defaults(handler=handler, prog=p.prog)
    return p


def _group(sub, name, help) -> argparse.ArgumentParser:
    """A subcommand with actions of its own (`silence add`): the common flags on both levels."""
    p = sub.add_parser(name, help=help, description=help)
    add_common(p)
    return p


def _monitoring_commands(sub) -> None:
    """The monitor and what feeds it: run, replay, simulate, collect."""
    from replmon.streaming.collect.cli import add_arguments as collect_arguments
    from replmon.streaming.replay_cmd import add_arguments as replay_arguments
    from replmon.streaming.simulator.cli import add_arguments as simulate_arguments

    _command(
        sub,
        "run",
        "run the monitor over Kafka or files (--demo: a simulated cluster)",
        _run_arguments,
        run_command,
    )
    _command(sub, "replay", "replay a time window, with what-if variants", replay_arguments, _replay)
    _command(sub, "simulate", "simulate a Kafka cluster's fetch metrics", simulate_arguments, _simulate)
    _command(
        sub, "collect", "a real cluster's request logs -> the metrics topic", collect_arguments, _collect
    )


def _checking_commands(sub) -> None:
    """Questions asked of the rules engine and of a live cluster: conformance, safe-to-stop."""
    from replmon.streaming import safe_to_stop, side_cmds

    _command(
        sub,
        "conformance",
        "check the rules engine against scenario files",
        side_cmds.conformance_arguments,
        side_cmds.conformance,
    )
    _command(
        sub,
        "safe-to-stop",
        "may broker N be stopped now? (a rolling restart's gate; exit 0 safe, 1 not, 2 unknown)",
        safe_to_stop.add_arguments,
        _safe_to_stop,
    )


def _silence_commands(sub) -> None:
    """`silence` and its actions (add, list, expire), each with the group's flags too."""
    from replmon.streaming import silence_cmd

    silence = _group(sub, "silence", "silence alerts: broker maintenance, an alert id, a matcher")
    silence_cmd.group_arguments(silence)
    actions = silence.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, help, declare in silence_cmd.ACTIONS:
        _command(
            actions,
            name,
            help,
            _both(partial(silence_cmd.group_arguments, inherited=True), declare),
            _silence,
            nested=True,
        )


def _side_commands(sub) -> None:
    """The development services, and the Grafana annotations side process."""
    from replmon.streaming import side_cmds

    _command(
        sub,
        "services",
        "local Kafka broker and Redis for development",
        side_cmds.services_arguments,
        side_cmds.services,
    )
    _command(
        sub,
        "grafana-annotations",
        "alerts from Redis as Grafana annotations",
        side_cmds.grafana_annotations_arguments,
        side_cmds.grafana_annotations,
    )


def _dashboards_commands(sub) -> None:
    """`dashboards build` and `dashboards publish`."""
    from replmon.streaming import side_cmds

    dashboards = _group(sub, "dashboards", "Grafana dashboards as code: build and publish them")
    boards = dashboards.add_subparsers(dest="action", required=True, metavar="ACTION")
    _command(
        boards,
        "build",
        "write the dashboards' JSON (dashboards/json)",
        side_cmds.build_arguments,
        side_cmds.build_dashboards,
        nested=True,
    )
    _command(
        boards,
        "publish",
        "publish the dashboards' JSON to Grafana (REPLMON_GRAFANA__*)",
        side_cmds.publish_arguments,
        side_cmds.publish_dashboards,
        nested=True,
    )


def main(argv: list[str] | None = None) -> int:
    """`replmon ...`: the exit code (docs/cli.md lists them per subcommand)."""
    from replmon.streaming.settings import SettingsError

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # --help (0) and usage errors (2), as a return code
        return int(exit_.code or 0)
    setup_logging(verbose=args.verbose, prog=args.prog)
    try:
        return args.handler(args)
    except (UsageError, SettingsError) as exc:
        print(f"{args.prog}: {str(exc).removeprefix('replmon: ')}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C before a command's own stop handling (streaming/signals.py)
        print(f"{args.prog}: interrupted", file=sys.stderr)
        return 130


def _both(*declares):
    """One declare function that runs each of `declares` on the parser."""

    def declare(p):
        for d in declares:
            d(p)

    return declare


def _replay(args) -> int:
    from replmon.streaming.replay_cmd import run

    return run(args)


def _simulate(args) -> int:
    from replmon.streaming.simulator.cli import run

    return run(args)


def _silence(args) -> int:
    from replmon.streaming.silence_cmd import run

    return run(args)


def _safe_to_stop(args) -> int:
    from replmon.streaming.safe_to_stop import run

    return run(args)


def _collect(args) -> int:
    from replmon.streaming.collect.cli import run

    return run(args)


def run_command(args) -> int:
    from replmon.streaming.replay_cmd import with_metrics_topic
    from replmon.streaming.settings import load_settings

    overrides = {}
    if args.output:
        overrides["output_dir"] = args.output
    if args.input:
        overrides["input_path"] = args.input
    settings = with_metrics_topic(
        load_settings(args.config, **overrides), args.metrics_bootstrap, args.metrics_topic
    )
    if args.redis_url:
        settings = settings.model_copy(
            update={"redis": settings.redis.model_copy(update={"url": args.redis_url})}
        )
    if args.master:
        settings = settings.model_copy(
            update={"spark": settings.spark.model_copy(update={"master": args.master})}
        )
    if settings.input_path is not None and not Path(settings.input_path).exists():
        raise UsageError(f"input path does not exist: {settings.input_path}")
    no_input = settings.input_path is None and settings.kafka.bootstrap_servers is None
    if args.demo or args.scenario:
        if not no_input:
            raise UsageError(
                "--demo simulates its own input; drop it, or drop input_path and kafka.bootstrap_servers"
            )
        return run_embedded(settings, args)
    if no_input:
        if not interactive():
            raise UsageError(NO_INPUT)
        print(
            "replmon run: no input configured; running the simulated demo (`replmon run --demo`). "
            "A deployment sets kafka.bootstrap_servers or input_path."
        )
        return run_embedded(settings, args)
    from replmon.streaming.preflight import PreflightError

    try:
        return run_monitor(settings, once=args.once, timeline=not args.no_timeline, every_transition=args.all)
    except PreflightError as exc:
        raise UsageError(str(exc)) from None


NO_INPUT = (
    "no input configured: set kafka.bootstrap_servers (--metrics-bootstrap, "
    "REPLMON_KAFKA__BOOTSTRAP_SERVERS, or [kafka] bootstrap_servers in the --config file) or "
    "input_path (--input, REPLMON_INPUT_PATH). Use `replmon run --demo` for the simulated cluster."
)


def interactive() -> bool:
    """A person at a terminal (who may just be trying replmon), not a service or a script."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def run_embedded(settings, args) -> int:
    """No input configured: simulate a cluster with faults and monitor it, all in-process."""
    from replmon.streaming.simulator.cli import run as simulate

    scenario = args.scenario or "demo"
    sim_dir = Path(tempfile.mkdtemp(prefix="replmon-sim-"))
    print(f"replmon run: simulating scenario '{scenario}' into {sim_dir}")
    rc = simulate(build_parser().parse_args(["simulate", "--scenario", scenario, "--output", str(sim_dir)]))
    if rc != 0:
        return rc
    settings = settings.model_copy(update={"input_path": str(sim_dir / "events")})
    return run_monitor(
        settings,
        once=True,
        timeline=not args.no_timeline,
        truth=sim_dir / "truth.jsonl",
        every_transition=args.all,
    )


def run_monitor(
    settings,
    *,
    once: bool,
    timeline: bool = True,
    truth: Path | None = None,
    every_transition: bool = False,
) -> int:
    """Set up the sinks, the Spark session and the source; run the query under the supervisor
    until it ends or is stopped; then say what was written."""
    from replmon.state.codec import StateFormatError
    from replmon.streaming.bridge import OutputRouter
    from replmon.streaming.checkpoint import with_checkpoint_buckets
    from replmon.streaming.cluster_state import ClusterStepRunner

    try:
        settings = with_checkpoint_buckets(settings)
    except StateFormatError as refused:  # the count recorded beside the checkpoint: no query started
        raise UsageError(checkpoint_refusal(settings)(refused) or str(refused)) from None
    redis_sink, silences, alertmanager = _open_sinks(settings)
    spark, source = _open_source(settings)
    router = OutputRouter(
        settings.output_dir if settings.write_files else None,
        redis_sink,
        alertmanager=alertmanager,
        silences=silences,
        cluster_step=ClusterStepRunner(settings.monitor_config(), settings.checkpoint_dir, spark),
    )
    outlets = monitor_outlets(settings, redis_sink, alertmanager)
    rc, report = _supervise_query(spark, source, settings, router, outlets, alertmanager, once=once)
    if report.fatal:
        raise UsageError(report.fatal)
    print(
        f"replmon run: outputs in {settings.output_dir}: "
        + ", ".join(f"{k} {v}" for k, v in sorted(router.totals.items()))
        + (f"; the query was restarted {report.restarts} times" if report.restarts else "")
    )
    if timeline and settings.write_files:
        print_timeline(Path(settings.output_dir) / "alerts", every_transition=every_transition)
    return rc


def _open_sinks(settings):
    """(the Redis sink, its silences, the Alertmanager sink), each None when not configured;
    Redis checked before anything starts, and the Alertmanager sink told what a previous run
    notified and is still firing."""
    from replmon.streaming import preflight

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
    return redis_sink, silences, alertmanager


def _open_source(settings):
    """(the Spark session, the streaming source): the input files, or the metrics topic once
    Kafka answered (with the local Kafka jars when the settings name none)."""
    from replmon.streaming import preflight
    from replmon.streaming.session import build_session, local_kafka_jars
    from replmon.streaming.sources import file_source, kafka_options, kafka_source

    spark_conf = settings.spark
    if not settings.input_path and not spark_conf.jars:
        spark_conf = spark_conf.model_copy(update={"jars": local_kafka_jars()})
    spark = build_session(spark_conf)
    if settings.input_path:
        return spark, file_source(spark, settings.input_path, settings.spark.max_files_per_trigger)
    preflight.check_kafka(
        spark,
        kafka_options(settings.kafka),
        settings.kafka.subscribe if not settings.kafka.subscribe_pattern else None,
        settings.kafka.startup_timeout_ms,
    )
    return spark, kafka_source(spark, settings.kafka)


def _supervise_query(spark, source, settings, router, outlets, alertmanager, *, once: bool):
    """Start the query and keep it running (restarted from its checkpoint after a failure) until
    it ends or a signal stops it: (the exit code, the supervisor's report). A bounded run that
    ended well flushes what the cluster step still holds."""
    from replmon.streaming.query import start_query
    from replmon.streaming.supervise import Supervisor

    if alertmanager is not None:
        alertmanager.start()
    try:
        with stop_on_signals(on_signal=mute_py4j_for_stop) as stop:
            quiet_accumulator_server(lambda: stopped_meanwhile(stop))
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
    return rc, supervisor.report


QUERY_NAME = "replmon"


def checkpoint_refusal(settings):
    """A failure no restart can mend: the checkpoint's state is in a format this replmon refuses
    (state/codec.py). Returns the message to exit with, or None (then the query is restarted)."""

    from replmon.state.codec import StateFormatError, refusal_in

    def fatal(exc: BaseException) -> str | None:
        # Raised on the driver, the error itself; raised in a Spark worker, it reaches the driver
        # only as text inside Spark's error, where its marker finds it (codec.refusal_in).
        reason = exc.reason if isinstance(exc, StateFormatError) else refusal_in(str(exc))
        if reason is None:
            return None
        return f"cannot continue from the checkpoint {settings.checkpoint_dir}: {reason}"

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

    def alert(record: dict[str, Any]) -> None:
        if settings.write_files:
            write_monitor_alert(Path(settings.output_dir) / "alerts", record)
        if redis_sink is not None:
            redis_sink.write_batch(-1, [record], [], [], [])
        if alertmanager is not None:
            alertmanager.send([record])

    return Outlets(heartbeat=heartbeat, alert=alert)


def write_monitor_alert(folder: Path, record: dict[str, Any]) -> None:
    """One file per transition, named by its id and status: writing it again changes nothing."""
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"monitor-{record['alert_id']}-{record['status']}.jsonl"
    tmp = folder / f".{final.name}.tmp"
    tmp.write_text(json.dumps(record, sort_keys=True) + "\n")
    os.replace(tmp, final)


if __name__ == "__main__":
    sys.exit(main())
