"""Request and response bodies of the HTTP API (pydantic v2).

Large numeric arrays (batch scores, /v1/evaluate) are NOT validated here:
those routes parse the raw body once with orjson and numpy
(app/services/batch_parsing.py). :class:`BatchIn` and :class:`EvaluateIn`
describe those bodies for the OpenAPI document only.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from app.drift.settings import DriftSettings
from app.exporter.names import ALL_SEGMENTS_LABEL
from app.metrics.cost import UnitCosts

SLUG_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
"""Model and segment names: lowercase letters, digits, '-' and '_', at most 64."""

Slug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN)]
WindowName = Literal["5m", "15m", "1h", "6h", "1d", "1w"]
Scope = Literal["ingest", "read"]
Probability = Annotated[float, Field(gt=0.0, lt=1.0, allow_inf_nan=False)]

_DRIFT_DEFAULTS = DriftSettings()
MAX_BINS = 100_000
"""Most score bins a model may request."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- model settings --------------------------------------------------------


class UnitCostsIn(_Strict):
    """Unit costs of the four outcomes; the cost ratio r_C is derived from them."""

    c_tp: float = Field(allow_inf_nan=False)
    c_fp: float = Field(allow_inf_nan=False)
    c_fn: float = Field(allow_inf_nan=False)
    c_tn: float = Field(allow_inf_nan=False)

    @model_validator(mode="after")
    def _errors_cost_more(self) -> Self:
        self.to_unit_costs()  # InvalidInput (a ValueError) names the field
        return self

    def to_unit_costs(self) -> UnitCosts:
        return UnitCosts(c_tp=self.c_tp, c_fp=self.c_fp, c_fn=self.c_fn, c_tn=self.c_tn)


class SlaObjective(_Strict):
    """One SLA objective: ``metric op target`` must hold in every window."""

    metric: str = Field(min_length=1, max_length=64, examples=["calibrated_f1"])
    op: Literal[">=", "<="]
    target: float = Field(allow_inf_nan=False)
    id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.:@=-]{1,64}$",
        description="stable name in Prometheus labels (default: metric and op, e.g. "
        "calibrated_f1_ge); unique within the model",
    )


class DriftReference(_Strict):
    """The drift baseline: a period of the model's own windows, or the last N windows."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: AwareDatetime | None = Field(default=None, alias="from")
    to: AwareDatetime | None = None
    trailing_windows: int | None = Field(default=None, ge=1, le=10_000)

    @model_validator(mode="after")
    def _one_form(self) -> Self:
        period = self.from_ is not None or self.to is not None
        if period and self.trailing_windows is not None:
            raise ValueError("give either from/to or trailing_windows, not both")
        if period:
            if self.from_ is None or self.to is None:
                raise ValueError("a reference period needs both from and to")
            if not self.from_ < self.to:
                raise ValueError("from must be before to")
        elif self.trailing_windows is None:
            raise ValueError("give from/to or trailing_windows")
        return self


class DriftConfig(_Strict):
    """Drift settings (app.drift.settings.DriftSettings) plus the reference."""

    reference: DriftReference | None = None
    alpha: float = _DRIFT_DEFAULTS.alpha
    min_prior_effect: float = _DRIFT_DEFAULTS.min_prior_effect
    min_likelihood_effect: float = _DRIFT_DEFAULTS.min_likelihood_effect
    min_class_count: int = _DRIFT_DEFAULTS.min_class_count
    test_bins: int = _DRIFT_DEFAULTS.test_bins

    @model_validator(mode="after")
    def _valid_settings(self) -> Self:
        self.to_drift_settings()  # InvalidInput (a ValueError) names the field
        return self

    def to_drift_settings(self) -> DriftSettings:
        return DriftSettings(
            alpha=self.alpha,
            min_prior_effect=self.min_prior_effect,
            min_likelihood_effect=self.min_likelihood_effect,
            min_class_count=self.min_class_count,
            test_bins=self.test_bins,
        )

    def to_document(self) -> dict[str, Any]:
        """The JSON stored in ``model.drift`` (reference keys "from"/"to" as ISO 8601)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=False)


def _check_thresholds(values: list[float]) -> list[float]:
    for t in values:
        if not (math.isfinite(t) and 0.0 < t < 1.0):
            raise ValueError(f"{t!r} is not in (0, 1)")
    if len(set(values)) != len(values):
        raise ValueError("thresholds must be distinct")
    return values


def _check_costs(cost_ratio: float | None, costs: UnitCostsIn | None) -> None:
    if cost_ratio is None or costs is None:
        return
    if not math.isclose(costs.to_unit_costs().cost_ratio, cost_ratio):
        raise ValueError("give cost_ratio or costs, not both (or consistent ones)")


RESERVED_SEGMENTS = frozenset({ALL_SEGMENTS_LABEL})
"""Segment names kept for the all-traffic window (its label in /metrics)."""


def _check_segments(values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError("segment names must be distinct")
    reserved = sorted(RESERVED_SEGMENTS.intersection(values))
    if reserved:
        raise ValueError(f"segment name {reserved[0]!r} is reserved for all traffic")
    return values


MODEL_CREATE_EXAMPLE: dict[str, Any] = {
    "name": "fraud-scorer",
    "window": "1h",
    "threshold": 0.5,
    "pi0": 0.02,
    "cost_ratio": 0.8,
    "segments": ["eu", "us"],
    "sla": [{"metric": "calibrated_f1", "op": ">=", "target": 0.6}],
    "drift": {
        "reference": {"from": "2026-01-01T00:00:00Z", "to": "2026-01-08T00:00:00Z"},
        "alpha": 0.01,
    },
}


class ModelCreate(_Strict):
    """Register a model. ``threshold`` (one) or ``thresholds`` (first = primary).

    ``window``, the thresholds and ``n_bins`` are fixed at creation.
    """

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [MODEL_CREATE_EXAMPLE]}
    )

    name: Slug
    description: str | None = Field(default=None, max_length=2000)
    window: WindowName = "1h"
    threshold: Probability | None = None
    thresholds: list[float] | None = Field(default=None, min_length=1, max_length=16)
    pi0: Probability
    cost_ratio: Probability | None = None
    costs: UnitCostsIn | None = None
    segments: list[Slug] = Field(default_factory=list, max_length=256)
    sla: list[SlaObjective] = Field(default_factory=list, max_length=64)
    drift: DriftConfig = Field(default_factory=DriftConfig)
    n_bins: int = Field(
        default=10_000,
        ge=2,
        le=MAX_BINS,
        description="score resolution: logit-uniform bins before the thresholds are "
        "inserted as extra edges (the model's n_bins is the resulting count)",
    )

    @field_validator("thresholds")
    @classmethod
    def _thresholds_ok(cls, v: list[float] | None) -> list[float] | None:
        return v if v is None else _check_thresholds(v)

    @field_validator("segments")
    @classmethod
    def _segments_ok(cls, v: list[str]) -> list[str]:
        return _check_segments(v)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        both = self.threshold is not None and self.thresholds is not None
        if both and self.thresholds is not None and self.thresholds[0] != self.threshold:
            raise ValueError("threshold must equal thresholds[0] when both are given")
        _check_costs(self.cost_ratio, self.costs)
        return self

    def all_thresholds(self) -> list[float]:
        """The thresholds, primary first (default [0.5])."""
        if self.thresholds is not None:
            return list(self.thresholds)
        return [self.threshold if self.threshold is not None else 0.5]


class ModelUpdate(_Strict):
    """Change a model's settings. Fields left out keep their value.

    ``name``, ``window``, ``threshold``/``thresholds`` and ``n_bins`` may be sent
    (e.g. a GET body sent back) but must equal the current values.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"pi0": 0.03, "segments": ["eu", "us", "apac"]}]},
    )

    description: str | None = Field(default=None, max_length=2000)
    pi0: Probability | None = None
    cost_ratio: Probability | None = None
    costs: UnitCostsIn | None = None
    segments: list[Slug] | None = Field(default=None, max_length=256)
    sla: list[SlaObjective] | None = Field(default=None, max_length=64)
    drift: DriftConfig | None = None
    # fixed at creation: accepted only when unchanged
    name: str | None = None
    window: str | None = None
    threshold: float | None = None
    thresholds: list[float] | None = None
    n_bins: int | None = None

    @field_validator("segments")
    @classmethod
    def _segments_ok(cls, v: list[str] | None) -> list[str] | None:
        return v if v is None else _check_segments(v)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        _check_costs(self.cost_ratio, self.costs)
        return self


class ModelPublic(BaseModel):
    """A registered model as the API shows it."""

    name: str
    description: str | None
    window: str
    threshold: float = Field(description="the primary threshold, thresholds[0]")
    thresholds: list[float]
    pi0: float
    cost_ratio: float | None
    costs: dict[str, float] | None
    segments: list[str]
    sla: list[dict[str, Any]]
    drift: dict[str, Any]
    n_bins: int = Field(description="number of score bins a histogram batch must have")
    created_at: datetime
    updated_at: datetime


class ModelList(BaseModel):
    models: list[ModelPublic]


class BinsPublic(BaseModel):
    """The model's score bins: bin j is [edges[j], edges[j+1]), the last one closed."""

    n_bins: int
    thresholds: list[float]
    edges: list[float] = Field(description="n_bins + 1 increasing edges from 0.0 to 1.0")


# --- API keys --------------------------------------------------------------


class ApiKeyCreate(_Strict):
    """Scopes of a new key of one model: "ingest" (post batches), "read" (read results)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"scopes": ["ingest", "read"]}]}
    )

    scopes: list[Scope] = Field(min_length=1, max_length=2)

    @field_validator("scopes")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("scopes must be distinct")
        return v


class ApiKeyPublic(BaseModel):
    id: str
    prefix: str = Field(description="first characters of the token, to tell keys apart")
    scopes: list[str]
    created_at: datetime
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyPublic):
    token: str = Field(description="the bearer token; shown once, only its hash is stored")


class ApiKeyList(BaseModel):
    keys: list[ApiKeyPublic]


# --- batches and evaluate (documentation of raw-parsed bodies) -------------


class HistogramIn(BaseModel):
    positives: list[int] = Field(description="positives[j]: actual positives in bin j")
    negatives: list[int] = Field(description="negatives[j]: actual negatives in bin j")


class ConfusionMatrixIn(BaseModel):
    tp: int = Field(ge=0)
    fp: int = Field(ge=0)
    fn: int = Field(ge=0)
    tn: int = Field(ge=0)


BATCH_EXAMPLES: dict[str, dict[str, Any]] = {
    "scores": {
        "summary": "raw scores and labels",
        "value": {
            "timestamp": "2026-11-26T10:15:00Z",
            "segment": "eu",
            "scores": [0.91, 0.12, 0.55, 0.03],
            "labels": [1, 0, 1, 0],
        },
    },
    "histogram": {
        "summary": "per-class counts over the model's bins (GET .../bins)",
        "value": {
            "timestamp": "2026-11-26T10:15:00Z",
            "histogram": {"positives": [0, 3, 5], "negatives": [7, 2, 0]},
        },
    },
    "confusion_matrix": {
        "summary": "one confusion matrix at the primary threshold",
        "value": {
            "timestamp": "2026-11-26T10:15:00Z",
            "confusion_matrix": {"tp": 40, "fp": 10, "fn": 5, "tn": 945},
        },
    },
}


class BatchIn(BaseModel):
    """One batch: ``scores`` + ``labels``, or ``histogram``, or ``confusion_matrix``."""

    model_config = ConfigDict(extra="forbid")

    timestamp: datetime | float = Field(
        description="event time: ISO 8601 (no offset = UTC) or epoch seconds; picks the window"
    )
    segment: str | None = Field(default=None, description="a registered segment of the model")
    scores: list[float] | None = Field(default=None, description="scores[i] in [0, 1]")
    labels: list[int] | None = Field(default=None, description="labels[i] in {0, 1}")
    histogram: HistogramIn | None = None
    confusion_matrix: ConfusionMatrixIn | None = None


class BatchAccepted(BaseModel):
    batch_id: str
    window_start: datetime
    count: int = Field(description="rows (examples) in the batch")


EVALUATE_EXAMPLE: dict[str, Any] = {
    "scores": [0.91, 0.12, 0.55, 0.03, 0.67, 0.42],
    "labels": [1, 0, 1, 0, 0, 1],
    "threshold": 0.5,
    "pi0": 0.1,
    "cost_ratio": 0.8,
}


class EvaluateIn(BaseModel):
    """Scores and labels to evaluate; nothing is stored."""

    model_config = ConfigDict(extra="forbid")

    scores: list[float]
    labels: list[int]
    threshold: float = 0.5
    pi0: float | None = None
    cost_ratio: float | None = None
    target_prior: float | None = None


class EvaluateOut(BaseModel):
    metrics: dict[str, float | None]


# --- problems ----------------------------------------------------------------


class FieldError(BaseModel):
    field: str
    reason: str


class Problem(BaseModel):
    """RFC 9457 problem details (``application/problem+json``)."""

    type: str
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[FieldError] = Field(default_factory=list)
