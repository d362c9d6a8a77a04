"""The SLA report as an HTML page (app/sla/html.py): self-contained, every
status in the legend, segments, print rules and round ticks (the Chromium renders are
in tests/deploy/test_sla_html_chromium.py)."""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np

from app.sla.html import STATUS_COLOURS, report_to_html, reports_to_html, status_colour

STATUSES = ("met", "met", "breached", "inconclusive", "insufficient_data", "pending", "novel")


def _objective(value: float | None, status: str, target: float) -> dict[str, Any]:
    bounds = (None, None) if value is None else (value - 0.05, value + 0.05)
    return {
        "objective": f"f1>={target!r}",
        "metric": "f1",
        "evaluated_as": "calibrated_f1",
        "op": ">=",
        "target": target,
        "value": value,
        "lower": bounds[0],
        "upper": bounds[1],
        "status": status,
        "reason": None,
    }


def report_document(model: str = "fraud-scorer") -> dict[str, Any]:
    """A report as ``SlaReport.to_dict()`` writes it, one window per status of STATUSES."""
    windows = []
    for i, status in enumerate(STATUSES):
        value = None if status in ("insufficient_data", "pending") else 0.5 + 0.05 * i
        windows.append(
            {
                "start": f"2026-11-25T{i:02d}:00:00Z",
                "end": f"2026-11-25T{i + 1:02d}:00:00Z",
                "segment": None,
                "n": 1000 + i,
                "prior": 0.01 * (i + 1),
                "window_status": "fresh",
                "status": status,
                "objectives": [_objective(value, status, 0.6)],
            }
        )
    return {
        "model": model,
        "pi0": 0.02,
        "segment": None,
        "from": "2026-11-25T00:00:00Z",
        "to": "2026-11-25T07:00:00Z",
        "objectives": [
            {
                "objective": "f1>=0.6",
                "metric": "f1",
                "evaluated_as": "calibrated_f1",
                "op": ">=",
                "target": 0.6,
            }
        ],
        "summary": {
            "windows": 7,
            "windows_met": 2,
            "windows_breached": 1,
            "windows_inconclusive": 1,
            "windows_insufficient_data": 1,
            "windows_pending": 1,
            "compliance_ratio": 2 / 3,
            "objectives": [
                {
                    "objective": "f1>=0.6",
                    "windows_met": 2,
                    "windows_breached": 1,
                    "windows_inconclusive": 1,
                    "compliance_ratio": 2 / 3,
                }
            ],
        },
        "windows": windows,
    }


def test_page_is_self_contained() -> None:
    page = report_to_html(report_document())
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page.lower()
    assert not re.search(r"\b(src|href)\s*=", page)
    assert "@import" not in page and "url(" not in page
    # the only URL is the SVG namespace, which is an identifier, not a fetch
    assert set(re.findall(r"https?://[^\"' ]+", page)) == {"http://www.w3.org/2000/svg"}


def test_every_status_has_a_colour_and_a_legend_entry() -> None:
    page = report_to_html(report_document())
    legend = re.search(r'<div class="legend">(.*?)</div>', page)
    assert legend is not None
    for status in set(STATUSES):
        assert f"</i>{status}</span>" in legend.group(1)
    assert status_colour("novel") not in STATUS_COLOURS.values()
    assert status_colour("novel") == status_colour("novel")  # stable across calls
    assert status_colour("inconclusive") == STATUS_COLOURS["inconclusive"]


def test_summary_cards_show_compliance_and_every_window_count() -> None:
    page = report_to_html(report_document())
    cards = dict(
        (label, value)
        for value, label in re.findall(r'<div class="card"><b>([^<]*)</b>([^<]*)</div>', page)
    )
    assert cards == {
        "compliance": "66.7%",
        "windows": "7",
        "met": "2",
        "breached": "1",
        "inconclusive": "1",
        "insufficient data": "1",
        "pending": "1",
    }


def test_charts_plot_each_defined_value_with_its_interval() -> None:
    doc = report_document()
    page = report_to_html(doc)
    svgs = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    strip, objective, prior = svgs
    assert strip.count("<rect") == len(STATUSES)
    defined = [w for w in doc["windows"] if w["objectives"][0]["value"] is not None]
    assert objective.count("<circle") == len(defined)
    assert objective.count('stroke-width="2"') == len(defined)  # interval whiskers
    assert "target &gt;= 0.6" in objective
    # the undefined values of windows 4 and 5 break the line: windows 0-3 joined, 6 alone
    [line] = re.findall(r'<polyline points="([^"]*)"', objective)
    assert len(line.split()) == 4
    assert prior.count("<circle") == len(STATUSES)
    assert "pi0 = 0.02" in prior


def test_names_are_escaped() -> None:
    page = report_to_html(report_document(model="<b>x&y</b>"))
    assert "<b>x&y</b>" not in page
    assert "&lt;b&gt;x&amp;y&lt;/b&gt;" in page


def test_report_without_windows_says_so() -> None:
    doc = {**report_document(), "windows": []}
    page = report_to_html(doc)
    assert "No window holds data" in page
    assert "<svg" not in page


# --- a client-facing document: any width, print, every segment ----------------------


def long_report(segment: str | None, hours: int = 72) -> dict[str, Any]:
    """A report of ``hours`` hourly windows and two objectives, statuses cycling."""
    cycle = ("met", "met", "breached", "inconclusive", "insufficient_data", "met")
    windows = []
    for h in range(hours):
        status = cycle[h % len(cycle)]
        value = None if status == "insufficient_data" else 0.55 + 0.01 * (h % 9)
        start = np.datetime64("2026-11-23T00:00") + np.timedelta64(h, "h")
        windows.append(
            {
                "start": f"{start}:00Z",
                "end": f"{start + np.timedelta64(1, 'h')}:00Z",
                "segment": segment,
                "n": 900 + h,
                "prior": 0.02 + 0.001 * (h % 7),
                "status": status,
                "objectives": [_objective(value, status, 0.6), _objective(value, status, 0.58)],
            }
        )
    doc = report_document()
    objectives = [
        {**doc["objectives"][0], "rule": "interval: met if lower >= 0.6; breached if upper < 0.6"},
        {**doc["objectives"][0], "objective": "f1>=0.58", "target": 0.58, "rule": "point"},
    ]
    return {
        **doc,
        "segment": segment,
        "from": "2026-11-23T00:00:00Z",
        "to": "2026-11-26T00:00:00Z",
        "rule": "Each window is judged on the metric at the reference prior pi0.",
        "objectives": objectives,
        "windows": windows,
    }


SEGMENT_REPORTS = [long_report(None), long_report("eu"), long_report("us")]


def test_print_stylesheet_breaks_pages_between_sections() -> None:
    page = reports_to_html(SEGMENT_REPORTS)
    media = re.search(r"@media print\{(.*)\}", page, flags=re.S)
    assert media is not None
    assert "section.segment+section.segment,.windows{break-before:page}" in media.group(1)
    assert ".block,tr{break-inside:avoid}" in media.group(1)


def test_a_section_per_segment_after_an_overview() -> None:
    page = reports_to_html(SEGMENT_REPORTS)
    assert page.count('<section class="segment">') == 3
    assert [*re.findall(r"<h2>Segment: ([^<]*)</h2>", page)] == ["all traffic", "eu", "us"]
    overview = re.search(r"<h2>Compliance by segment</h2>\s*<table>.*?</table>", page, flags=re.S)
    assert overview is not None and overview.group(0).count("<tr>") == 4
    # one segment alone: no overview, no segment heading
    single = report_to_html(SEGMENT_REPORTS[1])
    assert "Compliance by segment" not in single and "<h2>Segment:" not in single


def test_the_page_states_pi0_and_the_decision_rule() -> None:
    page = report_to_html(SEGMENT_REPORTS[0])
    assert "reference prior <b>pi0 = 0.02</b>" in page
    assert "Each window is judged on the metric at the reference prior pi0." in page
    assert "<li><b>f1&gt;=0.6</b> (read as calibrated_f1): interval: met if lower" in page


def test_times_and_ticks_are_round() -> None:
    page = report_to_html(SEGMENT_REPORTS[0])
    assert "windows from 2026-11-23 00:00 UTC to 2026-11-26 00:00 UTC" in page
    objective = re.findall(r"<svg.*?</svg>", page, flags=re.S)[1]
    labels = re.findall(
        r'<text x="[^"]*" y="[^"]*" text-anchor="(end|middle)">([^<]*)</text>', objective
    )
    y_ticks = [float(text) for anchor, text in labels if anchor == "end"]
    steps = {round(b - a, 9) for a, b in itertools.pairwise(y_ticks)}
    assert len(steps) == 1 and steps.pop() in (0.01, 0.02, 0.025, 0.05, 0.1)
    times = [text for anchor, text in labels if anchor == "middle"]
    # 72 hourly windows: a label every 12 hours, the date where it changes
    assert times == ["Nov 23 00:00", "12:00", "Nov 24 00:00", "12:00", "Nov 25 00:00", "12:00"]
