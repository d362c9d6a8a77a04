"""How an undefined metric is reported: the one place that decides.

A metric whose formula divides by zero is *undefined* for that input. The
vectorised metric functions return ``nan`` there; the public mappings turn
``nan`` into ``None`` and keep the reason next to it, never a silent 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Score:
    """A metric value, or ``None`` with the reason it is undefined."""

    value: float | None
    reason: str | None = None


def to_optional(x: float) -> float | None:
    """``None`` for a non-finite float (an undefined metric), else the float."""
    x = float(x)
    return x if math.isfinite(x) else None


def to_score(x: float, reason: str) -> Score:
    """Wrap a float; ``reason`` is attached only when ``x`` is undefined (nan)."""
    value = to_optional(x)
    return Score(value, None if value is not None else reason)
