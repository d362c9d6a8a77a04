"""Request and response bodies of the HTTP API (pydantic v2).

Model settings (:class:`~app.services.models.settings.ModelCreate`,
``ModelUpdate``, ``ModelPublic`` and their parts) belong to the domain,
:mod:`app.services.models.settings`; the routes use them as bodies from there.

Large numeric arrays (batch scores, /v1/evaluate) are NOT validated here:
those routes parse the raw body once with orjson and numpy
(app/services/ingest/parse.py). :class:`BatchIn` and :class:`EvaluateIn`
describe those bodies for the OpenAPI document only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.services.models.settings import ModelPublic

Scope = Literal["ingest", "read"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- models ------------------------------------------------------------------


class ModelList(BaseModel):
    """One page of the models, by name."""

    models: list[ModelPublic]
    next: str | None = Field(
        description="pass it as `cursor` for the next page; null on the last page"
    )


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


class SparseCountsIn(BaseModel):
    """Only the non-empty bins of one class (app/services/ingest/sparse.py)."""

    bins: list[int] = Field(description="bin indices in [0, n_bins), strictly increasing")
    counts: list[int] = Field(description="counts[k]: examples of the class in bin bins[k]")


class ScoreSumsIn(BaseModel):
    """Per-example sums over all rows of a histogram batch (Brier, log loss, mean scores)."""

    brier_sum: float = Field(ge=0, description="sum of (y - p)^2, at most n")
    log_loss_sum: float = Field(ge=0, description="sum of -ln p(actual class), p clipped")
    score_sum_positive: float = Field(ge=0, description="sum of the positives' scores")
    score_sum_negative: float = Field(ge=0, description="sum of the negatives' scores")


class HistogramIn(BaseModel):
    positives: list[int] | SparseCountsIn | None = Field(
        default=None,
        description="positives[j]: actual positives in bin j (or the sparse form; with negatives)",
    )
    negatives: list[int] | SparseCountsIn | None = Field(
        default=None,
        description="negatives[j]: actual negatives in bin j (or the sparse form; with positives)",
    )
    sums: ScoreSumsIn | None = Field(
        default=None, description="optional: Brier and log loss then count these rows"
    )
    unlabelled: list[int] | SparseCountsIn | None = Field(
        default=None, description="unlabelled[j]: rows without labels in bin j (or the sparse form)"
    )


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
    "unlabelled_scores": {
        "summary": "scores whose labels are not known yet (label-free estimate)",
        "value": {"timestamp": "2026-11-26T10:15:00Z", "scores": [0.91, 0.12, 0.55, 0.03]},
    },
    "unlabelled_histogram": {
        "summary": "counts of unlabelled scores over the model's bins",
        "value": {"timestamp": "2026-11-26T10:15:00Z", "histogram": {"unlabelled": [4, 6, 1]}},
    },
    "sparse_histogram": {
        "summary": "the non-empty bins only, with score sums (what priorwatch_client sends)",
        "value": {
            "timestamp": "2026-11-26T10:15:00Z",
            "histogram": {
                "positives": {"bins": [1, 2], "counts": [3, 5]},
                "negatives": {"bins": [0, 1], "counts": [7, 2]},
                "sums": {
                    "brier_sum": 2.9,
                    "log_loss_sum": 8.4,
                    "score_sum_positive": 6.1,
                    "score_sum_negative": 1.2,
                },
            },
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
    """One batch: ``scores`` (+ ``labels``), or ``histogram``, or ``confusion_matrix``."""

    model_config = ConfigDict(extra="forbid")

    timestamp: datetime | float = Field(
        description="event time: ISO 8601 (no offset = UTC) or epoch seconds; picks the window"
    )
    segment: str | None = Field(default=None, description="a registered segment of the model")
    scores: list[float] | None = Field(default=None, description="scores[i] in [0, 1]")
    labels: list[int] | None = Field(
        default=None, description="labels[i] in {0, 1}; omit for scores without labels"
    )
    histogram: HistogramIn | None = None
    confusion_matrix: ConfusionMatrixIn | None = None


class BatchAccepted(BaseModel):
    batch_id: str
    window_start: datetime
    count: int = Field(description="rows (examples) in the batch, labelled or not")


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
