"""`replmon safe-to-stop`: may broker N be stopped now? The gate of a rolling restart.

    replmon safe-to-stop --broker 3                      # answer now
    replmon safe-to-stop --broker 3 --wait 10m           # poll until safe, or give up
    replmon safe-to-stop --broker 3 --cluster prod --json

It reads the restart gate's verdict that the monitor keeps in Redis (`P:restart-gate:{cluster}:
{broker}`, state/restart_gate.py) and prints one line with the answer, then one line per reason
class. Exit 0 safe, 1 not safe, 2 unknown: no verdict, a verdict whose clock (the cluster's
event time) is more than `--max-age` behind the wall clock, an open MonitorLagging, Redis not
reachable, or a usage error.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import redis

from replmon.streaming.cli_flags import UsageError, duration, parse_duration_ms

SAFE, NOT_SAFE, UNKNOWN = 0, 1, 2
EXIT = {"safe": SAFE, "not_safe": NOT_SAFE, "unknown": UNKNOWN}
POLL_S = 1.0  # --wait asks again this often (the verdict changes once per micro-batch)


def parse_duration(text: str) -> int:
    """'500ms', '30s', '10m', '1h', '1m30s' -> ms: the one duration grammar (cli_flags)."""
    return parse_duration_ms(text)


def add_arguments(p) -> None:
    p.add_argument("--broker", type=int, required=True, metavar="ID", help="the broker to stop")
    p.add_argument(
        "--cluster",
        metavar="NAME",
        help="the cluster this command is about: the broker's (default: the only one in Redis)",
    )
    p.add_argument(
        "--wait",
        metavar="DURATION",
        type=duration,
        help="poll until the broker is safe to stop or this is up (e.g. 30s, 10m, 500ms)",
    )
    p.add_argument("--json", action="store_true", help="the same content as one JSON object")
    p.add_argument(
        "--max-age",
        metavar="DURATION",
        type=duration,
        default=30_000,
        help="a verdict whose clock is further behind the wall clock is unknown (default 30s)",
    )
    p.add_argument(
        "--redis-url", metavar="URL", help="Redis the monitor writes (default: the settings' redis.url)"
    )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _unescape(member: str) -> str:
    return member.replace("%3A", ":").replace("%25", "%")


def read_verdict(
    client: redis.Redis, prefix: str, cluster: str | None, broker: int, now_ms: int, max_age_ms: int
) -> dict[str, Any]:
    """The verdict as the command tells it: {verdict, why, ...the stored fields}."""
    from replmon.sinks.keys import Keys

    keys = Keys(prefix)
    if cluster is None:
        known = sorted(_unescape(_text(m)) for m in client.smembers(keys.clusters()))
        if len(known) != 1:
            return _unknown(
                cluster,
                broker,
                "no cluster in Redis yet"
                if not known
                else f"several clusters ({', '.join(known)}): pass --cluster",
            )
        cluster = known[0]
    for raw in client.hvals(keys.alerts_firing_in("replmon")):
        alert = json.loads(raw)
        if alert.get("name") == "MonitorLagging":
            return _unknown(
                cluster, broker, f"replmon itself is behind or stopped: {alert.get('reason', '')}"
            )
    stored = {_text(k): _text(v) for k, v in client.hgetall(keys.restart_gate(cluster, broker)).items()}
    if not stored:
        return _unknown(cluster, broker, f"no verdict for broker {broker} of cluster {cluster}")
    clock_ms = int(stored["clock_ms"])
    out: dict[str, Any] = {
        "cluster": cluster,
        "broker": broker,
        "verdict": stored["verdict"],
        "clock_ms": clock_ms,
        "age_ms": now_ms - clock_ms,
        "summary": stored.get("summary", ""),
        "reasons": json.loads(stored.get("reasons") or "{}"),
        "why": None,
    }
    if now_ms - clock_ms > max_age_ms:
        out["why"] = (
            f"replmon's view of {cluster} is {(now_ms - clock_ms) / 1000:.1f} s old "
            f"(over {max_age_ms / 1000:g} s): it said {stored['verdict']}"
        )
        out["verdict"] = "unknown"
    return out


def _unknown(cluster: str | None, broker: int, why: str) -> dict[str, Any]:
    return {"cluster": cluster, "broker": broker, "verdict": "unknown", "why": why, "reasons": {}}


def render(v: dict[str, Any]) -> list[str]:
    """The first line with the answer, then one line per reason class."""
    from replmon.state.restart_gate import answer_line, reason_lines

    if v["verdict"] == "unknown":
        first = f"broker {v['broker']}: unknown ({v['why']})"
        return [first, *(reason_lines(v) if v["reasons"] else [])]
    return [answer_line(v), *reason_lines(v)]


def run(
    args,
    out=None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    from replmon.streaming.redis_out import build_redis_client
    from replmon.streaming.settings import load_settings

    out = out or sys.stdout
    max_age_ms = args.max_age
    wait_ms = args.wait or 0
    conf = load_settings(args.config).redis
    if args.redis_url:
        conf = conf.model_copy(update={"url": args.redis_url})
    if conf.url is None:
        raise UsageError("the verdict lives in Redis; set redis.url (REPLMON_REDIS__URL) or pass --redis-url")
    client = build_redis_client(conf)
    deadline = clock() + wait_ms / 1000
    while True:
        now = clock()
        try:
            v = read_verdict(client, conf.prefix, args.cluster, args.broker, int(now * 1000), max_age_ms)
        except (redis.RedisError, ValueError, KeyError) as exc:
            v = _unknown(args.cluster, args.broker, f"cannot read the verdict from Redis: {exc}")
        if v["verdict"] == "safe" or now >= deadline:
            break
        sleep(max(0.0, min(POLL_S, deadline - now)))
    code = EXIT.get(v["verdict"], UNKNOWN)
    if args.json:
        print(json.dumps({**v, "exit": code}, sort_keys=True), file=out)
    else:
        print("\n".join(render(v)), file=out)
    return code
