"""Typed, frozen views of the service's answers (models, windows, SLA reports).

Each keeps the full JSON document in ``raw``, so fields added by a newer
service are not lost; the typed attributes are those documented in
docs/reading.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


def parse_time(value: Any) -> datetime:
    """An ISO 8601 time of the API (``Z`` suffix) as an aware datetime."""
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _optional_time(value: Any) -> datetime | None:
    return None if value is None else parse_time(value)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class ModelInfo:
    """What the client needs of a model: window length, thresholds, segments, bins."""

    name: str
    window: str
    thresholds: tuple[float, ...]
    segments: frozenset[str]
    pi0: float | None
    n_bins: int
    raw: Mapping[str, Any]

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ModelInfo:
        return cls(
            name=str(doc["name"]),
            window=str(doc["window"]),
            thresholds=tuple(float(t) for t in doc["thresholds"]),
            segments=frozenset(str(s) for s in doc.get("segments", ())),
            pi0=_optional_float(doc.get("pi0")),
            n_bins=int(doc["n_bins"]),
            raw=doc,
        )


@dataclass(frozen=True)
class Window:
    """One window (or merged window) of ``GET /v1/models/{name}/windows``.

    ``metrics`` maps a metric name to its value (None: undefined, ``reasons``
    says why); ``status`` is ``fresh`` or ``pending``; ``curves`` is set only
    by :meth:`priorwatch_client.Client.window`. ``detail`` stamps the curves and the
    intervals (``aggregate_version``, ``computed_at``, ``current``; None while
    the window has none, docs/reading.md). ``maturity`` holds the completed
    metrics of a window whose labels are still arriving (``completeness``,
    the completed ``prior``, ``metrics``...; None for a window with one kind of
    row or a service that does not complete windows).
    """

    start: datetime
    end: datetime
    segment: str | None
    granularity: str
    n: int
    positives: int
    prior: float | None
    status: str
    metrics: Mapping[str, float | None]
    reasons: Mapping[str, str]
    intervals: Mapping[str, Any]
    drift: Mapping[str, Any] | None
    curves: Mapping[str, Any] | None
    computed_at: datetime | None
    aggregate_version: int | None
    merged_windows: int
    raw: Mapping[str, Any]
    detail: Mapping[str, Any] | None = None
    n_unlabelled: int = 0
    """Rows of the window sent without labels (:meth:`~priorwatch_client.Client.log_scores`)."""
    maturity: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Window:
        version = doc.get("aggregate_version")
        return cls(
            start=parse_time(doc["start"]),
            end=parse_time(doc["end"]),
            segment=doc.get("segment"),
            granularity=str(doc["granularity"]),
            n=int(doc["n"]),
            positives=int(doc["positives"]),
            prior=_optional_float(doc.get("prior")),
            status=str(doc["status"]),
            metrics=dict(doc.get("metrics") or {}),
            reasons=dict(doc.get("reasons") or {}),
            intervals=dict(doc.get("intervals") or {}),
            drift=doc.get("drift"),
            curves=doc.get("curves"),
            computed_at=_optional_time(doc.get("computed_at")),
            aggregate_version=None if version is None else int(version),
            merged_windows=int(doc.get("merged_windows", 1)),
            raw=doc,
            detail=doc.get("detail"),
            n_unlabelled=int(doc.get("n_unlabelled", 0)),
            maturity=doc.get("maturity"),
        )


@dataclass(frozen=True)
class ObjectiveResult:
    """One objective in one window of the SLA report."""

    objective: str
    metric: str
    evaluated_as: str
    op: str
    target: float
    value: float | None
    lower: float | None
    upper: float | None
    status: str
    reason: str | None
    raw: Mapping[str, Any]

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ObjectiveResult:
        return cls(
            objective=str(doc.get("objective", "")),
            metric=str(doc["metric"]),
            evaluated_as=str(doc.get("evaluated_as", doc["metric"])),
            op=str(doc["op"]),
            target=float(doc["target"]),
            value=_optional_float(doc.get("value")),
            lower=_optional_float(doc.get("lower")),
            upper=_optional_float(doc.get("upper")),
            status=str(doc["status"]),
            reason=doc.get("reason"),
            raw=doc,
        )


@dataclass(frozen=True)
class SlaWindow:
    """One window of the SLA report: its status and each objective's result."""

    start: datetime
    end: datetime
    segment: str | None
    n: int
    prior: float | None
    status: str
    objectives: tuple[ObjectiveResult, ...]
    raw: Mapping[str, Any]

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SlaWindow:
        return cls(
            start=parse_time(doc["start"]),
            end=parse_time(doc["end"]),
            segment=doc.get("segment"),
            n=int(doc["n"]),
            prior=_optional_float(doc.get("prior")),
            status=str(doc["status"]),
            objectives=tuple(ObjectiveResult.from_json(o) for o in doc.get("objectives", ())),
            raw=doc,
        )


@dataclass(frozen=True)
class SlaReport:
    """``GET /v1/models/{name}/sla``: per-window results and the compliance summary."""

    model: str
    pi0: float | None
    segment: str | None
    from_: datetime
    to: datetime
    summary: Mapping[str, Any]
    windows: tuple[SlaWindow, ...]
    raw: Mapping[str, Any]

    @property
    def compliance_ratio(self) -> float | None:
        """met / (met + breached) over the report's windows (None when none decided)."""
        return _optional_float(self.summary.get("compliance_ratio"))

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SlaReport:
        return cls(
            model=str(doc["model"]),
            pi0=_optional_float(doc.get("pi0")),
            segment=doc.get("segment"),
            from_=parse_time(doc["from"]),
            to=parse_time(doc["to"]),
            summary=dict(doc.get("summary") or {}),
            windows=tuple(SlaWindow.from_json(w) for w in doc.get("windows", ())),
            raw=doc,
        )
