"""The SLA report as an HTML page (app/services/sla_html.py): self-contained, every
status in the legend, and rendered by a real headless Chromium to a non-blank PNG."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _png import read_png

from app.services.sla_html import STATUS_COLOURS, report_to_html, status_colour

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


def screenshot(page: str, tmp_path: Path, size: str = "1200,900") -> np.ndarray:
    """The page rendered by headless Chromium, as pixels (skip without chromium)."""
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium is not installed")
    html = tmp_path / "report.html"
    html.write_text(page, encoding="utf-8")
    png = tmp_path / "report.png"
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={png}",
            f"--window-size={size}",
            html.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and png.exists(), done.stderr[-2000:]
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
