"""Simulated partially labelled windows shared by the maturity tests (seeded)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from app.drift.simulation import BinormalStream
from app.maturity import Completion, bins_of_thresholds, complete
from app.maturity.metrics import histogram_metrics
from app.maturity.simulation import MaturingWindow, class_rates, deliver_labels
from app.metrics.binning import default_bin_edges

THRESHOLDS = (0.5, 0.3)
EDGES = default_bin_edges(THRESHOLDS, n_bins=100)
THRESHOLD_BINS = bins_of_thresholds(EDGES, THRESHOLDS)
STREAM = BinormalStream(EDGES, mu_positive=1.0, mu_negative=-2.0)
PI0, COST_RATIO = 0.1, 0.5
OPTIONS = {"edges": EDGES, "thresholds": THRESHOLDS, "pi0": PI0, "cost_ratio": COST_RATIO}
SCORE_RATES = np.where(EDGES[:-1] >= THRESHOLDS[0], 0.9, 0.05)
"""``score`` data: rows at or above the primary threshold labelled at 90%, the rest at 5%."""


def class_windows(
    rng: np.random.Generator, count: int, *, prior: float, completeness: float, n: int = 20_000
) -> Iterator[MaturingWindow]:
    """``class`` data: positives labelled 3.5 times as fast as negatives."""
    rates = class_rates(prior, completeness)
    for _ in range(count):
        yield deliver_labels(rng, STREAM.window(rng, n=n, prior=prior), *rates)


def score_windows(
    rng: np.random.Generator, count: int, *, prior: float, n: int = 20_000
) -> Iterator[MaturingWindow]:
    """``score`` data (:data:`SCORE_RATES`)."""
    for _ in range(count):
        yield deliver_labels(rng, STREAM.window(rng, n=n, prior=prior), SCORE_RATES, SCORE_RATES)


def labelled_metrics(w: MaturingWindow) -> dict[str, float | None]:
    """The metrics of the labelled rows alone (what a window reports today)."""
    return histogram_metrics(w.positives, w.negatives, **OPTIONS)


def full_metrics(w: MaturingWindow) -> dict[str, float | None]:
    """The metrics once every label has arrived."""
    return histogram_metrics(w.full.positives, w.full.negatives, **OPTIONS)


def completion_of(w: MaturingWindow, assumption: str) -> Completion:
    """``w`` completed under ``assumption`` (a completion is expected)."""
    c = complete(
        w.unlabelled,
        w.positives,
        w.negatives,
        assumption=assumption,  # type: ignore[arg-type]
        threshold_bins=THRESHOLD_BINS,
    )
    assert isinstance(c, Completion)
    return c
