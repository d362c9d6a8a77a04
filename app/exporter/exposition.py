"""Which window series a scrape writes: the compact default, the full set, or a choice.

The compact exposition keeps, of each family trimmed by its last label
(``metric``; ``kind`` for the drift streak), only the values the shipped
dashboard (deploy/grafana/dashboards) and rules (deploy/prometheus/rules)
read; every other family is always written in full. Two more choices keep it
small: ``balanced_accuracy`` is left out, since it is exactly
(``recall`` + ``specificity``) / 2 of the same stored window and the dashboard
computes it so (docs/reading.md, "Derived in PromQL"); and the interval bounds
are kept for ``calibrated_precision`` and ``calibrated_f1`` only (the
dashboard draws no band for calibrated MCC and AUC-PR). The raw ``prior``,
``precision``, ``f1`` and ``mcc`` stay: they are the raw side of the "raw vs
prior-invariant" panels and what a query of one's own expects to find.
tests/unit/exporter/test_exposition.py parses every PromQL expression of both
and checks that each series they select is kept, so the default never drops a
used series. docs/reading.md gives the series count per window of each choice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.exporter import names

_CALIBRATED = ("f1", "precision", "auc_pr", "mcc")
_BANDED = ("f1", "precision")
"""The calibrated metrics whose interval bounds the compact exposition writes."""

COMPACT_METRICS: Mapping[str, frozenset[str]] = {
    names.WINDOW_METRIC: frozenset(
        {
            "prior",
            "recall",
            "specificity",
            "weighted_accuracy",
            *_CALIBRATED,
            *(f"calibrated_{m}" for m in _CALIBRATED),
            *(f"ops_{m}" for m in _CALIBRATED),
        }
    ),
    names.WINDOW_METRIC_LOWER: frozenset(f"calibrated_{m}" for m in _BANDED),
    names.WINDOW_METRIC_UPPER: frozenset(f"calibrated_{m}" for m in _BANDED),
    names.WINDOW_ESTIMATE: frozenset({"prior", "precision", "f1"}),
    names.WINDOW_ESTIMATE_LOWER: frozenset({"prior"}),
    names.WINDOW_ESTIMATE_UPPER: frozenset({"prior"}),
    names.ESTIMATE_ERROR: frozenset({"prior", "precision", "f1", "auc_pr"}),
    names.WINDOW_COMPLETED: frozenset({"prior", "precision", "f1"}),
    names.DRIFT_STREAK: frozenset({"likelihood"}),
}
"""Per trimmed family, the values of its last label (``metric``; ``kind`` for
the drift streak) that the compact exposition keeps; the families not listed
here are always written whole."""


@dataclass(frozen=True)
class Exposition:
    """The families of :data:`COMPACT_METRICS` written whole (``full``); the others compact.

    The service's default comes from ``PRIORWATCH_METRICS_EXPOSITION`` (:meth:`parse`); a
    model's ``exposition`` setting, when set, replaces it for that model's series
    (:meth:`of_setting`).
    """

    full: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, value: str) -> Exposition:
        """``"compact"``, ``"full"`` or a comma-separated list of families to write whole
        (names of :data:`COMPACT_METRICS`); ValueError names an unknown family."""
        choice = value.strip()
        if choice in PRESETS:
            return PRESETS[choice]
        families = frozenset(part.strip() for part in choice.split(",") if part.strip())
        unknown = sorted(families - COMPACT_METRICS.keys())
        if unknown or not families:
            raise ValueError(
                f"'compact', 'full' or a comma-separated list of {', '.join(COMPACT_METRICS)}; "
                f"unknown: {', '.join(unknown) or '(empty)'}"
            )
        return cls(families)

    @classmethod
    def of_setting(cls, value: str | Sequence[str] | None, default: Exposition) -> Exposition:
        """A model's stored ``exposition`` setting: a preset, a list of families written
        whole, or None (``default``, the service's). Validated when it was stored; a name
        not of :data:`COMPACT_METRICS` (none is) is ignored."""
        if value is None:
            return default
        if isinstance(value, str):
            return PRESETS.get(value, default)
        return cls(frozenset(value).intersection(COMPACT_METRICS))

    def kept(self, family: str) -> frozenset[str] | None:
        """The last-label values of ``family`` written (None: every one)."""
        return None if family in self.full else COMPACT_METRICS.get(family)

    def keeps(self, family: str, value: str) -> bool:
        """Whether the sample of ``family`` whose last label is ``value`` is written."""
        allowed = self.kept(family)
        return allowed is None or value in allowed


COMPACT = Exposition()
"""The default: every family, the trimmed ones compact."""

FULL = Exposition(frozenset(COMPACT_METRICS))
"""Every series of every family."""

PRESETS: Mapping[str, Exposition] = {"compact": COMPACT, "full": FULL}
"""The named choices of the setting (a model's and the service's)."""
