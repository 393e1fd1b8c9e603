"""The report's plots, drawn with matplotlib (Agg: no display, no browser) as PNG bytes.

One small function per plot, each taking plain records and returning PNG bytes. Times on the
x axis are UTC clock times of the window.
"""

from __future__ import annotations

import io
from collections import defaultdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import matplotlib.ticker

if TYPE_CHECKING:
    from replmon.streaming.replay_compare import Summary

SEVERITY_COLOR = {"critical": "#d62728", "warning": "#ff7f0e", "info": "#1f77b4"}
MAX_LINES = 12
DPI = 100


def _t(ms: int) -> float:
    """An event time on the date axes: matplotlib's date number (days since its epoch)."""
    return float(mdates.date2num(datetime.fromtimestamp(ms / 1000, tz=UTC)))


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _time_axis(ax, window) -> None:
    ax.set_xlim(_t(window.start_ms), _t(window.end_ms))
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(tz=UTC))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=UTC))
    ax.grid(True, alpha=0.3)


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555")


def alert_timeline(episodes: list[dict], window, title: str = "Alerts") -> bytes:
    """One row per root alert (streaming/timeline.py's `root_episodes`), in the order they
    started: a bar from firing (or the window start) to resolved (or the window end), hatched
    when it started before the window; its consequences counted in the row's label, and the
    span from the first of them to start to the last to end drawn light behind the bar."""
    rows: dict[tuple, int] = {}
    for e in sorted(episodes, key=lambda e: (e["from_ms"], e["subject"], e["name"])):
        rows.setdefault((e["subject"], e["name"]), len(rows))
    explained: dict[tuple, int] = defaultdict(int)
    for e in episodes:
        explained[(e["subject"], e["name"])] += sum(e.get("consequences", {}).values())
    fig, ax = plt.subplots(figsize=(11, max(2.0, 0.32 * len(rows) + 1.2)))
    least = (_t(window.end_ms) - _t(window.start_ms)) / 400
    for e in episodes:
        row = rows[(e["subject"], e["name"])]
        color = SEVERITY_COLOR.get(e["severity"], "#888")
        if e.get("consequences"):
            lo, hi = _t(e["span"][0]), _t(e["span"][1])
            ax.barh(row, max(hi - lo, least), left=lo, height=0.85, color=color, alpha=0.18)
        start, end = _t(e["from_ms"]), _t(e["to_ms"])
        ax.barh(
            row,
            max(end - start, least),
            left=start,
            height=0.5,
            color=color,
            hatch="//" if e["started_ms"] < window.start_ms else None,
            edgecolor="black" if not e["resolved"] else "none",
            linewidth=0.6,
        )
    labels = [
        f"{n}  {s}" + (f"  (+{explained[(s, n)]} consequences)" if explained[(s, n)] else "") for s, n in rows
    ]
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    _time_axis(ax, window)
    ax.set_title(
        f"{title}, one row per root cause (bar: firing → resolved; light: its consequences; "
        "hatched: already firing at the start; outlined: still firing at the end)",
        fontsize=10,
    )
    if not rows:
        _empty(ax, "no alert in the window")
    return _png(fig)


def replica_lag(
    samples: list[dict], isr_exits: list[dict], window, message_limit: int | None = None
) -> bytes:
    """Time since each follower was last caught up, with replica.lag.time.max.ms and the moments
    the leader shrank the ISR; below, how many messages it is behind (with Kafka 0.8's
    replica.lag.max.messages when a variant uses that rule)."""
    series = defaultdict(list)
    for r in samples:
        series[(r["cluster"], r["topic"], r["partition"], r["replica"])].append(r)
    worst = _most_lagging(series)
    fig, (ax, msgs) = plt.subplots(2, 1, figsize=(11, 6), sharex=True, height_ratios=(3, 2))
    limits: set[int] = set()
    for key in sorted(worst):
        rows = series[key]
        times = [_t(r["ts"]) for r in rows]
        (line,) = ax.plot(
            times,
            [(r["lag_ms"] or 0) / 1000 for r in rows],
            label=f"{key[1]}-{key[2]} replica {key[3]}",
            linewidth=1.2,
        )
        msgs.plot(times, [r["lag_messages"] for r in rows], color=line.get_color(), linewidth=1)
        limits.update(r["limit_ms"] for r in rows)
    for limit in sorted(limits):
        _limit_line(ax, window, limit / 1000, f" replica.lag.time.max.ms = {limit / 1000:g} s", "#d62728")
    if message_limit:
        text = f" replica.lag.max.messages = {message_limit:,} (Kafka 0.8)"
        _limit_line(msgs, window, message_limit, text, "#9467bd")
    _isr_shrinks(ax, msgs, isr_exits, window)
    ax.set_ylabel("time since caught up (s)")
    msgs.set_ylabel("messages behind")
    ax.set_title("Per-replica lag in time (top) and in messages (bottom)", fontsize=10)
    for a in (ax, msgs):
        _time_axis(a, window)
    if worst:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    else:
        _empty(ax, "no follower state sampled in the window")
    return _png(fig)


def _most_lagging(series: dict[tuple, list[dict]]) -> list[tuple]:
    """The MAX_LINES replicas that lagged most: in time, then in messages."""
    return sorted(
        series,
        key=lambda k: (
            -max((r["lag_ms"] or 0) for r in series[k]),
            -max(r["lag_messages"] for r in series[k]),
        ),
    )[:MAX_LINES]


def _limit_line(ax, window, y: float, text: str, color: str) -> None:
    """A dashed horizontal line at a limit, named at the window's start."""
    ax.axhline(y, color=color, linestyle="--", linewidth=1)
    ax.text(_t(window.start_ms), y, text, color=color, va="bottom", fontsize=8)


def _isr_shrinks(ax, msgs, isr_exits: list[dict], window) -> None:
    """A dotted vertical line on both plots at each ISR shrink in the window (labelled once)."""
    for i, x in enumerate(e for e in isr_exits if window.contains(e["ts"])):
        for a in (ax, msgs):
            a.axvline(
                _t(x["ts"]),
                color="#444",
                linestyle=":",
                linewidth=1,
                label="ISR shrink" if i == 0 and a is ax else None,
            )


def isr_and_urp(partitions: list[dict], urp: list[dict], window) -> bytes:
    """ISR size of each sampled partition, and the number of under-replicated partitions."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 5), sharex=True)
    series = defaultdict(list)
    for r in partitions:
        series[(r["cluster"], r["topic"], r["partition"])].append(r)
    shrunk = sorted(series, key=lambda k: min(r["isr"] - r["replicas"] for r in series[k]))[:MAX_LINES]
    for key in sorted(shrunk):
        rows = series[key]
        top.step(
            [_t(r["ts"]) for r in rows],
            [r["isr"] for r in rows],
            where="post",
            label=f"{key[1]}-{key[2]}",
            linewidth=1.2,
        )
    top.set_ylabel("ISR size")
    top.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    top.set_title("ISR size per partition, and under-replicated partitions", fontsize=10)
    if shrunk:
        top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    totals: defaultdict[int, int] = defaultdict(int)
    for r in urp:
        totals[r["ts"]] += r["under_replicated"]
    times = sorted(totals)
    bottom.step([_t(t) for t in times], [totals[t] for t in times], where="post", color="#d62728")
    bottom.fill_between(
        [_t(t) for t in times], [totals[t] for t in times], step="post", color="#d62728", alpha=0.2
    )
    bottom.set_ylabel("under-replicated")
    for ax in (top, bottom):
        _time_axis(ax, window)
    return _png(fig)


def hw_stalls(partitions: list[dict], stalled: list[tuple], window) -> bytes:
    """HW and leader LEO of the partitions whose HW stalled (offsets relative to the HW at the
    window start, so partitions of different sizes share an axis)."""
    fig, ax = plt.subplots(figsize=(11, 4))
    series = defaultdict(list)
    for r in partitions:
        series[(r["cluster"], r["topic"], r["partition"])].append(r)
    shown = [k for k in stalled if k in series][: MAX_LINES // 2]
    for i, key in enumerate(shown):
        rows = series[key]
        base = rows[0]["hw"]
        color = plt.cm.tab10(i % 10)
        times = [_t(r["ts"]) for r in rows]
        ax.step(
            times,
            [r["leader_leo"] - base for r in rows],
            where="post",
            color=color,
            linestyle="--",
            linewidth=1,
            label=f"{key[1]}-{key[2]} leader LEO",
        )
        ax.step(
            times,
            [r["hw"] - base for r in rows],
            where="post",
            color=color,
            linewidth=1.6,
            label=f"{key[1]}-{key[2]} HW",
        )
    ax.set_ylabel("offset − HW at the start")
    ax.set_title("High watermark and leader LEO where the HW stalled", fontsize=10)
    _time_axis(ax, window)
    if shown:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    else:
        _empty(ax, "no high-watermark stall in the window")
    return _png(fig)


def variant_bars(summaries: list[Summary]) -> bytes:
    """Alerts, ISR shrinks, under-replicated minutes and HW stall seconds per variant."""
    measures = [
        ("alerts", "alerts"),
        ("isr_shrinks", "ISR shrinks"),
        ("under_replicated_min", "under-replicated min"),
        ("hw_stalled_s", "HW stall s"),
    ]
    fig, axes = plt.subplots(1, len(measures), figsize=(11, 2.2 + 0.35 * len(summaries)))
    names = [s.name for s in summaries]
    for ax, (attr, title) in zip(axes, measures, strict=True):
        values = [getattr(s, attr) for s in summaries]
        ax.barh(range(len(names)), values, color=["#1f77b4"] + ["#9467bd"] * (len(names) - 1))
        ax.set_yticks(range(len(names)), names if ax is axes[0] else [""] * len(names), fontsize=8)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=9)
        ax.grid(True, axis="x", alpha=0.3)
        for i, v in enumerate(values):
            ax.text(v, i, f" {v:g}" if isinstance(v, int) else f" {v:.2f}", va="center", fontsize=8)
    fig.suptitle("What-if variants against the actual settings (inside the window)", fontsize=10)
    return _png(fig)
