"""The SLA report as one self-contained HTML page (``Accept: text/html``).

Rendered from the report's JSON documents (``SlaReport.to_dict()``, one per
segment), so it shows exactly what the JSON and CSV forms say: pi0 and the
decision rule, then per segment the compliance summary, a status strip with
one cell per window, per objective a chart of its value at pi0 over the
windows against the target (credible intervals as whiskers, points coloured
by status), the observed prior against pi0, and a table of every window.
Inline CSS and inline SVG only: no script, no external asset. The charts
scale to the width of the page (a phone or a 700 px window shows every
window) and a print stylesheet starts each segment and each window table on
a new page. Statuses are rendered generically: any status string gets a
colour (known ones a fixed one) and an entry in the legend.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any

from app.sla.chart_ticks import nice_ticks, readable_instant, tick_decimals, time_labels

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
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;
max-width:1100px;padding:0 16px;color:#212121;background:#fff;
-webkit-print-color-adjust:exact;print-color-adjust:exact}
h1{font-size:22px;margin:0 0 4px}h2{font-size:19px;margin:32px 0 8px}
h3{font-size:16px;margin:24px 0 8px}
.sub{color:#616161;margin:0 0 16px}.rule{font-size:13px;color:#424242;max-width:75ch}
.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{border:1px solid #e0e0e0;border-radius:6px;padding:10px 14px;min-width:110px}
.card b{display:block;font-size:22px}
.legend span{display:inline-block;margin-right:14px;font-size:13px}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:5px;
vertical-align:-1px}
svg.chart{display:block;width:100%;height:auto}
.wide{overflow-x:auto}
table{border-collapse:collapse;font-size:13px;margin-top:8px}
th,td{border-bottom:1px solid #eee;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}
td.status{font-weight:600}
svg text{font-size:13px;fill:#424242}
@page{margin:14mm}
@media print{body{margin:0;max-width:none;padding:0}
section.segment+section.segment,.windows{break-before:page}
.block,tr{break-inside:avoid}h2,h3{break-after:avoid}.wide{overflow:visible}}
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
    """Maps window index and value to SVG coordinates of one chart (of at least one
    window)."""

    def __init__(self, windows: Sequence[Mapping[str, Any]], values: Sequence[float]) -> None:
        lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
        self.ticks = nice_ticks(lo, hi)
        self.lo, self.hi = self.ticks[0], self.ticks[-1]
        self.starts = [datetime.fromisoformat(w_start(w)) for w in windows]
        length = datetime.fromisoformat(str(windows[0]["end"])) - self.starts[0]
        self.window_seconds = round(length.total_seconds())
        self.windows = len(windows)

    def x(self, i: int) -> float:
        inner = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
        return MARGIN_LEFT + inner * (i + 0.5) / self.windows

    def y(self, value: float) -> float:
        inner = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
        return MARGIN_TOP + inner * (self.hi - value) / (self.hi - self.lo)

    def frame(self) -> list[str]:
        """Axis lines, y ticks at round values and x labels at round instants."""
        parts = [
            f'<line x1="{MARGIN_LEFT}" y1="{MARGIN_TOP}" x2="{MARGIN_LEFT}" '
            f'y2="{HEIGHT - MARGIN_BOTTOM}" stroke="#9e9e9e"/>',
            f'<line x1="{MARGIN_LEFT}" y1="{HEIGHT - MARGIN_BOTTOM}" x2="{WIDTH - MARGIN_RIGHT}" '
            f'y2="{HEIGHT - MARGIN_BOTTOM}" stroke="#9e9e9e"/>',
        ]
        decimals = tick_decimals(self.ticks[1] - self.ticks[0])
        for value in self.ticks:
            y = self.y(value)
            parts.append(
                f'<line x1="{MARGIN_LEFT}" y1="{y:.1f}" x2="{WIDTH - MARGIN_RIGHT}" y2="{y:.1f}" '
                f'stroke="#f0f0f0"/><text x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" '
                f'text-anchor="end">{value:.{decimals}f}</text>'
            )
        for i, label in time_labels(self.starts, self.window_seconds):
            parts.append(
                f'<text x="{self.x(i):.1f}" y="{HEIGHT - MARGIN_BOTTOM + 18}" '
                f'text-anchor="middle">{escape(label)}</text>'
            )
        return parts


def _svg(parts: Sequence[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" '
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
    axes = _Axes(windows, values)
    parts = axes.frame()
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
    axes = _Axes(windows, [0.0, *values])
    parts = axes.frame()
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
    """SVG: one coloured cell per window, its overall status (scaled to the page width;
    the gap between cells shrinks with them, so no cell vanishes)."""
    n = max(len(windows), 1)
    inner = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    cell = inner / n
    gap = min(1.0, 0.15 * cell)
    parts = []
    for i, w in enumerate(windows):
        status = str(w["status"])
        parts.append(
            f'<rect x="{MARGIN_LEFT + i * cell:.2f}" y="4" width="{cell - gap:.2f}" '
            f'height="24" fill="{status_colour(status)}"><title>'
            f"{escape(readable_instant(w_start(w)))}: {escape(status)}</title></rect>"
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart strip" '
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
                interval = f"<br>[{_number(r['lower'])}, {_number(r['upper'])}]"
            colour = status_colour(str(r["status"]))
            cells.append(
                f"<td>{_number(r.get('value'))}{interval} "
                f'<span style="color:{colour}">{escape(str(r["status"]))}</span></td>'
            )
        colour = status_colour(str(w["status"]))
        rows.append(
            f"<tr><td>{escape(readable_instant(w_start(w)))}</td><td>{w.get('n', '')}</td>"
            f"<td>{_number(w.get('prior'), 4)}</td>"
            f"<td>{_completeness(w.get('completeness'))}</td>"
            f'<td class="status" style="color:{colour}">{escape(str(w["status"]))}</td>'
            + "".join(cells)
            + "</tr>"
        )
    return (
        '<div class="wide"><table><thead><tr><th>window start</th><th>n</th><th>prior</th>'
        f"<th>labelled</th><th>status</th>{head}</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )


def _completeness(value: Any) -> str:
    """A window's completeness as a percentage ("" for a window without unlabelled rows).

    >>> _completeness(0.4567), _completeness(None)
    ('46%', '')
    """
    return "" if value is None else f"{100.0 * float(value):.0f}%"


def _rule(report: Mapping[str, Any]) -> str:
    """pi0 and the decision rule, as the report states them."""
    items = "".join(
        f"<li><b>{escape(str(o['objective']))}</b> (read as {escape(str(o['evaluated_as']))}): "
        f"{escape(str(o['rule']))}</li>"
        for o in report["objectives"]
        if o.get("rule")
    )
    return (
        '<div class="rule">'
        f"<p>Every objective is read at the reference prior <b>pi0 = {report['pi0']:g}</b>: "
        "the value the metric would have if the share of positives were pi0, "
        "whatever the share in the window.</p>"
        + (f"<p>{escape(str(report['rule']))}</p>" if report.get("rule") else "")
        + (f"<ul>{items}</ul>" if items else "")
        + "</div>"
    )


def _segment_name(report: Mapping[str, Any]) -> str:
    return str(report.get("segment") or "all traffic")


def _segment_section(report: Mapping[str, Any], heading: bool) -> str:
    """One segment's summary, charts and windows (``heading``: name the segment)."""
    windows = report["windows"]
    parts = [f"<h2>Segment: {escape(_segment_name(report))}</h2>"] if heading else []
    parts += [
        '<div class="block"><h3>Compliance</h3>',
        _summary_cards(report["summary"]),
        _objective_summary(report["summary"]),
        "</div>",
    ]
    if not windows:
        parts.append("<p>No window holds data in this range.</p>")
        return f'<section class="segment">{"".join(parts)}</section>'
    parts += [
        '<div class="block"><h3>Status per window</h3>',
        status_strip(windows),
        _legend(_statuses(report)),
        "</div>",
    ]
    for i, objective in enumerate(report["objectives"]):
        parts += [
            f'<div class="block"><h3>{escape(str(objective["objective"]))} '
            f"<small>(read as {escape(str(objective['evaluated_as']))})</small></h3>",
            objective_chart(windows, i, objective),
            "</div>",
        ]
    parts += [
        '<div class="block"><h3>Observed prior against pi0</h3>',
        prior_chart(windows, float(report["pi0"])),
        "</div>",
        '<div class="windows"><h3>Windows</h3>',
        _window_table(report),
        "</div>",
    ]
    return f'<section class="segment">{"".join(parts)}</section>'


def _segment_overview(reports: Sequence[Mapping[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{escape(_segment_name(r))}</td><td>{r['summary'].get('windows', 0)}</td>"
        f"<td>{r['summary'].get('windows_met', 0)}</td>"
        f"<td>{r['summary'].get('windows_breached', 0)}</td>"
        f"<td>{_percent(r['summary'].get('compliance_ratio'))}</td></tr>"
        for r in reports
    )
    return (
        "<table><thead><tr><th>segment</th><th>windows</th><th>met</th><th>breached</th>"
        f"<th>compliance</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def report_to_html(report: Mapping[str, Any]) -> str:
    """The page of one SLA report document (``SlaReport.to_dict()``)."""
    return reports_to_html([report])


def reports_to_html(reports: Sequence[Mapping[str, Any]]) -> str:
    """The page of a model's SLA reports over the same range, one section per segment
    (one report: the page of that segment alone)."""
    first = reports[0]
    title = f"SLA report: {first['model']}"
    scope = _segment_name(first) if len(reports) == 1 else f"{len(reports)} segments"
    head = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">{escape(scope)} · windows from '
        f"{escape(readable_instant(str(first['from'])))} "
        f"to {escape(readable_instant(str(first['to'])))} · objectives read at "
        f"pi0 = {first['pi0']:g}</p>",
        _rule(first),
    ]
    if len(reports) > 1:
        head += ["<h2>Compliance by segment</h2>", _segment_overview(reports)]
    body = head + [_segment_section(r, heading=len(reports) > 1) for r in reports]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )
