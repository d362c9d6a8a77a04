"""SLA objectives and how one window's stored values meet them.

An objective is ``metric op target`` (``calibrated_f1 >= 0.6``), evaluated
*at pi0*: a prior-dependent metric (``f1``, ``precision``, ``auc_pr``, ...)
is read in its calibrated form (:data:`AT_PI0`), so the verdict does not move
when only the real prior moves; prior-invariant metrics are read as they
are. The SLA report (:mod:`app.services.sla`) and the exporter's SLA gauges
(:mod:`app.exporter.series`) both judge windows here. This module needs only
the metric names, not the metric computations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.metrics.labeling import PRIOR_DEPENDENT
from app.statuses import SlaStatus

CALIBRATED_PREFIX = "calibrated_"
AT_PI0: Mapping[str, str] = {
    name: CALIBRATED_PREFIX + name for name in (*PRIOR_DEPENDENT, "auc_pr")
}
"""Prior-dependent metric -> the name of its value at pi0."""


@dataclass(frozen=True)
class Objective:
    """One SLA objective: ``metric op target`` should hold in every window."""

    metric: str
    op: str
    target: float

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Objective:
        """From the stored ``{"metric", "op", "target"}`` (model.sla)."""
        op = str(doc["op"])
        if op not in (">=", "<="):
            raise ValueError(f"objective op {op!r} is not '>=' or '<='")
        return cls(str(doc["metric"]), op, float(doc["target"]))

    @property
    def label(self) -> str:
        """``"calibrated_f1>=0.6"``: the objective's name in reports and in Prometheus."""
        return f"{self.metric}{self.op}{float(self.target)!r}"

    @property
    def evaluated_as(self) -> str:
        """The stored metric read for this objective: its value at pi0 (module docstring)."""
        base, sep, suffix = self.metric.partition("@")
        return AT_PI0.get(base, base) + sep + suffix

    def holds(self, value: float) -> bool:
        return value >= self.target if self.op == ">=" else value <= self.target


@dataclass(frozen=True)
class ObjectiveResult:
    """An objective in one window: the value read, its interval and the status."""

    objective: Objective
    value: float | None
    lower: float | None
    upper: float | None
    status: str
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        o = self.objective
        return {
            "objective": o.label,
            "metric": o.metric,
            "evaluated_as": o.evaluated_as,
            "op": o.op,
            "target": o.target,
            "value": self.value,
            "lower": self.lower,
            "upper": self.upper,
            "status": self.status,
            "reason": self.reason,
        }


def evaluate_objective(
    objective: Objective,
    metrics: Mapping[str, Any],
    intervals: Mapping[str, Any] | None = None,
    reasons: Mapping[str, str] | None = None,
) -> ObjectiveResult:
    """Compare a window's stored value of the objective's metric with its target.

    Parameters
    ----------
    objective : Objective
    metrics : mapping of str to float or None
        The window's metrics (names as in ``evaluate``).
    intervals : mapping of str to {"lower", "upper", ...}, optional
        Credible intervals by metric name.
    reasons : mapping of str to str, optional
        Why a None metric is None.

    Returns
    -------
    ObjectiveResult
        ``met`` / ``breached`` from the point value; ``insufficient_data``
        with the reason when the value is absent or None.
    """
    name = objective.evaluated_as
    value = metrics.get(name)
    bounds = (intervals or {}).get(name) or {}
    lower, upper = bounds.get("lower"), bounds.get("upper")
    if value is None:
        reason = (reasons or {}).get(name)
        if reason is None and name not in metrics:
            reason = f"{name} is not computed for this window"
        return ObjectiveResult(objective, None, lower, upper, SlaStatus.INSUFFICIENT_DATA, reason)
    value = float(value)
    status = SlaStatus.MET if objective.holds(value) else SlaStatus.BREACHED
    return ObjectiveResult(objective, value, lower, upper, status)
