"""Test data built the same way across the suite: a model's configuration, a
window's sums from scores and labels, simulated scores.

Import it as ``from builders import ...`` (tests/ is on ``sys.path``: pytest
puts the folder of tests/conftest.py there).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from app.drift.simulation import shifted_logit_scores
from app.metrics.binning import default_bin_edges, histogram_counts
from app.metrics.curves import cumulative_counts_from_histograms
from app.metrics.probability import ProbabilitySums
from app.services.models.config import ModelConfig
from app.services.windows.sums import WindowSums


def model_config(
    thresholds: tuple[float, ...] = (0.5,), *, n_bins: int = 200, **fields: Any
) -> ModelConfig:
    """A model named "m" (id 1, hourly windows, pi0 0.1, no cost ratio, segments,
    SLA or drift settings) on ``default_bin_edges(thresholds, n_bins=n_bins)``;
    ``fields`` override any of these (``bin_edges`` included)."""
    values: dict[str, Any] = {
        "id": 1,
        "name": "m",
        "window": "1h",
        "thresholds": thresholds,
        "pi0": 0.1,
        "cost_ratio": None,
        "segments": frozenset(),
        "sla": (),
        "drift": {},
    }
    values.update(fields)
    if "bin_edges" not in values:
        values["bin_edges"] = default_bin_edges(thresholds, n_bins=n_bins)
    return ModelConfig(**values)


def sums_of(scores: npt.ArrayLike, labels: npt.ArrayLike, model: ModelConfig) -> WindowSums:
    """What ingestion stores for one scores batch on ``model``: histograms, the
    exact matrix at each threshold, probability sums."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    pos, neg = histogram_counts(scores, labels, model.bin_edges)
    curve = cumulative_counts_from_histograms(pos, neg, model.bin_edges)
    return WindowSums(
        n=int(scores.size),
        positives=int(labels.sum()),
        hist_positives=pos,
        hist_negatives=neg,
        confusion=tuple(curve.confusion_at(t) for t in model.thresholds),
        sums=ProbabilitySums.from_predictions(scores, labels),
    )


def sample(
    rng: np.random.Generator, n: int, prior: float, separation: float = 1.5
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Scores with logit N(-2, 1) for negatives, shifted by ``separation`` for
    positives; labels 0/1 as a batch posts them."""
    scores, labels = shifted_logit_scores(rng, n, prior, separation=separation, offset=-2.0)
    return scores, labels.astype(np.int64)
