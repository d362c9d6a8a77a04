"""The SLA report as one self-contained HTML page (``Accept: text/html``).

Rendered from the report's JSON document (``SlaReport.to_dict()``), so it
shows exactly what the JSON and CSV forms say: the compliance summary, per
objective a chart of its value at pi0 over the windows against the target
(credible intervals as whiskers, points coloured by status), a status strip
with one cell per window, the observed prior against pi0, and a table of
every window. Inline CSS and inline SVG only: no script, no external asset.
Statuses are rendered generically: any status string gets a colour (known
ones a fixed one) and an entry in the legend.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

STATUS_COLOURS: Mapping[str, str] = {
    "met": "#2e7d32",
    "breached": "#c62828",
    "inconclusive": "#ef8f00",
    "insufficient_data": "#9e9e9e",
    "pending": "#64b5f6",
    "no_objectives": "#bdbdbd",
}
"""Colours of the statuses known today; others get one from :data:`SPARE_COLOURS`."""
SPARE_COLOURS = ("#6a1b9a", "#00838f", "#5d4037", "#ad1457", "#283593", "#558b2f")

WIDTH, HEIGHT = 960, 240
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 16, 16, 36

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#212121;
background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.sub{color:#616161;margin:0 0 16px}
.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{border:1px solid #e0e0e0;border-radius:6px;padding:10px 14px;min-width:110px}
.card b{display:block;font-size:22px}
.legend span{display:inline-block;margin-right:14px;font-size:13px}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:5px;
vertical-align:-1px}
table{border-collapse:collapse;font-size:13px;margin-top:8px}
th,td{border-bottom:1px solid #eee;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}
td.status{font-weight:600}
svg text{font-size:11px;fill:#424242}
"""


def status_colour(status: str) -> str:
    """The colour of a status: fixed for known ones, stable per name for others."""
    known = STATUS_COLOURS.get(status)
    if known is not None:
        return known
    digest = hashlib.sha256(status.encode()).digest()
    return SPARE_COLOURS[digest[0] % len(SPARE_COLOURS)]


def _number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    return f"{float(value):.{digits}f}"


def _percent(value: Any) -> str:
    return "–" if value is None else f"{100.0 * float(value):.1f}%"


def w_start(window: Mapping[str, Any]) -> str:
    return str(window["start"])


class _Axes:
    """Maps window index and value to SVG coordinates of one chart."""

    def __init__(self, windows: int, values: Sequence[float]) -> None:
        lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
        pad = (hi - lo) * 0.08 or max(abs(hi) * 0.1, 0.01)
        # a chart of non-negative values (rates, priors) does not dip below 0
        self.lo = max(lo - pad, 0.0) if lo >= 0.0 else lo - pad
        self.hi = hi + pad
        self.windows = max(windows, 1)

    def x(self, i: int) -> float:
        inner = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
        return MARGIN_LEFT + inner * (i + 0.5) / self.windows

    def y(self, value: float) -> float:
        inner = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
        return MARGIN_TOP + inner * (self.hi - value) / (self.hi - self.lo)

    def frame(self, starts: Sequence[str]) -> list[str]:
        """Axis lines, y ticks and a few x labels (window starts)."""
        parts = [
            f'<line x1="{MARGIN_LEFT}" y1="{MARGIN_TOP}" x2="{MARGIN_LEFT}" '
            f'y2="{HEIGHT - MARGIN_BOTTOM}" stroke="#9e9e9e"/>',
            f'<line x1="{MARGIN_LEFT}" y1="{HEIGHT - MARGIN_BOTTOM}" x2="{WIDTH - MARGIN_RIGHT}" '
            f'y2="{HEIGHT - MARGIN_BOTTOM}" stroke="#9e9e9e"/>',
        ]
        for k in range(5):
            value = self.lo + (self.hi - self.lo) * k / 4
            y = self.y(value)
            parts.append(
                f'<line x1="{MARGIN_LEFT}" y1="{y:.1f}" x2="{WIDTH - MARGIN_RIGHT}" y2="{y:.1f}" '
                f'stroke="#f0f0f0"/><text x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" '
                f'text-anchor="end">{value:.3g}</text>'
            )
        step = max(1, math.ceil(len(starts) / 8))
        for i in range(0, len(starts), step):
            label = escape(starts[i][5:16].replace("T", " "))
            parts.append(
                f'<text x="{self.x(i):.1f}" y="{HEIGHT - MARGIN_BOTTOM + 16}" '
                f'text-anchor="middle">{label}</text>'
            )
        return parts


def _svg(parts: Sequence[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>{''.join(parts)}</svg>"
    )


def _hline(axes: _Axes, value: float, colour: str, label: str) -> str:
    y = axes.y(value)
    return (
        f'<line x1="{MARGIN_LEFT}" y1="{y:.1f}" x2="{WIDTH - MARGIN_RIGHT}" y2="{y:.1f}" '
        f'stroke="{colour}" stroke-width="1.5" stroke-dasharray="6 4"/>'
        f'<text x="{WIDTH - MARGIN_RIGHT - 4}" y="{y - 4:.1f}" text-anchor="end" '
        f'style="fill:{colour}">{escape(label)}</text>'
    )


def _polylines(axes: _Axes, values: Sequence[Any], colour: str) -> list[str]:
    """Lines joining consecutive defined values; an undefined value breaks the line."""
    runs: list[list[str]] = [[]]
    for i, v in enumerate(values):
        if v is None:
            runs.append([])
        else:
            runs[-1].append(f"{axes.x(i):.1f},{axes.y(float(v)):.1f}")
    return [
        f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour}"/>'
        for run in runs
        if len(run) > 1
    ]


def objective_chart(
    windows: Sequence[Mapping[str, Any]], index: int, objective: Mapping[str, Any]
) -> str:
    """SVG: the objective's value per window with its interval, against the target."""
    results = [w["objectives"][index] for w in windows]
    values: list[float] = [float(objective["target"])]
    for r in results:
        values.extend(float(r[k]) for k in ("value", "lower", "upper") if r.get(k) is not None)
    axes = _Axes(len(windows), values)
    parts = axes.frame([str(w["start"]) for w in windows])
    parts.append(
        _hline(
            axes,
            float(objective["target"]),
            "#424242",
            f"target {objective['op']} {objective['target']}",
        )
    )
    parts += _polylines(axes, [r.get("value") for r in results], "#90a4ae")
    for i, r in enumerate(results):
        x = axes.x(i)
        colour = status_colour(str(r["status"]))
        if r.get("lower") is not None and r.get("upper") is not None:
            y1, y2 = axes.y(float(r["lower"])), axes.y(float(r["upper"]))
            parts.append(
                f'<line x1="{x:.1f}" y1="{y1:.1f}" x2="{x:.1f}" y2="{y2:.1f}" '
                f'stroke="{colour}" stroke-width="2" opacity="0.55"/>'
            )
        if r.get("value") is not None:
            tip = f"{w_start(windows[i])}: {_number(r['value'])} ({r['status']})"
            parts.append(
                f'<circle cx="{x:.1f}" cy="{axes.y(float(r["value"])):.1f}" r="4" '
                f'fill="{colour}"><title>{escape(tip)}</title></circle>'
            )
    return _svg(parts, f"{objective['objective']} per window")


def prior_chart(windows: Sequence[Mapping[str, Any]], pi0: float) -> str:
    """SVG: the observed prior per window against pi0."""
    priors = [w.get("prior") for w in windows]
    values = [pi0, *(float(p) for p in priors if p is not None)]
    axes = _Axes(len(windows), [0.0, *values])
    parts = axes.frame([w_start(w) for w in windows])
    parts.append(_hline(axes, pi0, "#1565c0", f"pi0 = {pi0:g}"))
    parts += _polylines(axes, priors, "#6d4c41")
    for i, p in enumerate(priors):
        if p is not None:
            tip = f"{w_start(windows[i])}: prior {float(p):.4f}"
            parts.append(
                f'<circle cx="{axes.x(i):.1f}" cy="{axes.y(float(p)):.1f}" r="3" fill="#6d4c41">'
                f"<title>{escape(tip)}</title></circle>"
            )
    return _svg(parts, "observed prior per window against pi0")


def status_strip(windows: Sequence[Mapping[str, Any]]) -> str:
    """SVG: one coloured cell per window, its overall status."""
    n = max(len(windows), 1)
    inner = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    cell = inner / n
    parts = []
    for i, w in enumerate(windows):
        status = str(w["status"])
        parts.append(
            f'<rect x="{MARGIN_LEFT + i * cell:.1f}" y="4" width="{max(cell - 1, 1):.1f}" '
            f'height="24" fill="{status_colour(status)}"><title>'
            f"{escape(w_start(w))}: {escape(status)}</title></rect>"
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="32" '
        f'viewBox="0 0 {WIDTH} 32" role="img" aria-label="status per window">'
        f"{''.join(parts)}</svg>"
    )


def _legend(statuses: Sequence[str]) -> str:
    items = "".join(
        f'<span><i class="sw" style="background:{status_colour(s)}"></i>{escape(s)}</span>'
        for s in statuses
    )
    return f'<div class="legend">{items}</div>'


def _statuses(report: Mapping[str, Any]) -> list[str]:
    """Every status in the report, window or objective, in order of first appearance."""
    seen: dict[str, None] = {}
    for w in report["windows"]:
        seen[str(w["status"])] = None
        for r in w["objectives"]:
            seen[str(r["status"])] = None
    return list(seen)


def _summary_cards(summary: Mapping[str, Any]) -> str:
    cards = [
        ("compliance", _percent(summary.get("compliance_ratio"))),
        ("windows", str(summary.get("windows", 0))),
    ]
    cards.extend(
        (key.removeprefix("windows_").replace("_", " "), str(value))
        for key, value in summary.items()
        if key.startswith("windows_")
    )
    return (
        '<div class="cards">'
        + "".join(f'<div class="card"><b>{escape(v)}</b>{escape(k)}</div>' for k, v in cards)
        + "</div>"
    )


def _objective_summary(summary: Mapping[str, Any]) -> str:
    rows = summary.get("objectives") or []
    if not rows:
        return ""
    counts = [k for k in rows[0] if k.startswith("windows_")]
    head = "".join(f"<th>{escape(k.removeprefix('windows_'))}</th>" for k in counts)
    body = "".join(
        f"<tr><td>{escape(str(r['objective']))}</td>"
        + "".join(f"<td>{escape(str(r.get(k)))}</td>" for k in counts)
        + f"<td>{_percent(r.get('compliance_ratio'))}</td></tr>"
        for r in rows
    )
    return f"<table><tr><th>objective</th>{head}<th>compliance</th></tr>{body}</table>"


def _window_table(report: Mapping[str, Any]) -> str:
    objectives = report["objectives"]
    head = "".join(
        f"<th>{escape(str(o['objective']))}<br><small>{escape(str(o['evaluated_as']))}</small></th>"
        for o in objectives
    )
    rows = []
    for w in report["windows"]:
        cells = []
        for r in w["objectives"]:
            interval = ""
            if r.get("lower") is not None and r.get("upper") is not None:
                interval = f" [{_number(r['lower'])}, {_number(r['upper'])}]"
            colour = status_colour(str(r["status"]))
            cells.append(
                f"<td>{_number(r.get('value'))}{interval} "
                f'<span style="color:{colour}">{escape(str(r["status"]))}</span></td>'
            )
        colour = status_colour(str(w["status"]))
        rows.append(
            f"<tr><td>{escape(w_start(w))}</td><td>{w.get('n', '')}</td>"
            f"<td>{_number(w.get('prior'), 4)}</td>"
            f'<td class="status" style="color:{colour}">{escape(str(w["status"]))}</td>'
            + "".join(cells)
            + "</tr>"
        )
    return (
        f"<table><tr><th>window start</th><th>n</th><th>prior</th><th>status</th>{head}</tr>"
        + "".join(rows)
        + "</table>"
    )


def report_to_html(report: Mapping[str, Any]) -> str:
    """The page of one SLA report document (``SlaReport.to_dict()``)."""
    windows = report["windows"]
    segment = report.get("segment") or "all traffic"
    title = f"SLA report: {report['model']}"
    sections = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">{escape(str(segment))} · windows from {escape(str(report["from"]))} '
        f"to {escape(str(report['to']))} · objectives read at pi0 = {report['pi0']:g}</p>",
        "<h2>Compliance</h2>",
        _summary_cards(report["summary"]),
        _objective_summary(report["summary"]),
    ]
    if windows:
        sections += [
            "<h2>Status per window</h2>",
            status_strip(windows),
            _legend(_statuses(report)),
        ]
        for i, objective in enumerate(report["objectives"]):
            sections += [
                f"<h2>{escape(str(objective['objective']))} "
                f"<small>(read as {escape(str(objective['evaluated_as']))})</small></h2>",
                objective_chart(windows, i, objective),
            ]
        sections += [
            "<h2>Observed prior against pi0</h2>",
            prior_chart(windows, float(report["pi0"])),
            "<h2>Windows</h2>",
            _window_table(report),
        ]
    else:
        sections.append("<p>No window holds data in this range.</p>")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        + "\n".join(sections)
        + "</body></html>\n"
    )
