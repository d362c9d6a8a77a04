"""SLA report: each window's objectives against the model's reference prior pi0.

An objective is ``metric op target`` (``calibrated_f1 >= 0.6``). It is
evaluated *at pi0*: an objective on a prior-dependent metric (``f1``,
``precision``, ``auc_pr``, ...) reads its calibrated form (``calibrated_f1``,
the value the metric would have at the class mix pi0 with the window's
error rates), so the report does not move when only the real prior moves.
Prior-invariant metrics (``recall``, ``calibrated_*``, ``ops_*``,
``weighted_accuracy``, ...) are read as they are. ``evaluated_as`` in the
report names the metric actually read.

Per window and objective the status is decided from the evidence
(:data:`RULE`): with ``evidence="interval"`` (the default) the objective is
``breached`` when the metric's 95% credible interval lies entirely on the
wrong side of the target, ``met`` when it lies entirely on the right side
(the target itself counts as the right side), and ``inconclusive``
otherwise; with ``evidence="point"`` (chosen by the client, or forced for a
metric that has no interval: :func:`has_interval`) the point value alone
decides between ``met`` and ``breached``. ``insufficient_data``: the metric
is undefined or a class has fewer than ``min_class_count`` examples; windows
still waiting for the worker are ``pending``. A window is ``breached`` when
any objective is breached, ``met`` when all are met, ``inconclusive`` when
some is inconclusive, else ``insufficient_data``. The compliance ratio is
met / (met + breached); inconclusive, insufficient and pending windows are
counted beside it and enter no ratio.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.metrics.evaluate import OPS_METRICS
from app.metrics.labeling import LABELING_METRICS, PRIOR_DEPENDENT
from app.services.model_config import ModelConfig
from app.services.window_read import (
    FRESH,
    MAX_STORED_WINDOWS,
    WindowView,
    iso,
    resolve_range,
    segment_key,
    stored_windows,
)

MET = "met"
BREACHED = "breached"
INCONCLUSIVE = "inconclusive"
INSUFFICIENT_DATA = "insufficient_data"
PENDING = "pending"
NO_OBJECTIVES = "no_objectives"

SLA_GAUGE: Mapping[str, float] = {MET: 1.0, INCONCLUSIVE: 0.5, BREACHED: 0.0}
"""Value of the ``priorwatch_sla_objective_met`` gauge per status; no sample otherwise."""

CALIBRATED_PREFIX = "calibrated_"
AT_PI0: Mapping[str, str] = {
    name: CALIBRATED_PREFIX + name for name in (*PRIOR_DEPENDENT, "auc_pr")
}
"""Prior-dependent metric -> the name of its value at pi0."""

INTERVAL = "interval"
POINT = "point"
EVIDENCE = (INTERVAL, POINT)
"""The objective's ``evidence`` settings; ``interval`` is the default."""

AREAS_WITH_INTERVALS = frozenset({"auc_roc", "gini", "ops_auc_pr", "ops_auc_roc", "ops_auc_lift"})
"""Curve metrics the worker stores a bootstrap interval for (app/services/window_compute.py;
``calibrated_auc_pr`` and ``ks`` have none, docs/intervals.md)."""

RULE = (
    "Each window is judged on the metric at the reference prior pi0. "
    "evidence=interval: breached when the whole 95% credible interval lies on the wrong side "
    "of the target, met when it lies entirely on the right side (the target included), "
    "inconclusive otherwise or when the window has no interval. evidence=point (the "
    "client's choice, or a metric without an interval): met or breached from the point "
    "value alone. insufficient_data: the metric is undefined or a class is too scarce; "
    "pending: the window waits for the worker. A window is breached when any objective is "
    "breached, met when all are met, inconclusive when some objective is inconclusive. "
    "compliance_ratio = met / (met + breached); inconclusive, insufficient_data and pending "
    "windows are counted beside it and enter no ratio."
)
"""The decision rule, stated in every report (``rule``)."""


def has_interval(name: str) -> bool:
    """True when the worker stores a credible or bootstrap interval for metric ``name``.

    Labeling metrics at the primary threshold that do not move with the prior
    (``recall``, ``balanced_accuracy``, ...), every ``calibrated_<labeling>``,
    ``ops_<labeling>`` of the OPS metrics, and the curve areas of
    :data:`AREAS_WITH_INTERVALS`. Metrics at another threshold (``@t=``),
    ``weighted_accuracy``, probability metrics (``brier``, ``log_loss``) and
    raw prior-dependent metrics have none.
    """
    if "@" in name:
        return False
    if name in AREAS_WITH_INTERVALS:
        return True
    if name.startswith(CALIBRATED_PREFIX):
        return name.removeprefix(CALIBRATED_PREFIX) in LABELING_METRICS
    if name.startswith("ops_"):
        base = name.removeprefix("ops_")
        return base in OPS_METRICS and base in LABELING_METRICS
    return name in LABELING_METRICS and not LABELING_METRICS[name].prior_dependent


CSV_COLUMNS: tuple[str, ...] = (
    "window_start",
    "window_end",
    "segment",
    "n",
    "prior",
    "objective",
    "metric",
    "evaluated_as",
    "op",
    "target",
    "value",
    "lower",
    "upper",
    "evidence",
    "rule",
    "status",
    "reason",
)
"""Columns of the CSV report, one row per (window, objective)."""


@dataclass(frozen=True)
class Objective:
    """One SLA objective: ``metric op target`` should hold in every window.

    ``requested`` is the client's ``evidence`` setting (``interval`` or
    ``point``); :attr:`evidence` is what is used.
    """

    metric: str
    op: str
    target: float
    requested: str = INTERVAL

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Objective:
        """From the stored ``{"metric", "op", "target", "evidence"?}`` (model.sla)."""
        op = str(doc["op"])
        if op not in (">=", "<="):
            raise ValueError(f"objective op {op!r} is not '>=' or '<='")
        evidence = str(doc.get("evidence", INTERVAL))
        if evidence not in EVIDENCE:
            raise ValueError(f"objective evidence {evidence!r} is not 'interval' or 'point'")
        return cls(str(doc["metric"]), op, float(doc["target"]), evidence)

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

    def status(self, value: float, lower: float | None, upper: float | None) -> str:
        """``met``, ``breached`` or ``inconclusive`` for a value and its interval (:data:`RULE`)."""
        if self.evidence == POINT:
            return MET if self.holds(value) else BREACHED
        if lower is None or upper is None:
            return INCONCLUSIVE
        good, bad = (lower, upper) if self.op == ">=" else (upper, lower)
        if self.holds(good):
            return MET
        return INCONCLUSIVE if self.holds(bad) else BREACHED


def model_objectives(model: ModelConfig) -> tuple[Objective, ...]:
    """The model's SLA objectives, in their registered order."""
    return tuple(Objective.from_document(o) for o in model.sla)


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
            "evidence": o.evidence,
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
        ``met`` / ``breached`` / ``inconclusive`` from the evidence
        (:meth:`Objective.status`); ``insufficient_data`` with the reason
        when the value is absent or None.
    """
    name = objective.evaluated_as
    value = metrics.get(name)
    bounds = (intervals or {}).get(name) or {}
    lower, upper = bounds.get("lower"), bounds.get("upper")
    if value is None:
        reason = (reasons or {}).get(name)
        if reason is None and name not in metrics:
            reason = f"{name} is not computed for this window"
        return ObjectiveResult(objective, None, lower, upper, INSUFFICIENT_DATA, reason)
    value = float(value)
    status = objective.status(value, lower, upper)
    reason = None
    if status == INCONCLUSIVE and (lower is None or upper is None):
        reason = f"no credible interval of {name} in this window"
    return ObjectiveResult(objective, value, lower, upper, status, reason)


def _window_status(results: Sequence[ObjectiveResult]) -> str:
    statuses = {r.status for r in results}
    if not statuses:
        return NO_OBJECTIVES
    if PENDING in statuses:
        return PENDING
    if BREACHED in statuses:
        return BREACHED
    if statuses == {MET}:
        return MET
    if INCONCLUSIVE in statuses:
        return INCONCLUSIVE
    return INSUFFICIENT_DATA


@dataclass(frozen=True)
class SlaWindow:
    """One window of the report."""

    window: WindowView
    results: tuple[ObjectiveResult, ...]

    @property
    def status(self) -> str:
        return _window_status(self.results)

    def to_dict(self) -> dict[str, Any]:
        w = self.window
        return {
            "start": iso(w.start),
            "end": iso(w.end),
            "segment": w.segment,
            "n": w.n,
            "prior": w.prior,
            "window_status": w.status,
            "status": self.status,
            "objectives": [r.to_dict() for r in self.results],
        }


@dataclass(frozen=True)
class Tally:
    """Counts of window statuses; compliance = met / (met + breached)."""

    met: int = 0
    breached: int = 0
    inconclusive: int = 0
    insufficient_data: int = 0
    pending: int = 0

    @classmethod
    def of(cls, statuses: Iterable[str]) -> Tally:
        s = list(statuses)
        return cls(
            s.count(MET),
            s.count(BREACHED),
            s.count(INCONCLUSIVE),
            s.count(INSUFFICIENT_DATA),
            s.count(PENDING),
        )

    @property
    def compliance_ratio(self) -> float | None:
        decided = self.met + self.breached
        return self.met / decided if decided else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "windows_met": self.met,
            "windows_breached": self.breached,
            "windows_inconclusive": self.inconclusive,
            "windows_insufficient_data": self.insufficient_data,
            "windows_pending": self.pending,
            "compliance_ratio": self.compliance_ratio,
        }


@dataclass(frozen=True)
class SlaReport:
    """The report of one model over a range of windows of one segment."""

    model: str
    pi0: float
    segment: str | None
    start: datetime
    end: datetime
    objectives: tuple[Objective, ...]
    windows: tuple[SlaWindow, ...] = field(default_factory=tuple)

    def summary(self) -> dict[str, Any]:
        """Window counts and compliance ratio, overall and per objective."""
        overall = Tally.of(w.status for w in self.windows)
        per_objective = []
        for i, o in enumerate(self.objectives):
            tally = Tally.of(w.results[i].status for w in self.windows)
            per_objective.append({"objective": o.label, **tally.to_dict()})
        return {
            "windows": len(self.windows),
            **overall.to_dict(),
            "objectives": per_objective,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "pi0": self.pi0,
            "segment": self.segment,
            "from": iso(self.start),
            "to": iso(self.end),
            "rule": RULE,
            "objectives": [o.to_dict() for o in self.objectives],
            "summary": self.summary(),
            "windows": [w.to_dict() for w in self.windows],
        }


def _csv_number(value: float | int | None) -> str:
    return "" if value is None else repr(value)


def report_to_csv(report: SlaReport) -> str:
    """The report as CSV (RFC 4180, header :data:`CSV_COLUMNS`): one row per window
    and objective; undefined values are empty cells."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for w in report.windows:
        view = w.window
        for r in w.results:
            o = r.objective
            writer.writerow(
                [
                    iso(view.start),
                    iso(view.end),
                    view.segment or "",
                    view.n,
                    _csv_number(view.prior),
                    o.label,
                    o.metric,
                    o.evaluated_as,
                    o.op,
                    repr(o.target),
                    _csv_number(r.value),
                    _csv_number(r.lower),
                    _csv_number(r.upper),
                    o.evidence,
                    o.decision_rule,
                    r.status,
                    r.reason or "",
                ]
            )
    return out.getvalue()


def window_results(
    objectives: Sequence[Objective], window: WindowView
) -> tuple[ObjectiveResult, ...]:
    """Every objective in one window (``pending`` while the window is not fresh)."""
    if window.status != FRESH:
        return tuple(
            ObjectiveResult(o, None, None, None, PENDING, "the window waits for the worker")
            for o in objectives
        )
    return tuple(
        evaluate_objective(o, window.metrics, window.intervals, window.reasons) for o in objectives
    )


def sla_report(
    session: Session,
    model: ModelConfig,
    *,
    segment: str | None,
    start_from: datetime | None,
    to: datetime | None,
    now: datetime,
) -> SlaReport:
    """The SLA report of the model's windows of one segment starting in [from, to).

    Reads the stored windows (never merged ones); the range defaults and
    limits are those of listing windows (app.services.window_read.resolve_range).
    """
    objectives = model_objectives(model)
    key = segment_key(model, segment)
    window_range = resolve_range(
        model.window, start_from, to, now=now, max_windows=MAX_STORED_WINDOWS
    )
    windows = stored_windows(session, model, key, window_range)
    return SlaReport(
        model=model.name,
        pi0=model.pi0,
        segment=segment,
        start=window_range.start,
        end=window_range.end,
        objectives=objectives,
        windows=tuple(SlaWindow(w, window_results(objectives, w)) for w in windows),
    )
