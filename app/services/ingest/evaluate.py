"""Stateless evaluation of a raw body (``POST /v1/evaluate``): nothing is stored."""

from __future__ import annotations

import math
from typing import Any

from app.config import Settings
from app.errors import InvalidInput
from app.metrics.evaluate import evaluate
from app.services.ingest.parse import load_document, scores_labels_arrays

EVALUATE_FIELDS = frozenset({"scores", "labels", "threshold", "pi0", "cost_ratio", "target_prior"})
_OPTIONS = ("pi0", "cost_ratio", "target_prior")


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(name, f"is {value!r}, must be a number")
    return float(value)


def evaluate_body(body: bytes, settings: Settings) -> dict[str, float | None]:
    """The metrics of ``app.metrics.evaluate`` for the scores and labels in ``body``.

    Raises
    ------
    MalformedBody, InvalidInput
        As for batches (same parser, same row limit).
    """
    doc = load_document(body)
    unknown = sorted(set(doc) - EVALUATE_FIELDS)
    if unknown:
        raise InvalidInput(unknown[0], "unknown field")
    scores, labels = scores_labels_arrays(doc, max_rows=settings.max_batch_rows)
    threshold = 0.5 if doc.get("threshold") is None else _number("threshold", doc["threshold"])
    options = {k: None if doc.get(k) is None else _number(k, doc[k]) for k in _OPTIONS}
    return evaluate(scores, labels, threshold=threshold, **options)
