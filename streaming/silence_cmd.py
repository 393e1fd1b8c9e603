"""`replmon silence`: add, list and expire silences (sinks/silences.py), stored in Redis.

    replmon silence add --broker 3 --for 30m --comment "disk swap"     # broker maintenance
    replmon silence add --alert-id 6f1c0e9a2b4d8e7f1a2b --for 2h
    replmon silence add --match alertname=UnderReplicated --match topic=orders --for 1h
    replmon silence list [--all] [--json]
    replmon silence expire SILENCE_ID

Redis is the one in the settings (REPLMON_REDIS__URL, --config, or --redis-url).
"""

from __future__ import annotations

import getpass
import json
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any

UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration(text: str) -> int:
    """'30m', '2h', '90s', '1d', or '1h30m' -> ms."""
    parts = re.fullmatch(r"(?:\d+[smhd])+", text.strip())
    if not parts:
        raise ValueError(f"duration {text!r}: use a number and a unit s, m, h or d, e.g. 30m or 1h30m")
    return sum(int(n) * UNITS[u] for n, u in re.findall(r"(\d+)([smhd])", text))


def add_parser(sub, parents=()) -> None:
    p = sub.add_parser(
        "silence", parents=list(parents), help="silence alerts: broker maintenance, an alert id, a matcher"
    )
    p.add_argument("--config", help="TOML settings file (for the Redis connection)")
    p.add_argument("--redis-url", help="Redis holding the silences (default: the settings' redis.url)")
    actions = p.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="add a silence")
    add.add_argument("--broker", type=int, help="every alert about this broker (maintenance)")
    add.add_argument("--cluster", help="restrict to this cluster")
    add.add_argument("--alert-id", help="one alert episode")
    add.add_argument(
        "--match",
        action="append",
        default=[],
        metavar="LABEL=VALUE",
        help="any label of docs/alerts.md (repeatable; all must match)",
    )
    add.add_argument("--for", dest="duration", required=True, help="how long, e.g. 30m, 2h, 1h30m")
    add.add_argument("--comment", default="")
    add.add_argument("--created-by", default=None)
    ls = actions.add_parser("list", help="list the active silences")
    ls.add_argument("--json", action="store_true")
    ex = actions.add_parser("expire", help="end a silence now")
    ex.add_argument("silence_id")


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
    from replmon.sinks.redis_client import RedisConnectionSettings, build_client
    from replmon.sinks.silences import SilenceError, SilenceStore, new_silence
    from replmon.streaming.settings import load_settings

    out = out or sys.stdout
    settings = load_settings(args.config)
    redis_conf = settings.redis
    if args.redis_url:
        redis_conf = redis_conf.model_copy(update={"url": args.redis_url})
    if redis_conf.url is None:
        print(
            "replmon silence: silences live in Redis; set redis.url (REPLMON_REDIS__URL) or pass --redis-url",
            file=sys.stderr,
        )
        return 2
    client = build_client(
        RedisConnectionSettings(
            url=redis_conf.url,
            username=redis_conf.username,
            password=redis_conf.password,
            ssl_ca_certs=redis_conf.ssl_ca_certs,
            ssl_certfile=redis_conf.ssl_certfile,
            ssl_keyfile=redis_conf.ssl_keyfile,
        )
    )
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
            print(f"replmon silence: {exc}", file=sys.stderr)
            return 2
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
    print(f"replmon silence: no silence {args.silence_id}", file=sys.stderr)
    return 1


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _matchers(m: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in m.items())
