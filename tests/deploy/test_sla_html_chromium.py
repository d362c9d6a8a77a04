"""The SLA report's HTML page rendered by a real headless Chromium (deploy tier: a
browser process): a non-blank PNG, every window visible at any width, a PDF with a
page per section. The page's own checks are in tests/unit/sla/test_html.py."""

from __future__ import annotations

import html
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
from unit.sla.test_html import SEGMENT_REPORTS, report_document

from app.sla.html import STATUS_COLOURS, report_to_html, reports_to_html


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


def test_look_at_the_page(tmp_path: Path) -> None:
    """Screenshots at both widths (kept in tmp_path) are not blank: the strip drew."""
    page = reports_to_html(SEGMENT_REPORTS)
    for width in (700, 1400):
        pixels = screenshot(page, tmp_path, size=f"{width},1000")
        assert pixels.shape[1] == width
        assert _count_colour(pixels, STATUS_COLOURS["breached"]) > 50, width
