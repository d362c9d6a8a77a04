"""Drift baseline scheduling: which windows make a window's baseline period, and back.

A model's drift reference setting (``model.drift["reference"]``, the name the
API keeps) is a fixed baseline period ``{"from", "to"}``, the
``{"trailing_windows": k}`` before each window, or null. The windows of the
baseline period, summed, are the window's reference sums (docs/design.md,
"Glossary"). :func:`baseline_period` answers "which windows are summed into the
reference of this window"; :func:`dependent_windows` answers the converse,
"whose reference includes this window", so that the worker recomputes them
when the window changes (docs/worker.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.services.models.config import ModelConfig
from app.timegrid import parse_instant, window_length
from app.timegrid import window_start as window_start_of


@dataclass(frozen=True)
class BaselinePeriod:
    """Which windows of a segment make the baseline period of a window.

    The reference is the sum of the windows of the same model and segment
    whose start lies in ``[start, end)``. ``contains_window`` is True when
    the window itself belongs to the reference (its verdict is "reference").
    """

    start: datetime
    end: datetime
    contains_window: bool


def baseline_period(
    model: ModelConfig, window_start: datetime, window_end: datetime | None = None
) -> BaselinePeriod | None:
    """The baseline period of the window [window_start, window_end), or None.

    Parameters
    ----------
    model : ModelConfig
        ``model.drift["reference"]`` is ``{"from", "to"}`` (a fixed baseline
        period, ISO 8601), ``{"trailing_windows": k}`` (the k windows before
        this one) or null (no reference).
    window_start, window_end : datetime
        The window (``window_end`` defaults to one model window after the
        start; give it for merged windows).

    Returns
    -------
    BaselinePeriod or None
        For a fixed period, the windows starting in [from, to); a window is
        inside it when it lies wholly in [from, to). For trailing windows,
        [start - k * length, start); never inside.
    """
    spec = model.drift.get("reference")
    if not spec:
        return None
    end = window_end if window_end is not None else window_start + window_length(model.window)
    if spec.get("trailing_windows"):
        k = int(spec["trailing_windows"])
        return BaselinePeriod(
            window_start - k * window_length(model.window), window_start, contains_window=False
        )
    start_ref, end_ref = _parse_time(spec["from"]), _parse_time(spec["to"])
    # Every model window of [window_start, end) starts in [from, to): end <= to
    # rounded up to the model's window grid.
    to_grid = window_start_of(end_ref, model.window)
    if to_grid < end_ref:
        to_grid += window_length(model.window)
    inside = start_ref <= window_start and end <= to_grid
    return BaselinePeriod(start_ref, end_ref, contains_window=inside)


def _parse_time(value: Any) -> datetime:
    return parse_instant(value, "drift.reference")


@dataclass(frozen=True)
class DependentWindows:
    """The windows whose drift reference includes a given window.

    Windows of the same model and segment starting in ``[start_from,
    start_to)`` (None: unbounded) and not in ``exclude``.
    """

    start_from: datetime | None
    start_to: datetime | None
    exclude: tuple[datetime, datetime] | None


def dependent_windows(model: ModelConfig, window_start: datetime) -> DependentWindows | None:
    """Which windows must be recomputed when the window at ``window_start`` changes.

    A fixed reference period: if the window is in it, every window outside
    it. Trailing k windows: the k windows after it. No reference: none.
    """
    spec = model.drift.get("reference")
    if not spec:
        return None
    length = window_length(model.window)
    if spec.get("trailing_windows"):
        k = int(spec["trailing_windows"])
        return DependentWindows(window_start + length, window_start + (k + 1) * length, None)
    start_ref, end_ref = _parse_time(spec["from"]), _parse_time(spec["to"])
    if not start_ref <= window_start < end_ref:
        return None
    return DependentWindows(None, None, (start_ref, end_ref))
