"""The whole window computation over degenerate windows (hypothesis).

One class only (either one), every example in one bin, all mass at score 0
or 1, a single example, counts near the 2^53 ceiling, with or without
unlabelled rows and a drift reference (itself possibly degenerate). Each
window goes through what the worker computes (:func:`compute_window_result`,
summary and full tiers) and what the read side computes for a merged window
(:meth:`WindowSums.merge` of its parts, then the full result). Every run must
complete; every number must be finite or null, every null metric must carry a
reason, and every value must lie in its metric's range.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.metrics import ops_scoring
from app.metrics.binning import default_bin_edges
from app.metrics.confusion import ConfusionCounts
from app.metrics.curves import cumulative_counts_from_histograms
from app.metrics.dbt import dbt_reference
from app.metrics.labeling import LABELING_METRICS
from app.metrics.probability import LOG_LOSS_EPS, ProbabilitySums
from app.services.models.config import ModelConfig
from app.services.windows.compute import WindowResult, compute_window_result
from app.services.windows.estimate import ERROR_REASON_KEY, MATURE
from app.services.windows.sums import WindowSums

THRESHOLDS = (0.5, 0.3)
EDGES = default_bin_edges(THRESHOLDS, n_bins=40)
N_BINS = EDGES.size - 1
MIDPOINTS = (EDGES[:-1] + EDGES[1:]) / 2.0
CEILING = 2**53
"""The most examples a window may hold (docs/api.md, count limits)."""

MODEL = ModelConfig(
    id=1,
    name="degenerate",
    window="1h",
    thresholds=THRESHOLDS,
    pi0=0.05,
    cost_ratio=0.7,
    segments=frozenset(),
    sla=(),
    drift={"reference": {"trailing_windows": 3}, "min_class_count": 1},
    bin_edges=EDGES,
)

PROPS = settings(max_examples=60, deadline=None)


@pytest.fixture(scope="module", autouse=True)
def small_scoring_reference() -> Iterator[None]:
    """A small DBT reference for the OPS (every new prior builds interpolation nodes:
    about 2 s each with the default 20,000 curves, a few ms with these)."""
    small = ops_scoring.ScoringReference(dbt_reference(depth=6, n_curves=400, seed=1))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ops_scoring, "scoring_reference", lambda *args: small)
        yield


Counts = npt.NDArray[np.int64]


# --- windows ----------------------------------------------------------------


def _scores_of(placement: str) -> npt.NDArray[np.float64]:
    """The score of each bin's examples: the bin's midpoint, or 0 / 1 at the ends."""
    scores = MIDPOINTS.copy()
    if placement == "score0":
        scores[0] = 0.0
    if placement == "score1":
        scores[-1] = 1.0
    return scores


def _sums(pos: Counts, neg: Counts, scores: npt.NDArray[np.float64]) -> ProbabilitySums:
    """The probability sums of examples at ``scores`` (what ingestion adds up)."""
    p, q = pos.astype(np.float64), neg.astype(np.float64)

    def minus_log(p_true: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return -np.log(np.clip(p_true, LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS))

    return ProbabilitySums(
        positives=float(p.sum()),
        negatives=float(q.sum()),
        brier_sum=float(p @ (1.0 - scores) ** 2 + q @ scores**2),
        log_loss_sum=float(p @ minus_log(scores) + q @ minus_log(1.0 - scores)),
        score_sum_positive=float(p @ scores),
        score_sum_negative=float(q @ scores),
    )


EMPTY = ConfusionCounts(0.0, 0.0, 0.0, 0.0)


def window_of(
    pos: Counts, neg: Counts, unlabelled: Counts | None, placement: str, label_only: bool
) -> WindowSums:
    """What ingestion stores for rows with these per-class (and unlabelled) histograms."""
    confusion = (EMPTY,) * len(THRESHOLDS)
    if pos.any() or neg.any():  # (a part of a merged window may hold unlabelled rows only)
        curve = cumulative_counts_from_histograms(pos, neg, EDGES)
        confusion = tuple(curve.confusion_at(t) for t in THRESHOLDS)
    return WindowSums(
        n=int(pos.sum() + neg.sum()),
        positives=int(pos.sum()),
        hist_positives=None if label_only else pos,
        hist_negatives=None if label_only else neg,
        # a confusion-matrix batch knows the primary threshold's matrix alone
        confusion=(confusion[0], EMPTY) if label_only else confusion,
        sums=None if label_only else _sums(pos, neg, _scores_of(placement)),
        unlabelled=unlabelled,
    )


@st.composite
def class_histograms(draw: st.DrawFn) -> tuple[Counts, Counts, str]:
    """Per-class histograms of a degenerate window, and where its scores sit."""
    mix = draw(st.sampled_from(["positives", "negatives", "both"]))
    placement = draw(st.sampled_from(["one_bin", "score0", "score1", "spread"]))
    if placement == "one_bin":
        bins = [draw(st.integers(0, N_BINS - 1))]
    elif placement in ("score0", "score1"):
        bins = [0 if placement == "score0" else N_BINS - 1]
    else:
        bins = draw(st.lists(st.integers(0, N_BINS - 1), min_size=2, max_size=4, unique=True))
    scale = draw(st.sampled_from(["single", "small", "ceiling"]))
    present = {"positives": (0,), "negatives": (1,)}.get(mix, (0, 1))
    hists = (np.zeros(N_BINS, dtype=np.int64), np.zeros(N_BINS, dtype=np.int64))
    cells = [(c, b) for c in present for b in bins]
    if scale == "single":  # one example (and, for two classes, one of the other)
        cells = cells[:1] if len(present) == 1 else [cells[0], cells[-1]]
    for c, b in cells:
        hists[c][b] += draw(st.integers(1, 3)) if scale == "small" else 1
    if scale == "ceiling":  # the rest of the 2^53 ceiling (minus a little) on one cell:
        c, b = cells[draw(st.integers(0, len(cells) - 1))]  # (the other class keeps 1 to 4)
        hists[c][b] += CEILING - draw(st.integers(0, 2)) - int(hists[0].sum() + hists[1].sum())
    return hists[0], hists[1], placement


def _halves(h: Counts | None) -> tuple[Counts | None, Counts | None]:
    return (None, None) if h is None else (h // 2, h - h // 2)


@st.composite
def degenerate_cases(
    draw: st.DrawFn,
) -> tuple[WindowSums, WindowSums, WindowSums | None]:
    """A degenerate window, the merge of two parts holding its rows, and a drift
    reference (None, a two-class one, or itself degenerate)."""
    pos, neg, placement = draw(class_histograms())
    label_only = placement != "spread" and draw(st.booleans())
    n = int(pos.sum() + neg.sum())
    unlabelled_rows = draw(st.sampled_from([0, 1, min(n + 1, CEILING)]))
    unlabelled = None
    if unlabelled_rows:
        unlabelled = np.zeros(N_BINS, dtype=np.int64)
        unlabelled[draw(st.integers(0, N_BINS - 1))] = unlabelled_rows
    window = window_of(pos, neg, unlabelled, placement, label_only)
    parts = [
        window_of(p, q, u, placement, label_only)
        for p, q, u in zip(_halves(pos), _halves(neg), _halves(unlabelled), strict=True)
    ]
    merged = WindowSums.merge(parts)
    assert merged is not None
    kind = draw(st.sampled_from(["none", "two_class", "degenerate"]))
    reference = None
    if kind == "two_class":
        ref_pos, ref_neg = np.zeros(N_BINS, dtype=np.int64), np.zeros(N_BINS, dtype=np.int64)
        ref_pos[N_BINS // 2 :], ref_neg[: N_BINS // 2 + 4] = 50, 200
        reference = window_of(ref_pos, ref_neg, None, "spread", False)
    elif kind == "degenerate":
        ref_pos, ref_neg, ref_placement = draw(class_histograms())
        reference = window_of(ref_pos, ref_neg, None, ref_placement, False)
    return window, merged, reference


# --- checks -----------------------------------------------------------------


def _range(name: str) -> tuple[float, float]:
    """The closed range of metric ``name`` (threshold suffix and calibrated_ prefix ignored)."""
    base = name.split("@", 1)[0].removeprefix("calibrated_")
    if base.startswith("ops_") or base in ("prior", "brier", "auc_roc", "auc_pr", "ks"):
        return 0.0, 1.0
    if base in LABELING_METRICS:
        return LABELING_METRICS[base].lower, LABELING_METRICS[base].upper
    return {
        "gini": (-1.0, 1.0),
        "log_loss": (0.0, -math.log(LOG_LOSS_EPS)),
        "auc_lift": (0.0, math.inf),
        "nauc_lift": (0.0, 1.0),
        "weighted_accuracy": (0.0, 1.0),
    }[base]


def _numbers(doc: Any) -> Iterator[float]:
    """Every float in a JSON-ready document."""
    if isinstance(doc, float):
        yield doc
    elif isinstance(doc, dict):
        for v in doc.values():
            yield from _numbers(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _numbers(v)


def check_result(result: WindowResult, window: WindowSums) -> None:
    """Finite or null everywhere, a reason for every null metric, values within range."""
    parts = (result.metrics, result.reasons, result.intervals, result.drift, result.curves)
    json.dumps([*parts, result.estimate], allow_nan=False)  # finite or null, JSON-ready
    assert all(math.isfinite(x) for x in _numbers([*parts, result.estimate]))
    tolerance = 1e-9
    for name, value in result.metrics.items():
        if value is None:
            assert result.reasons.get(name), f"{name} is null without a reason"
            continue
        low, high = _range(name)
        assert low - tolerance <= value <= high + tolerance, (name, value)
    for name, bounds in result.intervals.items():
        low, high = bounds["lower"], bounds["upper"]
        if low is None or high is None:
            assert bounds.get("reason") or result.metrics.get(name) is not None, name
            continue
        assert low <= high + tolerance, (name, bounds)
    if window.n > 0:
        assert result.metrics["prior"] == pytest.approx(window.positives / window.n)
    if result.curves is not None:
        assert all(0.0 <= x <= 1.0 for x in _numbers(result.curves["oprc"]["ops"]))
    if result.estimate is not None:
        prior = result.estimate["prior"]["value"]
        assert prior is None or 0.0 <= prior <= 1.0
        withheld = ERROR_REASON_KEY in result.reasons
        more = window.n > window.n_unlabelled
        mature = window.n >= MATURE * window.n_unlabelled
        completed = result.maturity is not None
        assert withheld == (window.n > 0 and (more or not (mature or completed)))
        assert (result.estimate["error"] is None) == (withheld or window.n == 0)


def check_every_path(window: WindowSums, merged: WindowSums, reference: WindowSums | None) -> None:
    """The worker's two tiers on ``window``, the read side's result on ``merged``."""
    for detail in (False, True):
        check_result(compute_window_result(MODEL, window, reference, detail=detail), window)
    check_result(compute_window_result(MODEL, merged, reference), merged)


@PROPS
@given(degenerate_cases())
def test_degenerate_windows_compute_in_every_tier_and_when_merged(
    case: tuple[WindowSums, WindowSums, WindowSums | None],
) -> None:
    check_every_path(*case)


def _one_bin(positives: int, negatives: int, at: int = N_BINS - 1) -> WindowSums:
    pos, neg = np.zeros(N_BINS, dtype=np.int64), np.zeros(N_BINS, dtype=np.int64)
    pos[at], neg[0] = positives, negatives
    return window_of(pos, neg, None, "score1", False)


@pytest.mark.parametrize(
    ("positives", "negatives"),
    [(3, 0), (0, 3), (CEILING, 0), (CEILING - 1, 1), (1, CEILING - 1), (1, 0)],
    ids=[
        "three_positives",
        "three_negatives",
        "ceiling_positives",
        "one_negative_at_ceiling",
        "one_positive_at_ceiling",
        "single_positive",
    ],
)
def test_the_reported_windows_compute(positives: int, negatives: int) -> None:
    """Issue 20: three rows labelled [1, 1, 1] raised ZeroDivisionError in the OPRC, and
    so did all positives at the 2^53 ceiling; one negative among them made NaN nodes."""
    window = _one_bin(positives, negatives)
    first = _one_bin(positives // 2, negatives // 2)
    second = _one_bin(positives - first.positives, negatives - first.negatives)
    halves = WindowSums.merge([first, second])
    assert halves is not None
    check_every_path(window, halves, None)
    full = compute_window_result(MODEL, window, None)
    assert full.curves is not None
    if negatives == 0:  # no OPS without a reference curve at the window's prior
        assert full.curves["oprc"]["ops"] == [None] * len(full.curves["oprc"]["recall"])
