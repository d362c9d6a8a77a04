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
(:data:`RULE`, :mod:`app.sla.objectives`): ``met``, ``breached`` or
``inconclusive`` from the credible interval, or ``met`` / ``breached`` from
the point value where it decides; ``insufficient_data`` when the metric is
undefined or a class has fewer than ``min_class_count`` examples; ``pending``
while the window waits for the worker, or while the interval that decides an
objective is not of the window's current data (its detail follows its
summary). A window is ``breached`` when any objective is breached, ``met``
when all are met, ``inconclusive`` when some is inconclusive, else
``insufficient_data``. The compliance ratio is
met / (met + breached); inconclusive, insufficient and pending windows are
counted beside it and enter no ratio.

A partially labelled window is judged on its completed values and intervals
(the ``maturity`` document, docs/maturity.md), not on its labelled rows,
which are a biased sample of it; each window says its ``completeness``
(null when it holds no unlabelled rows).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.services.models.config import ModelConfig
from app.services.read.windows import (
    MAX_STORED_WINDOWS,
    WindowView,
    segment_key,
    stored_windows,
)
from app.sla.objectives import (
    Objective,
    ObjectiveResult,
    evaluate_objective,
    judged_documents,
)
from app.statuses import SlaStatus, WindowState
from app.timegrid import isoformat_z, resolve_range

RULE = (
    "Each window is judged on the metric at the reference prior pi0. "
    "evidence=interval: breached when the whole 95% credible interval lies on the wrong side "
    "of the target, met when it lies entirely on the right side (the target included), "
    "inconclusive otherwise or when the window has no interval. evidence=point (the "
    "client's choice, or a metric without an interval): met or breached from the point "
    "value alone. insufficient_data: the metric is undefined or a class is too scarce; "
    "pending: the window waits for the worker, or the interval of its current data is not "
    "computed yet. A window is breached when any objective is "
    "breached, met when all are met, inconclusive when some objective is inconclusive. "
    "compliance_ratio = met / (met + breached); inconclusive, insufficient_data and pending "
    "windows are counted beside it and enter no ratio."
)
"""The decision rule, stated in every report (``rule``)."""


def model_objectives(model: ModelConfig) -> tuple[Objective, ...]:
    """The model's SLA objectives, in their registered order."""
    return tuple(Objective.from_document(o) for o in model.sla)


def _window_status(results: Sequence[ObjectiveResult]) -> str:
    statuses = {r.status for r in results}
    if not statuses:
        return SlaStatus.NO_OBJECTIVES
    if SlaStatus.PENDING in statuses:
        return SlaStatus.PENDING
    if SlaStatus.BREACHED in statuses:
        return SlaStatus.BREACHED
    if statuses == {SlaStatus.MET}:
        return SlaStatus.MET
    if SlaStatus.INCONCLUSIVE in statuses:
        return SlaStatus.INCONCLUSIVE
    return SlaStatus.INSUFFICIENT_DATA


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
            "start": isoformat_z(w.start),
            "end": isoformat_z(w.end),
            "segment": w.segment,
            "n": w.n,
            "prior": w.prior,
            "window_status": w.status,
            "completeness": completeness(w),
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
            s.count(SlaStatus.MET),
            s.count(SlaStatus.BREACHED),
            s.count(SlaStatus.INCONCLUSIVE),
            s.count(SlaStatus.INSUFFICIENT_DATA),
            s.count(SlaStatus.PENDING),
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
            "from": isoformat_z(self.start),
            "to": isoformat_z(self.end),
            "rule": RULE,
            "objectives": [o.to_dict() for o in self.objectives],
            "summary": self.summary(),
            "windows": [w.to_dict() for w in self.windows],
        }


def completeness(window: WindowView) -> float | None:
    """Labelled rows over scored rows of a window holding unlabelled rows (the
    completion's, where the window is completed), else None."""
    if window.maturity is not None:
        return float(window.maturity["completeness"])
    if window.n_unlabelled == 0:
        return None
    return min(window.n / window.n_unlabelled, 1.0)


def window_results(
    objectives: Sequence[Objective], window: WindowView
) -> tuple[ObjectiveResult, ...]:
    """Every objective in one window (``pending`` while the window is not fresh)."""
    if window.status != WindowState.FRESH:
        return tuple(
            ObjectiveResult(
                o, None, None, None, SlaStatus.PENDING, "the window waits for the worker"
            )
            for o in objectives
        )
    w, current = window, window.detail_current
    metrics, intervals, reasons = judged_documents(w.metrics, w.intervals, w.reasons, w.maturity)
    return tuple(
        evaluate_objective(o, metrics, intervals, reasons, detail_current=current)
        for o in objectives
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
    limits are those of listing windows (app.timegrid.resolve_range).
    """
    objectives = model_objectives(model)
    key = segment_key(model, segment)
    window_range = resolve_range(
        model.window, start_from, to, now=now, max_windows=MAX_STORED_WINDOWS
    )
    # Windows of unlabelled rows only have no metrics to hold to an objective.
    windows = [w for w in stored_windows(session, model, key, window_range) if w.n > 0]
    return SlaReport(
        model=model.name,
        pi0=model.pi0,
        segment=segment,
        start=window_range.start,
        end=window_range.end,
        objectives=objectives,
        windows=tuple(SlaWindow(w, window_results(objectives, w)) for w in windows),
    )
