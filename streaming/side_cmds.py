"""The subcommands around the monitor: conformance, services, grafana-annotations, dashboards.

Each is its flags (declared for `replmon`'s one parser, streaming/cli.py) and a handler that calls
into the package that does the work. `--config` is read by each: what applies of it is in
docs/cli.md; where nothing applies, a file given is still read and checked.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from replmon.streaming.cli_flags import UsageError, old_spelling

# Development conveniences that only exist in a replmon checkout, found from the working
# directory (installed code never guesses where its source lives).
CHECKOUT_SERVICES = Path("deploy") / "local" / "services.sh"


def check_config(args) -> None:
    """A --config given to a subcommand that uses none of it: read and checked all the same."""
    if args.config:
        from replmon.streaming.settings import load_settings

        load_settings(args.config)


# ---------------------------------------------------------------------------- conformance


def conformance_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="scenario files (JSON lines)")


def conformance(args) -> int:
    from replmon.streaming.conformance_cmd import run

    check_config(args)
    return run(args.paths)


# ---------------------------------------------------------------------------- services


def services_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["up", "down", "status"], help="start, stop or show the services")
    p.add_argument("--brokers", type=int, default=1, choices=[1, 3], help="1 or 3 local brokers (default 1)")


def services(args) -> int:
    check_config(args)
    if not CHECKOUT_SERVICES.is_file():
        raise UsageError(
            f"run it from a replmon checkout ({CHECKOUT_SERVICES} not found in the current directory)"
        )
    return subprocess.call(["bash", str(CHECKOUT_SERVICES), args.action, "--brokers", str(args.brokers)])


# ---------------------------------------------------------------------------- grafana-annotations


def grafana_annotations_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--once", action="store_true", help="handle what is pending and new now, then stop (no waiting)"
    )


def grafana_annotations(args) -> int:
    """Run until SIGTERM/SIGINT. Its settings are REPLMON_ANNOTATIONS__* and REPLMON_GRAFANA__*; a
    --config file's [redis] section (url, username, password, prefix) replaces the consumer's Redis."""
    import redis

    from replmon.sinks.grafana import GrafanaAuthError
    from replmon.sinks.grafana_annotation_consumer import build, serve
    from replmon.streaming.settings import load_annotation_settings, load_grafana_settings, load_settings

    redis_conf = load_settings(args.config).redis if args.config else None
    try:
        consumer = build(load_annotation_settings(redis_conf), load_grafana_settings())
    except ValueError as exc:  # pydantic's ValidationError names the setting
        raise UsageError(f"invalid settings: {exc}") from None
    try:
        return serve(consumer, once=args.once)
    except GrafanaAuthError as exc:
        raise UsageError(str(exc)) from None
    except redis.AuthenticationError as exc:
        raise UsageError(f"Redis refused the consumer's user: {exc}") from None


# ---------------------------------------------------------------------------- dashboards


# The flags' help names the default folder without importing what holds it: building the parser
# stays cheap for every subcommand (sinks.grafana alone takes a second to import).
SHIPPED_JSON = "the dashboards/json folder replmon ships"


def build_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", type=Path, metavar="DIR", help=f"output folder (default: {SHIPPED_JSON})")
    old_spelling(p, "--out", "--output")
    p.add_argument(
        "--redis-prefix",
        metavar="PREFIX",
        help="the Redis key prefix the sink writes under (default: the settings' redis.prefix)",
    )
    old_spelling(p, "--prefix", "--redis-prefix")
    p.add_argument("--print", action="store_true", help="print the JSON instead of writing files")


def build_dashboards(args) -> int:
    from replmon.dashboards.build import OUT_DIR, build_all, render, write
    from replmon.streaming.settings import load_settings

    prefix = args.redis_prefix or load_settings(args.config).redis.prefix
    if args.print:
        for board in build_all(prefix).values():
            sys.stdout.write(render(board))
        return 0
    for path in write(args.output or OUT_DIR, prefix):
        print(path)
    return 0


def publish_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input", type=Path, metavar="DIR", help=f"folder of dashboard JSON (default: {SHIPPED_JSON})"
    )
    old_spelling(p, "--dir", "--input")


def publish_dashboards(args) -> int:
    """Publish to Grafana (REPLMON_GRAFANA__*; nothing of --config applies)."""
    from replmon.sinks.grafana import DASHBOARDS_DIR, GrafanaPublishError, publish
    from replmon.streaming.settings import load_grafana_settings

    check_config(args)
    try:
        urls = publish(args.input or DASHBOARDS_DIR, load_grafana_settings())
    except GrafanaPublishError as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:  # pydantic ValidationError names the setting
        raise UsageError(f"invalid Grafana settings: {exc}") from None
    for url in urls:
        print(url)
    return 0
