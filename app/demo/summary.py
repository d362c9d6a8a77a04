"""What ``priorwatch simulate`` prints: one line per window, then one per phase.

Input is what the service answers (``GET .../windows`` and ``GET .../sla``
documents), matched to the scenario's phases by window start. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.demo.scenario import Scenario
from app.text_tables import format_number, format_table
from app.timegrid import isoformat_z

SHOWN: tuple[tuple[str, str], ...] = (
    ("precision", "precision"),
    ("calibrated_precision", "precision@pi0"),
    ("auc_pr", "auc_pr"),
    ("calibrated_auc_pr", "auc_pr@pi0"),
    ("recall", "recall"),
)
"""(metric, column title) shown per window: raw and at-pi0 forms side by side."""


@dataclass(frozen=True)
class WindowLine:
    """One window as the service reported it, with the phase that produced it."""

    start: str
    phase: str
    prior: float | None
    metrics: Mapping[str, float | None]
    estimated_prior: float | None
    label_free: str
    verdict: str
    sla: str


def window_lines(
    scenario: Scenario,
    first: datetime,
    length: timedelta,
    windows: Sequence[Mapping[str, Any]],
    sla_windows: Sequence[Mapping[str, Any]] = (),
) -> list[WindowLine]:
    """The scenario's windows in order, each with the service's result (if any).

    A window missing from ``windows`` shows no metrics and verdict ``-``.
    """
    by_start = {w["start"]: w for w in windows if w.get("segment") is None}
    sla_by_start = {w["start"]: w for w in sla_windows}
    lines = []
    for offset in range(scenario.windows):
        start = isoformat_z(first + offset * length)
        w = by_start.get(start, {})
        estimate = w.get("estimate") or {}
        lines.append(
            WindowLine(
                start=start,
                phase=scenario.phase_of(offset).name,
                prior=w.get("prior"),
                metrics=w.get("metrics") or {},
                estimated_prior=(estimate.get("prior") or {}).get("value"),
                label_free=str((estimate.get("fit") or {}).get("verdict") or "-"),
                verdict=str((w.get("drift") or {}).get("verdict") or "-"),
                sla=str(sla_by_start.get(start, {}).get("status", "-")),
            )
        )
    return lines


def _short_start(start: str) -> str:
    """``2026-11-26T10:00:00Z`` -> ``11-26 10:00``."""
    return f"{start[5:10]} {start[11:16]}"


ESTIMATE_HEADERS = ("prior (scores only)", "label-free")
"""Columns of the label-free estimate: the prior estimated before the labels, its verdict."""


def per_window_table(lines: Sequence[WindowLine]) -> str:
    """One row per window: start, phase, prior, the :data:`SHOWN` metrics, the label-free
    estimate of the prior and its verdict, the drift verdict, SLA."""
    headers = [
        "window (UTC)",
        "phase",
        "prior",
        *(title for _, title in SHOWN),
        *ESTIMATE_HEADERS,
        "verdict",
        "sla",
    ]
    rows = [
        [
            _short_start(line.start),
            line.phase,
            format_number(line.prior, 4),
            *(format_number(line.metrics.get(m)) for m, _ in SHOWN),
            format_number(line.estimated_prior, 4),
            line.label_free,
            line.verdict,
            line.sla,
        ]
        for line in lines
    ]
    return format_table(headers, rows)


def _mean(values: Sequence[float | None]) -> float | None:
    defined = [v for v in values if v is not None]
    return sum(defined) / len(defined) if defined else None


def _counts(values: Sequence[str]) -> str:
    return " ".join(f"{name} x{n}" for name, n in Counter(values).most_common())


def per_phase_table(lines: Sequence[WindowLine]) -> str:
    """One row per phase (in order of appearance): mean prior and metrics, verdicts and
    SLA statuses with their counts."""
    phases: dict[str, list[WindowLine]] = {}
    for line in lines:
        phases.setdefault(line.phase, []).append(line)
    headers = [
        "phase",
        "prior",
        *(title for _, title in SHOWN),
        *ESTIMATE_HEADERS,
        "verdicts",
        "sla",
    ]
    rows = [
        [
            phase,
            format_number(_mean([x.prior for x in group]), 4),
            *(format_number(_mean([x.metrics.get(m) for x in group])) for m, _ in SHOWN),
            format_number(_mean([x.estimated_prior for x in group]), 4),
            _counts([x.label_free for x in group]),
            _counts([x.verdict for x in group]),
            _counts([x.sla for x in group]),
        ]
        for phase, group in phases.items()
    ]
    return format_table(headers, rows)
