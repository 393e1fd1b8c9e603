"""`replmon replay`: a window of the metrics topic or of event files, with what-if variants.

    replmon replay --input events/ --from 2026-01-01T00:00:30Z --to 2026-01-01T00:02:00Z \\
        --what-if rules.replica_lag_time_max_ms=10000 --what-if rules.rule_set=v0_8 --report report/
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from replmon.streaming.cli_flags import UsageError, duration_text, old_spelling
from replmon.streaming.replay_window import WindowError, check_window_options, fmt_time, resolve_window

ALL_HELP = (
    "print every alert transition of the window (default: what was notified, one line each, "
    "with each root's consequences folded under it)"
)

log = logging.getLogger(__name__)


def add_arguments(p) -> None:
    """`replmon replay`'s flags, in the order `--help` lists them."""
    _input_arguments(p)
    _window_arguments(p)
    _filter_arguments(p)
    _output_arguments(p)


def _input_arguments(p) -> None:
    """What is replayed: event files, or the metrics topic."""
    src = p.add_argument_group("input (default: the metrics topic of the settings' kafka section)")
    src.add_argument("--input", metavar="PATH", help="a JSON-lines file or a folder of them")
    src.add_argument(
        "--metrics-bootstrap",
        metavar="HOST:PORT",
        help="the Kafka cluster that holds the metrics topic, which replay reads (kafka.bootstrap_servers)",
    )
    old_spelling(p, "--kafka-bootstrap", "--metrics-bootstrap")
    src.add_argument(
        "--metrics-topic",
        metavar="NAME",
        help="the metrics topic, which replay reads (kafka.subscribe)",
    )
    src.add_argument(
        "--kafka-time-slack",
        default="5m",
        metavar="DURATION",
        type=duration_text,
        help="read Kafka records produced this much around the window (default 5m)",
    )


def _window_arguments(p) -> None:
    """The window of event time reported, and the history before it that builds the state."""
    win = p.add_argument_group("window")
    win.add_argument(
        "--from", dest="from_", metavar="TIME", help="ISO-8601 (UTC unless an offset is given) or ms"
    )
    win.add_argument("--to", metavar="TIME", help="default: the newest event of the input")
    win.add_argument(
        "--last", metavar="DURATION", type=duration_text, help="e.g. 30m: the window ending at --to"
    )
    win.add_argument(
        "--warmup",
        metavar="DURATION",
        type=duration_text,
        help="history before T1 that builds state, unreported (default: 2 x the "
        "largest replica.lag.time.max.ms + stream.lateness_ms)",
    )
    win.add_argument(
        "--metadata-lookback",
        default="1h",
        metavar="DURATION",
        type=duration_text,
        help="how far before the warm-up the last metadata of each partition is searched (default 1h)",
    )


def _filter_arguments(p) -> None:
    """Which events of the input are replayed: clusters, topics, partitions."""
    p.add_argument(
        "--cluster",
        action="append",
        default=[],
        metavar="NAME",
        help="the cluster this command is about: only its events (repeatable)",
    )
    p.add_argument(
        "--topic", action="append", default=[], metavar="NAME", help="only this topic (repeatable)"
    )
    p.add_argument(
        "--partition",
        action="append",
        type=int,
        default=[],
        metavar="N",
        help="only this partition number (repeatable)",
    )


def _output_arguments(p) -> None:
    """The what-if variants compared with the actual settings, and where the results go."""
    p.add_argument(
        "--what-if",
        action="append",
        default=[],
        metavar="SECTION.SETTING=VALUE[,...]",
        help="a variant to compare with the actual settings (repeatable), e.g. "
        "rules.replica_lag_time_max_ms=10000 or rules.rule_set=v0_8",
    )
    p.add_argument(
        "--output", default="replmon-replay", metavar="DIR", help="output folder (default ./replmon-replay)"
    )
    p.add_argument("--report", metavar="DIR", help="write an HTML report with PNG plots here")
    p.add_argument("--all", action="store_true", help=ALL_HELP)


def with_metrics_topic(settings, bootstrap: str | None, topic: str | None):
    """The settings with --metrics-bootstrap and --metrics-topic on top (`run` and `replay`): the
    topic replaces the settings' kafka.subscribe and kafka.subscribe_pattern."""
    update: dict[str, Any] = {}
    if bootstrap:
        update["bootstrap_servers"] = bootstrap
    if topic:
        update.update(subscribe=topic, subscribe_pattern=None)
    if not update:
        return settings
    return settings.model_copy(update={"kafka": settings.kafka.model_copy(update=update)})


def run(args) -> int:
    from replmon.streaming.settings import load_settings
    from replmon.streaming.whatif import build_variants

    settings = with_metrics_topic(load_settings(args.config), args.metrics_bootstrap, args.metrics_topic)
    input_path = args.input or settings.input_path
    if not input_path and not settings.kafka.bootstrap_servers:
        raise UsageError(
            "give --input FILE|DIR or --metrics-bootstrap (or kafka.bootstrap_servers in the settings)"
        )
    if input_path and not Path(input_path).exists():
        raise UsageError(f"input path does not exist: {input_path}")
    variants = build_variants(settings, args.what_if)
    try:
        return _replay(args, settings, variants, input_path)
    except WindowError as exc:
        raise UsageError(str(exc)) from None


def _replay(args, settings, variants, input_path) -> int:
    from replmon.streaming import replay
    from replmon.streaming.progress import JobProgress
    from replmon.streaming.replay_window import parse_duration_ms
    from replmon.streaming.session import build_session, local_kafka_jars

    slack_ms = parse_duration_ms(args.kafka_time_slack, "--kafka-time-slack")
    spark_conf = settings.spark
    if not input_path and not spark_conf.jars:
        spark_conf = spark_conf.model_copy(update={"jars": local_kafka_jars()})
    lag_limits = [v.config.replica_lag_time_max_ms for v in variants]
    lateness = max(v.config.lateness_ms for v in variants)
    window_args = dict(
        from_=args.from_,
        to=args.to,
        last=args.last,
        warmup=args.warmup,
        metadata_lookback=args.metadata_lookback,
        lag_limits_ms=lag_limits,
        lateness_ms=lateness,
    )
    check_window_options(window_args)  # before Spark starts
    spark = build_session(spark_conf, app_name="replmon-replay")
    if input_path:
        lines = replay.file_lines(spark, input_path)
        window = resolve_window(**window_args, newest_ms=lambda: replay.newest_event_ms(lines))
    else:
        if not args.to:
            import time

            window_args["to"] = str(int(time.time() * 1000))
        window = resolve_window(**window_args, newest_ms=lambda: 0)
        lines = replay.kafka_lines(spark, settings.kafka, window, slack_ms)
    narrow = replay.Narrow(tuple(args.cluster), tuple(args.topic), tuple(args.partition))
    print(
        f"replmon replay: {fmt_time(window.start_ms)} .. {fmt_time(window.end_ms)} "
        f"(warm-up from {fmt_time(window.read_from_ms)}), {len(variants)} variant(s)"
    )
    events = replay.select_events(lines, window, narrow).cache()
    try:
        total = events.count()
        rows = replay.replay_rows(events, settings, window, variants)
        with JobProgress(spark, total):
            result = replay.collect(rows, window, variants, total)
    finally:
        events.unpersist()
    return report_result(
        result, Path(args.output), Path(args.report) if args.report else None, every_transition=args.all
    )


def report_result(
    result, output: Path, report_dir: Path | None, out=None, every_transition: bool = False
) -> int:
    from replmon.streaming.replay_compare import compare, summarize, window_view

    out = out or sys.stdout
    window = result.window
    summaries = [
        summarize(v.name, result.of(v.variant_id, "alerts"), result.of(v.variant_id, "isr_exit"), window)
        for v in result.variants
    ]
    comparisons = [compare(summaries[0], s) for s in summaries[1:]]
    view = window_view(result.of(0, "alerts"), window)
    write_outputs(output, result, view)
    print(f"replmon replay: {result.events:,} events read; outputs in {output}", file=out)
    print_view(view, out, every_transition)
    print_comparisons(summaries, comparisons, out)
    if report_dir is not None:
        from replmon.streaming.report import write_report

        page = write_report(report_dir, result, summaries, comparisons)
        print(f"\nreport: {page}", file=out)
    return 0


def write_outputs(output: Path, result, view) -> None:
    output.mkdir(parents=True, exist_ok=True)
    _jsonl(output / "alerts.jsonl", view.transitions)
    _jsonl(output / "firing_at_start.jsonl", view.firing_at_start)
    _jsonl(output / "quarantine.jsonl", result.of(0, "quarantine"))
    from replmon.streaming.replay_compare import window_view

    for v in result.variants[1:]:
        vdir = output / f"what-if-{v.variant_id}"
        vdir.mkdir(exist_ok=True)
        (vdir / "what-if.txt").write_text(v.name + "\n")
        _jsonl(
            vdir / "alerts.jsonl", window_view(result.of(v.variant_id, "alerts"), result.window).transitions
        )


def _jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))


def print_view(view, out, every_transition: bool = False) -> None:
    """The window's alerts: grouped by root (streaming/timeline.py), or every transition."""
    from replmon.streaming.timeline import group, incident_lines, quiet_line, transition_line

    if every_transition:
        if view.firing_at_start:
            print(f"\nAlready firing at the start of the window ({len(view.firing_at_start)})", file=out)
            for r in view.firing_at_start:
                print("  " + transition_line(r), file=out)
        print(f"\nAlert timeline in the window ({len(view.transitions)} transitions)", file=out)
        for r in view.transitions:
            print(transition_line(r), file=out)
        return
    timeline = group(view.firing_at_start + view.transitions)
    before = {r["alert_id"] for r in view.firing_at_start}
    already = [i for i in timeline.incidents if i.alert_id in before]
    if already:
        print(f"\nAlready firing at the start of the window ({len(already)})", file=out)
        for inc in already:
            for line in incident_lines(inc):
                print("  " + line, file=out)
    print(
        f"\nAlert timeline in the window ({len(view.transitions)} transitions; --all lists each)",
        file=out,
    )
    for inc in timeline.incidents:
        if inc.alert_id not in before:
            for line in incident_lines(inc):
                print(line, file=out)
    quiet = quiet_line(timeline.quiet)
    if quiet is not None:
        print(quiet, file=out)


def print_comparisons(summaries, comparisons, out) -> None:
    if not comparisons:
        return
    print("\nWhat-if comparison (inside the window)", file=out)
    print(f"{'variant':44} {'alerts':>6} {'ISR shrinks':>11} {'URP min':>8} {'HW stall s':>10}", file=out)
    for s in summaries:
        print(
            f"{s.name[:44]:44} {s.alerts:>6} {s.isr_shrinks:>11} {s.under_replicated_min:>8.1f} "
            f"{s.hw_stalled_s:>10.1f}",
            file=out,
        )
    for c in comparisons:
        print(f"\n{c.variant}:", file=out)
        for name, subject in c.only_in_variant:
            print(f"  only with the variant: {name} {subject}", file=out)
        for name, subject in c.only_in_actual:
            print(f"  only with the actual settings: {name} {subject}", file=out)
        for (name, subject), delta in sorted(c.detection_delta_ms.items()):
            print(
                f"  {name} {subject}: detected {abs(delta) / 1000:.1f} s "
                f"{'later' if delta > 0 else 'earlier'}",
                file=out,
            )
        if not (c.only_in_variant or c.only_in_actual or c.detection_delta_ms):
            print("  the same alerts at the same times", file=out)
