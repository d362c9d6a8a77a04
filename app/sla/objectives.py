"""SLA objectives and how one window's stored values meet them.

An objective is ``metric op target`` (``calibrated_f1 >= 0.6``), evaluated
*at pi0*: a prior-dependent metric (``f1``, ``precision``, ``auc_pr``, ...)
is read in its calibrated form (:data:`AT_PI0`), so the verdict does not move
when only the real prior moves; prior-invariant metrics are read as they
are. The SLA report (:mod:`app.services.read.sla_report`) and the exporter's SLA gauges
(:mod:`app.exporter.series`) both judge windows here, a partially labelled window
on its completed values (:func:`judged_documents`). This module needs only
the metric names, not the metric computations.

The status is decided from the evidence (:meth:`Objective.status`): with
``evidence="interval"`` (the default) ``breached`` when the metric's 95%
credible interval lies entirely on the wrong side of the target, ``met``
when it lies entirely on the right side (the target itself counts as the
right side), ``inconclusive`` otherwise or when the window has no interval;
with ``evidence="point"`` (chosen by the client, or forced for a metric that
has no interval: :func:`has_interval`) the point value alone decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.metrics.labeling import CALIBRATED_PREFIX, LABELING_METRICS, PRIOR_DEPENDENT
from app.statuses import SlaStatus

AT_PI0: Mapping[str, str] = {
    name: CALIBRATED_PREFIX + name for name in (*PRIOR_DEPENDENT, "auc_pr")
}
"""Prior-dependent metric -> the name of its value at pi0."""

INTERVAL = "interval"
POINT = "point"
EVIDENCE = (INTERVAL, POINT)
"""The objective's ``evidence`` settings; ``interval`` is the default."""

SLA_GAUGE: Mapping[str, float] = {
    SlaStatus.MET: 1.0,
    SlaStatus.INCONCLUSIVE: 0.5,
    SlaStatus.BREACHED: 0.0,
}
"""Value of the ``priorwatch_sla_objective_met`` gauge per status; no sample otherwise."""

OPS_WITH_INTERVALS = frozenset({"ops_f1", "ops_mcc", "ops_precision", "ops_accuracy"})
"""The labeling OPS the worker stores an interval for (the OPS metrics of ``evaluate``
that are labeling metrics; a test keeps the two lists equal)."""

AREAS_WITH_INTERVALS = frozenset(
    {"auc_roc", "gini", "ops_auc_pr", "ops_auc_roc", "ops_auc_lift", "calibrated_auc_pr", "ks"}
)
"""Curve metrics the worker stores an interval for (app/services/windows/compute.py: a
bootstrap, or the closed forms of ``calibrated_auc_pr`` and ``ks``, docs/intervals.md)."""


DETAIL_PENDING_REASON = (
    "the credible interval of {name} on the current data is not computed yet (the window's "
    "detail follows its summary): decided once it is"
)
"""The reason of an objective left ``pending`` because its window's interval is older than
its value (or not computed yet)."""


def has_interval(name: str) -> bool:
    """True when the worker stores an interval (credible, bootstrap or closed form) for ``name``.

    Labeling metrics at the primary threshold that do not move with the prior
    (``recall``, ``balanced_accuracy``, ...), every ``calibrated_<labeling>``,
    the labeling OPS of :data:`OPS_WITH_INTERVALS`, and the curve areas of
    :data:`AREAS_WITH_INTERVALS`. Metrics at another threshold (``@t=``),
    ``weighted_accuracy``, probability metrics (``brier``, ``log_loss``) and
    raw prior-dependent metrics have none.
    """
    if "@" in name:
        return False
    if name in AREAS_WITH_INTERVALS or name in OPS_WITH_INTERVALS:
        return True
    if name.startswith(CALIBRATED_PREFIX):
        return name.removeprefix(CALIBRATED_PREFIX) in LABELING_METRICS
    return name in LABELING_METRICS and not LABELING_METRICS[name].prior_dependent


OP_NAMES: Mapping[str, str] = {">=": "ge", "<=": "le"}
"""Objective op -> its name in a default objective id."""


def default_objective_id(metric: str, op: str) -> str:
    """``"calibrated_f1_ge"``: the id of an objective that names none (no target in it)."""
    return f"{metric}_{OP_NAMES[op]}"


@dataclass(frozen=True)
class Objective:
    """One SLA objective: ``metric op target`` should hold in every window.

    ``requested`` is the client's ``evidence`` setting (``interval`` or
    ``point``); :attr:`evidence` is what is used. ``id`` names it in
    Prometheus labels; it never contains the target, so a changed target
    keeps the same series. Default: :func:`default_objective_id`.
    """

    metric: str
    op: str
    target: float
    requested: str = INTERVAL
    id: str = field(default="", kw_only=True)

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", default_objective_id(self.metric, self.op))

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Objective:
        """From the stored ``{"metric", "op", "target", "evidence"?, "id"?}`` (model.sla)."""
        op = str(doc["op"])
        if op not in OP_NAMES:
            raise ValueError(f"objective op {op!r} is not '>=' or '<='")
        evidence = str(doc.get("evidence", INTERVAL))
        if evidence not in EVIDENCE:
            raise ValueError(f"objective evidence {evidence!r} is not 'interval' or 'point'")
        return cls(
            str(doc["metric"]), op, float(doc["target"]), evidence, id=str(doc.get("id") or "")
        )

    @property
    def evidence(self) -> str:
        """``interval`` or ``point``: point when requested or when the metric has no interval."""
        return self.requested if has_interval(self.evaluated_as) else POINT

    @property
    def evidence_reason(self) -> str | None:
        """Why the point value decides although the interval was requested (else None)."""
        if self.requested == INTERVAL and self.evidence == POINT:
            return f"{self.evaluated_as} has no credible interval: the point value decides"
        return None

    @property
    def decision_rule(self) -> str:
        """This objective's rule in one line (the ``rule`` of each CSV row)."""
        t = repr(float(self.target))
        if self.evidence == POINT:
            return f"point: met if value {self.op} {t}, else breached"
        good, bad = ("lower", "upper") if self.op == ">=" else ("upper", "lower")
        wrong = "<" if self.op == ">=" else ">"
        return (
            f"interval: met if {good} {self.op} {t}; breached if {bad} {wrong} {t}; "
            "else inconclusive"
        )

    def to_dict(self) -> dict[str, Any]:
        """The objective in the report's ``objectives`` list."""
        return {
            "objective": self.label,
            "id": self.id,
            "metric": self.metric,
            "evaluated_as": self.evaluated_as,
            "op": self.op,
            "target": self.target,
            "evidence": self.evidence,
            "evidence_reason": self.evidence_reason,
            "rule": self.decision_rule,
        }

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

    def status(self, value: float, lower: float | None, upper: float | None) -> SlaStatus:
        """``met``, ``breached`` or ``inconclusive`` for a value and its interval."""
        if self.evidence == POINT:
            return SlaStatus.MET if self.holds(value) else SlaStatus.BREACHED
        if lower is None or upper is None:
            return SlaStatus.INCONCLUSIVE
        good, bad = (lower, upper) if self.op == ">=" else (upper, lower)
        if self.holds(good):
            return SlaStatus.MET
        return SlaStatus.INCONCLUSIVE if self.holds(bad) else SlaStatus.BREACHED


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
            "id": o.id,
            "metric": o.metric,
            "evaluated_as": o.evaluated_as,
            "op": o.op,
            "target": o.target,
            "value": self.value,
            "lower": self.lower,
            "upper": self.upper,
            "evidence": o.evidence,
            "status": self.status,
            "reason": self.reason,
        }


Documents = tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, str]]
"""A window's ``metrics``, ``intervals`` and ``reasons`` as an objective reads them."""


def judged_documents(
    metrics: Mapping[str, Any],
    intervals: Mapping[str, Any],
    reasons: Mapping[str, str],
    maturity: Mapping[str, Any] | None,
) -> Documents:
    """The values, intervals and reasons a window's objectives are judged on.

    A window holding unlabelled and labelled rows is judged on its completed
    window (its stored ``maturity`` document: docs/maturity.md), not on its
    labelled sample; any other window (``maturity`` None) on its labelled
    ``metrics`` and ``intervals``.
    """
    if maturity is None:
        return metrics, intervals, reasons
    completed_reasons = {**reasons, **maturity.get("reasons", {})}
    return maturity.get("metrics", {}), maturity.get("intervals", {}), completed_reasons


def evaluate_objective(
    objective: Objective,
    metrics: Mapping[str, Any],
    intervals: Mapping[str, Any] | None = None,
    reasons: Mapping[str, str] | None = None,
    *,
    detail_current: bool = True,
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
    detail_current : bool
        False when the window's detail tier (every interval) is older than its
        metrics, or not computed yet (a summary refresh, docs/worker.md
        "Tiered refresh"): an objective judged on an interval is then
        ``pending`` (reason :data:`DETAIL_PENDING_REASON`, null bounds) until
        the detail of the same data is stored, so no verdict mixes versions
        and none is taken from an interval that is missing for that reason.

    Returns
    -------
    ObjectiveResult
        ``met`` / ``breached`` / ``inconclusive`` from the evidence
        (:meth:`Objective.status`); ``insufficient_data`` with the reason
        when the value is absent or None; ``pending`` while the interval
        that decides it is not computed yet.
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
    if not detail_current and objective.evidence == INTERVAL:
        reason = DETAIL_PENDING_REASON.format(name=name)
        return ObjectiveResult(objective, value, None, None, SlaStatus.PENDING, reason)
    status = objective.status(value, lower, upper)
    reason = None
    if status == SlaStatus.INCONCLUSIVE and (lower is None or upper is None):
        why = bounds.get("reason")
        reason = f"no credible interval of {name} in this window" + (f": {why}" if why else "")
    return ObjectiveResult(objective, value, lower, upper, status, reason)
