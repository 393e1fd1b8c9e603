"""The time window of a replay and what must be read for it (no Spark here).

A replay reports what happened in [start_ms, end_ms]. The rules need history, so it reads from
`read_from_ms` = start − warm-up; the state of the last `metadata`/`broker` event of each
partition/broker before that (within the look-back), and each partition's last append and
fetches since that metadata's state began, are carried in at the warm-up start. It reads
until `read_to_ms` = end + lateness: a partition's time only reaches `end` once its cluster's
clock is `lateness` past it, exactly as in the live query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from replmon.streaming import cli_flags


class WindowError(ValueError):
    """A bad --from/--to/--last/--warmup value: the message names the option."""


def parse_duration_ms(text: str, option: str) -> int:
    """'30m', '90s', '1.5h', '250ms', '2d' -> milliseconds (cli_flags.parse_duration_ms, the one
    syntax of every duration flag); a WindowError names `option`."""
    try:
        return cli_flags.parse_duration_ms(text)
    except ValueError as exc:
        raise WindowError(f"{option}: {exc}") from None


def parse_time_ms(text: str, option: str) -> int:
    """An instant: ms since the epoch ('1767225600000') or ISO-8601 ('2026-01-01T00:10:00Z';
    without an offset it is UTC, like every time replmon prints)."""
    t = (text or "").strip()
    if re.fullmatch(r"\d{10,}", t):
        return int(t)
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise WindowError(
            f"{option}: {text!r} is neither ms since the epoch nor an ISO-8601 time like 2026-01-01T02:10:00Z"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def fmt_time(ms: int) -> str:
    """ISO-8601 UTC with milliseconds."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True)
class Window:
    start_ms: int  # T1: first instant reported
    end_ms: int  # T2: last instant reported
    warmup_ms: int  # events this long before T1 build state, unreported
    metadata_lookback_ms: int  # last metadata/broker event searched this far before the warm-up
    lateness_ms: int  # read past T2 so that partition time reaches T2

    def __post_init__(self):
        if self.end_ms <= self.start_ms:
            raise WindowError(
                f"--to ({fmt_time(self.end_ms)}) must be after --from ({fmt_time(self.start_ms)})"
            )
        if self.warmup_ms < 0 or self.metadata_lookback_ms < 0:
            raise WindowError("--warmup and --metadata-lookback must not be negative")

    @property
    def read_from_ms(self) -> int:
        return self.start_ms - self.warmup_ms

    @property
    def read_to_ms(self) -> int:
        return self.end_ms + self.lateness_ms

    @property
    def carry_from_ms(self) -> int:
        return self.read_from_ms - self.metadata_lookback_ms

    def contains(self, ts: int) -> bool:
        return self.start_ms <= ts <= self.end_ms

    def sample_ms(self, status_interval_ms: int, flap_window_ms: int, samples: int = 400) -> int:
        """Event-time step of the plotted series: about `samples` points over the window, never
        finer than the status interval; at most half the flap window (ISR exits are read from
        the engine's flap bookkeeping, which forgets exits older than that window)."""
        step = max(status_interval_ms, 1000, (self.end_ms - self.start_ms) // samples)
        return max(1, min(step, flap_window_ms // 2))


def default_warmup_ms(lag_limits_ms: list[int], lateness_ms: int) -> int:
    """Enough history for the rules: two of the largest replica.lag.time.max.ms (a follower's
    last caught-up time plus the isr-expiration period of L/2, with margin) and the lateness."""
    return 2 * max(lag_limits_ms) + lateness_ms


def resolve_window(
    *,
    from_: str | None,
    to: str | None,
    last: str | None,
    newest_ms,
    warmup: str | None,
    metadata_lookback: str,
    lag_limits_ms: list[int],
    lateness_ms: int,
) -> Window:
    """The window from the command's options. `newest_ms()` is called only when --to is
    absent: --last (or --from alone) then ends at the newest event of the input."""
    if last and from_:
        raise WindowError("give --from (with --to) or --last, not both")
    if not last and not from_:
        raise WindowError("give --from T1 [--to T2] or --last DURATION")
    end = parse_time_ms(to, "--to") if to else int(newest_ms())
    if last:
        start = end - parse_duration_ms(last, "--last")
    else:
        assert from_  # one of the two, checked above
        start = parse_time_ms(from_, "--from")
    warm = (
        parse_duration_ms(warmup, "--warmup")
        if warmup is not None
        else default_warmup_ms(lag_limits_ms, lateness_ms)
    )
    return Window(start, end, warm, parse_duration_ms(metadata_lookback, "--metadata-lookback"), lateness_ms)


def check_window_options(window_args: dict[str, Any]) -> None:
    """Raise WindowError for bad window options, before any input is read (a stand-in for the
    newest event time, which is only known after reading)."""
    stand_in = parse_time_ms(window_args["from_"], "--from") + 1 if window_args.get("from_") else 1 << 42
    resolve_window(**window_args, newest_ms=lambda: stand_in)
