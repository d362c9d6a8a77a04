"""SLA report: each window's objectives against the model's reference prior pi0.

An objective is ``metric op target`` (``calibrated_f1 >= 0.6``). It is
evaluated *at pi0*: an objective on a prior-dependent metric (``f1``,
``precision``, ``auc_pr``, ...) reads its calibrated form (``calibrated_f1``,
the value the metric would have at the class mix pi0 with the window's
error rates), so the report does not move when only the real prior moves.
Prior-invariant metrics (``recall``, ``calibrated_*``, ``ops_*``,
``weighted_accuracy``, ...) are read as they are. ``evaluated_as`` in the
report names the metric actually read.

Per window and objective the status is ``met``, ``breached`` or
``insufficient_data`` (the metric is undefined or a class has fewer than
``min_class_count`` examples); windows still waiting for the worker are
``pending`` and count in no ratio. A window is ``met`` when all its
objectives are met, ``breached`` when any is breached, else
``insufficient_data``. The compliance ratio is met / (met + breached).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.metrics.labeling import PRIOR_DEPENDENT
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
INSUFFICIENT_DATA = "insufficient_data"
PENDING = "pending"
NO_OBJECTIVES = "no_objectives"

CALIBRATED_PREFIX = "calibrated_"
AT_PI0: Mapping[str, str] = {
    name: CALIBRATED_PREFIX + name for name in (*PRIOR_DEPENDENT, "auc_pr")
}
"""Prior-dependent metric -> the name of its value at pi0."""

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
    "status",
    "reason",
)
"""Columns of the CSV report, one row per (window, objective)."""


OP_NAMES: Mapping[str, str] = {">=": "ge", "<=": "le"}
"""Objective op -> its name in a default objective id."""


def default_objective_id(metric: str, op: str) -> str:
    """``"calibrated_f1_ge"``: the id of an objective that names none (no target in it)."""
    return f"{metric}_{OP_NAMES[op]}"


@dataclass(frozen=True)
class Objective:
    """One SLA objective: ``metric op target`` should hold in every window.

    ``id`` names it in Prometheus labels; it never contains the target, so a
    changed target keeps the same series. Default: :func:`default_objective_id`.
    """

    metric: str
    op: str
    target: float
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", default_objective_id(self.metric, self.op))

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Objective:
        """From the stored ``{"metric", "op", "target"[, "id"]}`` (model.sla)."""
        op = str(doc["op"])
        if op not in OP_NAMES:
            raise ValueError(f"objective op {op!r} is not '>=' or '<='")
        return cls(str(doc["metric"]), op, float(doc["target"]), str(doc.get("id") or ""))

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
            "id": o.id,
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
        return ObjectiveResult(objective, None, lower, upper, INSUFFICIENT_DATA, reason)
    value = float(value)
    status = MET if objective.holds(value) else BREACHED
    return ObjectiveResult(objective, value, lower, upper, status)


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
    insufficient_data: int = 0
    pending: int = 0

    @classmethod
    def of(cls, statuses: Iterable[str]) -> Tally:
        s = list(statuses)
        return cls(s.count(MET), s.count(BREACHED), s.count(INSUFFICIENT_DATA), s.count(PENDING))

    @property
    def compliance_ratio(self) -> float | None:
        decided = self.met + self.breached
        return self.met / decided if decided else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "windows_met": self.met,
            "windows_breached": self.breached,
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
            "objectives": [
                {
                    "objective": o.label,
                    "id": o.id,
                    "metric": o.metric,
                    "evaluated_as": o.evaluated_as,
                    "op": o.op,
                    "target": o.target,
                }
                for o in self.objectives
            ],
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
