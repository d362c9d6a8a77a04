"""Which window series a scrape writes: the compact default, the full set, or a choice.

The compact exposition keeps, of each family labelled by ``metric``, only the
metric names the shipped dashboard (deploy/grafana/dashboards) and rules
(deploy/prometheus/rules) read; every other family is always written in
full. tests/unit/exporter/test_exposition.py parses every PromQL expression
of both and checks that each series they select is kept, so the default never
drops a used series. docs/reading.md gives the series count per window of
each choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.exporter import names
from app.exporter.text import Series

_CALIBRATED = ("f1", "precision", "auc_pr", "mcc")

COMPACT_METRICS: Mapping[str, frozenset[str]] = {
    names.WINDOW_METRIC: frozenset(
        {
            "prior",
            "recall",
            "specificity",
            "balanced_accuracy",
            "weighted_accuracy",
            *_CALIBRATED,
            *(f"calibrated_{m}" for m in _CALIBRATED),
            *(f"ops_{m}" for m in _CALIBRATED),
        }
    ),
    names.WINDOW_METRIC_LOWER: frozenset(f"calibrated_{m}" for m in _CALIBRATED),
    names.WINDOW_METRIC_UPPER: frozenset(f"calibrated_{m}" for m in _CALIBRATED),
    names.WINDOW_ESTIMATE: frozenset({"prior", "precision", "f1"}),
    names.WINDOW_ESTIMATE_LOWER: frozenset({"prior"}),
    names.WINDOW_ESTIMATE_UPPER: frozenset({"prior"}),
    names.ESTIMATE_ERROR: frozenset({"prior", "precision", "f1", "auc_pr"}),
    names.WINDOW_COMPLETED: frozenset({"prior", "precision", "f1"}),
}
"""Per family labelled by ``metric`` (the last label), the names the compact exposition
keeps; the families not listed here are always written whole."""


@dataclass(frozen=True)
class Exposition:
    """The families of :data:`COMPACT_METRICS` written whole (``full``); the others compact.

    Parse one from the ``PRIORWATCH_METRICS_EXPOSITION`` setting with :meth:`parse`.
    """

    full: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, value: str) -> Exposition:
        """``"compact"``, ``"full"`` or a comma-separated list of families to write whole
        (names of :data:`COMPACT_METRICS`); ValueError names an unknown family."""
        choice = value.strip()
        if choice == "compact":
            return cls()
        if choice == "full":
            return cls(frozenset(COMPACT_METRICS))
        families = frozenset(part.strip() for part in choice.split(",") if part.strip())
        unknown = sorted(families - COMPACT_METRICS.keys())
        if unknown or not families:
            raise ValueError(
                f"'compact', 'full' or a comma-separated list of {', '.join(COMPACT_METRICS)}; "
                f"unknown: {', '.join(unknown) or '(empty)'}"
            )
        return cls(families)

    def select(self, samples: Series) -> Series:
        """``samples`` without the ``metric`` values the exposition leaves out (pure)."""
        return {name: self._kept(name, values) for name, values in samples.items()}

    def _kept(
        self, family: str, values: list[tuple[tuple[str, ...], float]]
    ) -> list[tuple[tuple[str, ...], float]]:
        allowed = None if family in self.full else COMPACT_METRICS.get(family)
        if allowed is None:
            return values
        return [sample for sample in values if sample[0][-1] in allowed]


COMPACT = Exposition()
"""The default: every family, the ``metric``-labelled ones compact."""
