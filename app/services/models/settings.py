"""Model settings and their validation: the domain's view of a registered model.

:class:`ModelCreate` and :class:`ModelUpdate` are what a caller may set (the
HTTP API uses them as request bodies; tests and benchmarks register models
with them directly); :class:`ModelPublic` is a model as it is shown.
:mod:`app.services.models.registry` stores them; :class:`app.services.models.config.
ModelConfig` is the immutable snapshot that ingestion and the worker read.
Validation errors are pydantic errors naming the field (or
:class:`app.errors.InvalidInput` from the metric and drift settings).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from app.db.models import ALL_SEGMENTS_LABEL
from app.drift.settings import DriftSettings
from app.errors import InvalidInput
from app.metrics.cost import UnitCosts
from app.services.models.retention import RETENTION_PATTERN, check_label_horizon
from app.timegrid import parse_instant

SLUG_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
"""Model and segment names: lowercase letters, digits, '-' and '_', at most 64."""

Slug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN)]
WindowName = Literal["5m", "15m", "1h", "6h", "1d", "1w"]
Probability = Annotated[float, Field(gt=0.0, lt=1.0, allow_inf_nan=False)]
Retention = Annotated[
    str,
    StringConstraints(pattern=RETENTION_PATTERN),
    Field(
        description="how long windows are kept after they end, in hours, days or weeks "
        "(36h, 90d, 52w; at least one window); null keeps every window",
        examples=["90d"],
    ),
]

LabelMissingness = Literal["class", "score", "none"]
"""How a model's labels arrive (docs/maturity.md): depending on the class only, on the
score only, or ``none``: the labelled rows are taken as the window (no completion)."""


def _validate_label_horizon(value: Any) -> Any:
    if isinstance(value, str):
        try:
            check_label_horizon(value)
        except InvalidInput as exc:  # pydantic names the field itself
            raise ValueError(exc.reason) from None
    return value


LabelHorizon = Annotated[
    str,
    StringConstraints(pattern=RETENTION_PATTERN),
    AfterValidator(_validate_label_horizon),
    Field(
        description="how long after a window its labels are expected complete (hours, days "
        "or weeks, at most 400d): labelled rows of windows holding unlabelled rows are "
        "accepted this far back, and windows are kept at least this long",
        examples=["90d"],
    ),
]


ExpositionFamily = Literal[
    "priorwatch_window_metric",
    "priorwatch_window_metric_lower",
    "priorwatch_window_metric_upper",
    "priorwatch_window_estimate",
    "priorwatch_window_estimate_lower",
    "priorwatch_window_estimate_upper",
    "priorwatch_estimate_error",
    "priorwatch_window_completed",
    "priorwatch_drift_streak_windows",
]
"""The families the compact exposition trims by their last label (app/exporter/exposition.py;
a test checks that the two lists agree)."""

ExpositionSetting = Annotated[
    Literal["compact", "full"]
    | Annotated[list[ExpositionFamily], Field(min_length=1, max_length=9)],
    AfterValidator(lambda v: v if isinstance(v, str) else sorted(set(v))),
    Field(
        description="which series GET /metrics writes of this model's windows: compact (the "
        "series the shipped dashboard and rules read), full, or the compact series plus "
        "every metric of each family listed (docs/reading.md); null: the service's "
        "default (PRIORWATCH_METRICS_EXPOSITION)",
        examples=["full", ["priorwatch_window_metric_lower", "priorwatch_window_metric_upper"]],
    ),
]


def _validate_instant(value: Any) -> datetime:
    try:
        return parse_instant(value, "value")
    except InvalidInput as exc:  # pydantic names the field itself
        raise ValueError(exc.reason) from None


Instant = Annotated[datetime, BeforeValidator(_validate_instant)]
"""A pydantic field type read by :func:`app.timegrid.parse_instant`."""

_DRIFT_DEFAULTS = DriftSettings()
MAX_BINS = 100_000
"""Most score bins a model may request."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    evidence: Literal["interval", "point"] = Field(
        default="interval",
        description="decide each window from the credible interval (met, breached or "
        "inconclusive) or from the point value alone (docs/reading.md)",
    )
    id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.:@=-]{1,64}$",
        description="stable name in Prometheus labels (default: metric and op, e.g. "
        "calibrated_f1_ge); unique within the model",
    )


class DriftReference(_Strict):
    """The drift baseline: a period of the model's own windows, or the last N windows."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: Instant | None = Field(default=None, alias="from")
    to: Instant | None = None
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
    retention: Retention | None = None
    label_missingness: LabelMissingness = Field(
        default="class",
        description="how labels arrive: completes partially labelled windows "
        "(docs/maturity.md); none: the labelled rows are the window",
    )
    label_horizon: LabelHorizon | None = None
    exposition: ExpositionSetting | None = None

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
    retention: Retention | None = None
    label_missingness: LabelMissingness | None = None
    label_horizon: LabelHorizon | None = None
    exposition: ExpositionSetting | None = None
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
    retention: str | None = Field(
        description="how long windows are kept after they end; null: every window is kept"
    )
    label_missingness: str = Field(
        description="how labels arrive: class, score or none (docs/maturity.md)"
    )
    label_horizon: str | None = Field(
        description="how long after a window its labels are expected complete; null: not set"
    )
    exposition: str | list[str] | None = Field(
        description="which series GET /metrics writes of its windows: compact, full or the "
        "trimmed families written whole; null: the service's default"
    )
    created_at: datetime
    updated_at: datetime
