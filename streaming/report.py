"""`--report DIR`: one self-contained HTML page (plots inlined as PNG data URIs, a few lines of
inline JS, no network at view time) plus the same plots as PNG files for a postmortem.

Why matplotlib PNGs and not an interactive JS library: the page must open offline and stay small
enough to attach to a ticket (a plotly page inlines ~3.5 MB of JS; this one is a few hundred kB),
and PNG export must work here without a browser (plotly's kaleido downloads Chrome). Zoom is a
click: a plot opens at full resolution, scrollable; the tables below carry the exact times.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from replmon.streaming import plots
from replmon.streaming.replay_compare import episodes, window_view
from replmon.streaming.replay_window import fmt_time
from replmon.streaming.timeline import group, root_episodes

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#222;padding:0 16px}
h1{font-size:22px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}
th{background:#f4f4f4} .num{text-align:right} .critical{color:#d62728} .warning{color:#c55a00}
figure{margin:8px 0} figure img{max-width:100%;cursor:zoom-in;border:1px solid #eee}
figure.zoom img{max-width:none;cursor:zoom-out} figure.zoom{overflow:auto}
.meta{color:#555}
"""
_JS = (
    "document.querySelectorAll('figure').forEach(f=>f.addEventListener('click',"
    "()=>f.classList.toggle('zoom')));"
)


def write_report(report_dir: Path, result, summaries, comparisons) -> Path:
    """Draw the plots, write them as PNGs and the page; return the page's path."""
    report_dir.mkdir(parents=True, exist_ok=True)
    window = result.window
    view = window_view(result.of(0, "alerts"), window)
    eps = episodes(view, window)
    stalled = sorted({_partition_key(e) for e in eps if e["name"] == "HighWatermarkStalled"})
    v0_8 = [v.config.replica_lag_max_messages for v in result.variants if v.config.rule_set == "v0_8"]
    figures = [
        ("alerts.png", "Alert timeline", plots.alert_timeline(_roots(view, eps), window)),
        (
            "replica_lag.png",
            "Per-replica lag",
            plots.replica_lag(
                result.of(0, "replica_lag"), result.of(0, "isr_exit"), window, v0_8[0] if v0_8 else None
            ),
        ),
        (
            "isr.png",
            "ISR size and under-replicated partitions",
            plots.isr_and_urp(result.of(0, "partition"), result.of(0, "urp"), window),
        ),
        ("hw.png", "High watermark stalls", plots.hw_stalls(result.of(0, "partition"), stalled, window)),
    ]
    if len(summaries) > 1:
        figures.append(("variants.png", "What-if variants", plots.variant_bars(summaries)))
    for v in result.variants[1:]:
        v_view = window_view(result.of(v.variant_id, "alerts"), window)
        v_eps = episodes(v_view, window)
        if [(e["alert_id"], e["to_ms"]) for e in v_eps] != [(e["alert_id"], e["to_ms"]) for e in eps]:
            figures.append(
                (
                    f"alerts-what-if-{v.variant_id}.png",
                    f"Alert timeline with {v.name}",
                    plots.alert_timeline(_roots(v_view, v_eps), window, title=f"What if {v.name}"),
                )
            )
    for name, _, png in figures:
        (report_dir / name).write_bytes(png)
    page = report_dir / "index.html"
    page.write_text(render(result, view, eps, summaries, comparisons, figures))
    return page


def _roots(view, eps: list[dict]) -> list[dict]:
    """The chart's bars: one per root episode, its consequences counted (streaming/timeline.py)."""
    return root_episodes(view.firing_at_start + view.transitions, eps)


def _partition_key(e: dict[str, Any]) -> tuple:
    cluster, name = e["subject"].split("/")[:2]
    topic, _, partition = name.rpartition("-")
    return (cluster, topic, int(partition))


def render(result, view, eps, summaries, comparisons, figures) -> str:
    w = result.window
    esc = html.escape
    parts = [
        (
            f"<!doctype html><html><head><meta charset='utf-8'><title>replmon replay "
            f"{esc(fmt_time(w.start_ms))}</title><style>{_CSS}</style></head><body>"
        ),
        f"<h1>replmon replay: {esc(fmt_time(w.start_ms))} → {esc(fmt_time(w.end_ms))}</h1>",
        (
            f"<p class='meta'>{result.events:,} events read, warm-up from "
            f"{esc(fmt_time(w.read_from_ms))}; {len(view.transitions)} alert transitions in the "
            f"window, {len(view.firing_at_start)} already firing at its start; variants: "
            f"{esc(', '.join(v.name for v in result.variants))}. Click a plot to zoom.</p>"
        ),
    ]
    for name, title, png in figures:
        data = base64.b64encode(png).decode()
        parts.append(
            f"<h2>{esc(title)}</h2><figure><img alt='{esc(title)}' src='data:image/png;base64,"
            f"{data}'><figcaption class='meta'>{esc(name)}</figcaption></figure>"
        )
        if name == "alerts.png":
            parts.append(_episodes_table(eps, _root_names(view)))
        if name == "variants.png":
            parts.append(_comparison_tables(summaries, comparisons))
    parts.append(f"<script>{_JS}</script></body></html>")
    return "\n".join(parts)


def _root_names(view) -> dict[str, str]:
    """alert_id of each consequence -> its root, as 'name subject' (or the root's id when the
    root is not among the window's records)."""
    tl = group(view.firing_at_start + view.transitions)
    out = {}
    for inc in tl.incidents:
        root = f"{inc.root['name']} {inc.root['subject']}" if inc.root else inc.alert_id
        out.update(dict.fromkeys(inc.consequences, root))
    return out


def _episodes_table(eps: list[dict], roots: dict[str, str]) -> str:
    esc = html.escape
    rows = "".join(
        f"<tr><td class='{esc(e['severity'])}'>{esc(e['name'])}</td><td>{esc(e['subject'])}</td>"
        f"<td>{esc(fmt_time(e['started_ms']))}</td>"
        f"<td>{esc(fmt_time(e['to_ms'])) if e['resolved'] else 'still firing'}</td>"
        f"<td>{esc(roots.get(e['alert_id'], ''))}</td><td><code>{esc(e['alert_id'])}</code></td></tr>"
        for e in eps
    )
    return (
        "<table><tr><th>alert</th><th>subject</th><th>started</th><th>resolved</th>"
        f"<th>consequence of</th><th>id</th></tr>{rows}</table>"
    )


def _comparison_tables(summaries, comparisons) -> str:
    esc = html.escape
    head = (
        "<table><tr><th>variant</th><th class='num'>alerts</th><th class='num'>ISR shrinks</th>"
        "<th class='num'>replicas removed</th><th class='num'>under-replicated min</th>"
        "<th class='num'>HW stall s</th></tr>"
    )
    body = "".join(
        f"<tr><td>{esc(s.name)}</td><td class='num'>{s.alerts}</td><td class='num'>{s.isr_shrinks}</td>"
        f"<td class='num'>{s.replicas_removed}</td><td class='num'>{s.under_replicated_min:.1f}</td>"
        f"<td class='num'>{s.hw_stalled_s:.1f}</td></tr>"
        for s in summaries
    )
    out = [head + body + "</table>"]
    for c in comparisons:
        rows = [
            f"<tr><td>only with the variant</td><td>{esc(n)}</td><td>{esc(s)}</td><td></td></tr>"
            for n, s in c.only_in_variant
        ]
        rows += [
            f"<tr><td>only with the actual settings</td><td>{esc(n)}</td><td>{esc(s)}</td><td></td></tr>"
            for n, s in c.only_in_actual
        ]
        rows += [
            f"<tr><td>detected {'later' if d > 0 else 'earlier'}</td><td>{esc(n)}</td><td>{esc(s)}</td>"
            f"<td class='num'>{d / 1000:+.1f} s</td></tr>"
            for (n, s), d in sorted(c.detection_delta_ms.items())
        ]
        if not rows:
            rows = ["<tr><td colspan='4'>the same alerts at the same times</td></tr>"]
        out.append(
            f"<h3>{esc(c.variant)} vs actual</h3><table><tr><th>difference</th><th>alert</th>"
            f"<th>subject</th><th>detection Δ</th></tr>{''.join(rows)}</table>"
        )
    return "".join(out)
