"""`replmon silence`: add, list and expire silences (sinks/silences.py), stored in Redis.

    replmon silence add --broker 3 --for 30m --comment "disk swap"     # broker maintenance
    replmon silence add --alert-id 6f1c0e9a2b4d8e7f1a2b --for 2h
    replmon silence add --match alertname=UnderReplicated --match topic=orders --for 1h
    replmon silence list [--all] [--json]
    replmon silence expire SILENCE_ID

Redis is the one in the settings (REPLMON_REDIS__URL, --config, or --redis-url).
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import time
from datetime import UTC, datetime
from typing import Any

from replmon.streaming.cli_flags import UsageError, duration_text, parse_duration_ms


def parse_duration(text: str) -> int:
    """'30m', '2h', '90s', '1d', or '1h30m' -> ms (cli_flags.parse_duration_ms)."""
    try:
        return parse_duration_ms(text)
    except ValueError as exc:
        raise ValueError(f"--for: {exc}") from None


def group_arguments(p, inherited: bool = False) -> None:
    """`silence`'s own flags, also accepted after the action (`silence list --redis-url ...`)."""
    p.add_argument(
        "--redis-url",
        metavar="URL",
        default=argparse.SUPPRESS if inherited else None,
        help="Redis holding the silences (default: the settings' redis.url)",
    )


def _add_arguments(add) -> None:
    add.add_argument("--broker", type=int, metavar="ID", help="every alert about this broker (maintenance)")
    add.add_argument(
        "--cluster", metavar="NAME", help="the cluster this command is about: only its alerts are silenced"
    )
    add.add_argument("--alert-id", metavar="ID", help="one alert episode")
    add.add_argument(
        "--match",
        action="append",
        default=[],
        metavar="LABEL=VALUE",
        help="any label of docs/alerts.md (repeatable; all must match)",
    )
    add.add_argument(
        "--for",
        dest="duration",
        required=True,
        metavar="DURATION",
        type=duration_text,
        help="how long, e.g. 30m, 2h, 1h30m",
    )
    add.add_argument("--comment", default="", help="why, for whoever lists the silences")
    add.add_argument("--created-by", default=None, metavar="NAME", help="who (default: your user name)")


def _list_arguments(ls) -> None:
    ls.add_argument("--json", action="store_true", help="as JSON, one object per silence")


def _expire_arguments(ex) -> None:
    ex.add_argument("silence_id", metavar="SILENCE_ID", help="as `silence add` and `silence list` print it")


# The actions of `replmon silence`: name, help, their flags.
ACTIONS = (
    ("add", "add a silence", _add_arguments),
    ("list", "list the active silences", _list_arguments),
    ("expire", "end a silence now", _expire_arguments),
)


def matchers_of(args) -> dict:
    matchers = {}
    for item in args.match:
        label, sep, value = item.partition("=")
        if not sep or not label:
            raise ValueError(f"--match {item!r}: expected LABEL=VALUE")
        matchers[label.strip()] = value.strip()
    for label, value in (("broker", args.broker), ("cluster", args.cluster), ("alert_id", args.alert_id)):
        if value is not None:
            matchers[label] = value
    return matchers


def run(args, out=None, now_ms: int | None = None) -> int:
    from replmon.sinks.silences import SilenceError, SilenceStore, new_silence
    from replmon.streaming.redis_out import build_redis_client
    from replmon.streaming.settings import load_settings

    out = out or sys.stdout
    settings = load_settings(args.config)
    redis_conf = settings.redis
    if args.redis_url:
        redis_conf = redis_conf.model_copy(update={"url": args.redis_url})
    if redis_conf.url is None:
        raise UsageError("silences live in Redis; set redis.url (REPLMON_REDIS__URL) or pass --redis-url")
    client = build_redis_client(redis_conf)
    store = SilenceStore(client, redis_conf.prefix)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    if args.action == "add":
        try:
            silence = new_silence(
                matchers_of(args),
                parse_duration(args.duration),
                now_ms,
                args.created_by or getpass.getuser(),
                args.comment,
            )
        except (SilenceError, ValueError) as exc:
            raise UsageError(str(exc)) from None
        store.add(silence)
        print(f"{silence.silence_id} until {_when(silence.ends_ms)}: {_matchers(silence.matchers)}", file=out)
        return 0
    if args.action == "list":
        active = store.active(now_ms)
        if args.json:
            print(json.dumps([s.__dict__ for s in active], indent=2), file=out)
        else:
            for s in active:
                print(
                    f"{s.silence_id}  until {_when(s.ends_ms)}  {_matchers(s.matchers)}  "
                    f"by {s.created_by or '?'}  {s.comment}",
                    file=out,
                )
            if not active:
                print("no active silences", file=out)
        return 0
    if store.expire(args.silence_id):
        print(f"{args.silence_id} expired", file=out)
        return 0
    print(f"replmon silence expire: no silence {args.silence_id}", file=sys.stderr)
    return 1


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _matchers(m: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in m.items())
