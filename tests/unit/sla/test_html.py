"""The SLA report as an HTML page (app/sla/html.py): self-contained, every
status in the legend, and rendered by a real headless Chromium to a non-blank PNG."""

from __future__ import annotations

import html
import itertools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _png import read_png

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


def _chromium() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and os.environ.get("PRIORWATCH_REQUIRE_POSTGRES") == "1":
        pytest.fail("chromium is required in CI (.ci/run installs it)")
    return found


CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def run_chromium(page: str, tmp_path: Path, *args: str) -> str:
    """Headless Chromium on ``page`` (a file URL) with ``args``; its stdout (skip
    without chromium)."""
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium is not installed")
    html = tmp_path / "report.html"
    html.write_text(page, encoding="utf-8")
    done = subprocess.run(
        [
            chromium,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            *args,
            html.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def screenshot(page: str, tmp_path: Path, size: str = "1200,900") -> np.ndarray:
    """The page rendered by headless Chromium, as pixels (skip without chromium)."""
    png = tmp_path / "report.png"
    run_chromium(page, tmp_path, f"--screenshot={png}", f"--window-size={size}")
    assert png.exists()
    return read_png(png.read_bytes())


def _count_colour(pixels: np.ndarray, hex_colour: str, tolerance: int = 12) -> int:
    rgb = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(pixels[..., :3].astype(int) - rgb).max(axis=2) <= tolerance).sum())


def test_chromium_renders_a_page_that_is_not_blank(tmp_path: Path) -> None:
    pixels = screenshot(report_to_html(report_document()), tmp_path)
    assert pixels.shape[:2] == (900, 1200)
    non_white = int((pixels[..., :3].min(axis=2) < 230).sum())
    assert non_white > 0.01 * 900 * 1200, non_white
    # the SVG drew: status cells in the colours of met, breached and inconclusive
    for status in ("met", "breached", "inconclusive"):
        assert _count_colour(pixels, STATUS_COLOURS[status]) > 200, status


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

MEASURE = """<script>
const root = document.documentElement;
const box = (e) => { const b = e.getBoundingClientRect(); return [b.left, b.right, b.width]; };
document.body.insertAdjacentHTML("beforeend", "<pre id=measure></pre>");
document.getElementById("measure").textContent = JSON.stringify({
  scrollWidth: root.scrollWidth, clientWidth: root.clientWidth,
  cells: [...document.querySelectorAll("svg.strip rect")].map(box),
  points: [...document.querySelectorAll("svg.chart circle")].map(box),
  charts: [...document.querySelectorAll("svg.chart")].map(box),
});
</script>"""


def _measure(page: str, tmp_path: Path, width: int) -> dict[str, Any]:
    """Layout of the page in Chromium at ``width`` px (a script added for the test only)."""
    dom = run_chromium(
        page.replace("</body>", MEASURE + "</body>"),
        tmp_path,
        f"--window-size={width},1000",
        "--dump-dom",
    )
    found = re.search(r'<pre id="measure">(.*?)</pre>', dom, flags=re.S)
    assert found is not None, dom[-2000:]
    return dict(json.loads(html.unescape(found.group(1))))


@pytest.mark.parametrize("width", [700, 1400])
def test_every_window_is_visible_without_horizontal_scrolling(tmp_path: Path, width: int) -> None:
    page = reports_to_html(SEGMENT_REPORTS)
    layout = _measure(page, tmp_path, width)
    client = layout["clientWidth"]
    assert width - 40 <= client <= width  # the window size took effect (less a scrollbar)
    assert layout["scrollWidth"] <= client, layout["scrollWidth"]
    windows = sum(len(r["windows"]) for r in SEGMENT_REPORTS)
    assert len(layout["cells"]) == windows
    for left, right, cell_width in layout["cells"]:
        assert cell_width >= 1.0 and left >= 0 and right <= client, (left, right, cell_width)
    assert layout["points"] and all(
        left >= 0 and right <= client for left, right, _ in layout["points"]
    )
    assert all(right <= client for _, right, _ in layout["charts"])


def test_the_page_prints_to_a_pdf_with_a_page_per_section(tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    run_chromium(
        reports_to_html(SEGMENT_REPORTS),
        tmp_path,
        f"--print-to-pdf={pdf}",
        "--no-pdf-header-footer",
    )
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF-")
    pages = len(re.findall(rb"/Type\s*/Page(?![s\w])", data))
    # every segment starts a page, and so does its table of windows
    assert pages >= 2 * len(SEGMENT_REPORTS), pages


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


def test_look_at_the_page(tmp_path: Path) -> None:
    """Screenshots at both widths (kept in tmp_path) are not blank: the strip drew."""
    page = reports_to_html(SEGMENT_REPORTS)
    for width in (700, 1400):
        pixels = screenshot(page, tmp_path, size=f"{width},1000")
        assert pixels.shape[1] == width
        assert _count_colour(pixels, STATUS_COLOURS["breached"]) > 50, width
