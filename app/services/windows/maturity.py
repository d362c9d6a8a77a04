"""A window's ``maturity`` document: the whole window's metrics while its labels trickle in.

A window holding every prediction's score without its label (the unlabelled
histogram) and the labels of some of them (the labelled histograms) is
completed under the model's ``label_missingness`` by :mod:`app.maturity`
(docs/maturity.md). This module decides which windows are completed, and why
the others are not (the window's ``reasons["maturity"]``), builds the stored
document, and completes merged windows: each stored window is completed on
its own and the completed histograms are summed (completing the summed
histograms would be biased whenever label rates differ between windows).

The completed histograms are fractional; :func:`completed_sums` rounds them
to whole counts (cumulative rounding: every bin within one row, every
cumulative count within half a row) where a whole window is needed: the
drift tests and the drift reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from app.drift.histograms import FloatArray
from app.drift.two_sample import coarsen, quantile_bin_starts
from app.maturity import (
    CONFUSION_MATRIX_ROWS,
    NO_LABELS,
    NO_SCORES,
    NOT_COMPLETABLE,
    CompletedPrior,
    Completion,
    CompletionFit,
    NoCompletion,
    bins_of_thresholds,
    complete,
    completed_metrics,
    completion_intervals,
    merged_completion_intervals,
)
from app.metrics.binning import Counts
from app.metrics.curves import cumulative_counts_from_histograms
from app.services.models.config import ModelConfig
from app.services.windows.sums import WindowSums

ASSUMPTION_NONE = "assumption-none"
"""``reasons["maturity"]`` under ``label_missingness: none`` (no completion)."""
NOT_COMPLETABLE_REASON = "not-completable"
"""Reason of the completed Brier score and log loss (pooled over both classes)."""
MATURITY_STREAM = 2
"""Appended to the sums' seed for the generator of the completion's bootstrap."""
INTERVAL_LEVEL = 0.95


def window_completion(model: ModelConfig, parts: Sequence[WindowSums]) -> Completion | str:
    """The completion of a window made of the stored windows ``parts`` (one for a
    stored window), or why it has none (a reason code of :mod:`app.maturity`)."""
    if model.label_missingness == "none":
        return ASSUMPTION_NONE
    if all(part.n_unlabelled == 0 for part in parts):
        return NO_SCORES
    done: list[Completion] = []
    for part in parts:
        one = _complete_one(model, part)
        if isinstance(one, Completion):
            done.append(one)
        elif one == NO_SCORES and part.has_full_histograms:  # labelled rows only
            assert part.hist_positives is not None and part.hist_negatives is not None
            done.append(_labelled(part.hist_positives, part.hist_negatives, model))
        elif one == NO_SCORES:
            return CONFUSION_MATRIX_ROWS
        else:
            return one
    return done[0] if len(done) == 1 else _summed(done, model.drift_settings().alpha)


def _complete_one(model: ModelConfig, window: WindowSums) -> Completion | str:
    if window.n_unlabelled == 0:
        return NO_SCORES
    if window.n == 0:
        return NO_LABELS
    if not window.has_full_histograms:
        return CONFUSION_MATRIX_ROWS
    assert window.hist_positives is not None and window.hist_negatives is not None
    out = complete(
        window.unlabelled,
        window.hist_positives,
        window.hist_negatives,
        assumption="score" if model.label_missingness == "score" else "class",
        threshold_bins=bins_of_thresholds(model.bin_edges, model.thresholds),
        alpha=model.drift_settings().alpha,
    )
    return out.reason if isinstance(out, NoCompletion) else out


def _labelled(positives: Counts, negatives: Counts, model: ModelConfig) -> Completion:
    h1, h0 = positives.astype(np.float64), negatives.astype(np.float64)
    n = float(h1.sum() + h0.sum())
    prior = float(h1.sum()) / n
    return Completion(
        labelled=n,
        scored=0.0,
        completeness=1.0,
        assumption=model.label_missingness,
        prior=CompletedPrior(prior, prior, prior, INTERVAL_LEVEL),
        positives=h1,
        negatives=h0,
        fit=None,
    )


def _summed(parts: Sequence[Completion], alpha: float) -> Completion:
    """The sum of completed windows. The prior's interval adds the parts' half-widths
    (in rows) in quadrature; the fit test is the smallest p-value times the number of
    tests (Bonferroni), so a merged window is reliable when no part clearly fails."""
    h1 = np.sum([c.positives for c in parts], axis=0)
    h0 = np.sum([c.negatives for c in parts], axis=0)
    whole = float(h1.sum() + h0.sum())
    labelled = sum(c.labelled for c in parts)
    value = float(h1.sum()) / whole
    rows = [
        (c.prior.upper - c.prior.lower) / 2.0 * float(c.positives.sum() + c.negatives.sum())
        for c in parts
    ]
    half = math.sqrt(sum(r * r for r in rows)) / whole
    tests = [c.fit.p_value for c in parts if c.fit is not None]
    p_value = min(1.0, min(tests) * len(tests)) if tests else None
    return Completion(
        labelled=labelled,
        scored=sum(c.scored for c in parts),
        completeness=labelled / whole,
        assumption=parts[0].assumption,
        prior=CompletedPrior(value, max(value - half, 0.0), min(value + half, 1.0), INTERVAL_LEVEL),
        positives=h1,
        negatives=h0,
        fit=None if p_value is None else CompletionFit(p_value, p_value >= alpha),
    )


def maturity_document(
    model: ModelConfig, completion: Completion, undefined_reason: Callable[[str], str]
) -> dict[str, Any]:
    """The summary tier's ``maturity`` document (its ``intervals`` empty: the detail's).

    ``{"labelled", "scored", "completeness", "assumption", "prior": {"value", "lower",
    "upper", "level"}, "metrics", "reasons", "intervals", "fit"}``; ``reasons`` says why
    each null completed metric is null (``undefined_reason`` of the labelled ones, and
    :data:`NOT_COMPLETABLE_REASON`).
    """
    metrics = completed_metrics(
        completion,
        edges=model.bin_edges,
        thresholds=model.thresholds,
        pi0=model.pi0,
        cost_ratio=model.cost_ratio,
    )
    reasons = {
        name: NOT_COMPLETABLE_REASON if name in NOT_COMPLETABLE else undefined_reason(name)
        for name, value in metrics.items()
        if value is None
    }
    return {
        "labelled": completion.labelled,
        "scored": completion.scored,
        "completeness": completion.completeness,
        "assumption": completion.assumption,
        "prior": completion.prior.to_dict(),
        "metrics": metrics,
        "reasons": reasons,
        "intervals": {},
        "fit": None if completion.fit is None else completion.fit.to_dict(),
    }


INTERVAL_BINS = 200
"""Most bins the detail tier's bootstrap of a completion runs on (:func:`maturity_intervals`)."""


def maturity_intervals(
    model: ModelConfig,
    window: WindowSums,
    completion: Completion,
    metrics: dict[str, float | None],
    rng: np.random.Generator,
) -> dict[str, dict[str, Any]]:
    """The detail tier's intervals of the completed metrics that have a value
    (:func:`app.maturity.completion_intervals`), ``{"lower", "upper", "level"}``;
    null bounds with a reason where the bootstrap leaves one undefined.

    The bootstrap's cost grows with the bins (about 0.2 s a window on 10,000),
    so a finer model's window is drawn on at most :data:`INTERVAL_BINS` bins
    cut at the quantiles of its scored rows and at every threshold (the
    metrics at the thresholds are the same on both), each interval moved by
    the difference between the window's completed value and the coarse one.
    """
    assert window.hist_positives is not None and window.hist_negatives is not None
    rows = (window.unlabelled, window.hist_positives, window.hist_negatives)
    edges, coarse = model.bin_edges, completion
    if len(edges) - 1 > INTERVAL_BINS:
        rows, edges, coarse = _coarse(model, rows, completion)
    drawn = completion_intervals(
        *rows,
        coarse,
        edges=edges,
        thresholds=model.thresholds,
        pi0=model.pi0,
        cost_ratio=model.cost_ratio,
        rng=rng,
        level=INTERVAL_LEVEL,
    )
    at = (
        completed_metrics(
            coarse,
            edges=edges,
            thresholds=model.thresholds,
            pi0=model.pi0,
            cost_ratio=model.cost_ratio,
        )
        if coarse is not completion
        else metrics
    )
    return _shifted(metrics, drawn, at)


def _shifted(
    metrics: dict[str, float | None],
    drawn: dict[str, tuple[float, float] | None],
    at: dict[str, float | None],
) -> dict[str, dict[str, Any]]:
    """``{"lower", "upper", "level"}`` of each metric with a value: its ``drawn`` interval
    moved by the metric's value less its value ``at`` the bins drawn on (null bounds with
    a reason where the bootstrap leaves one undefined)."""
    out: dict[str, dict[str, Any]] = {}
    for name, value in metrics.items():
        if value is None or name not in drawn:
            continue
        bounds, point = drawn[name], at.get(name)
        if bounds is None or point is None:
            reason = {"reason": UNDEFINED_DRAWS}
            out[name] = {"lower": None, "upper": None, "level": INTERVAL_LEVEL, **reason}
            continue
        shift = value - point
        out[name] = {
            "lower": bounds[0] + shift,
            "upper": bounds[1] + shift,
            "level": INTERVAL_LEVEL,
        }
    return out


MAX_MERGED_INTERVAL_PARTS = 48
"""Most stored windows whose bootstraps a merged window's intervals sum
(:func:`merged_maturity_intervals`): a day of hours, a month of days."""
MERGED_INTERVAL_BINS = 50
"""Most bins (besides the thresholds) a merged window's stored windows are drawn on."""
MERGED_TOO_MANY = (
    f"a merged window of more than {MAX_MERGED_INTERVAL_PARTS} stored windows: the completed "
    "metrics' intervals are those of its stored windows"
)
"""Reason of a merged window's null completed-metric intervals (its prior's is given)."""
MERGED_NOT_COMPLETED = (
    "a stored window of the merged window cannot be completed on the bins its bootstrap "
    "runs on: the completed metrics' intervals are those of its stored windows"
)
"""Reason of a merged window's null completed-metric intervals (its prior's is given)."""


def merged_maturity_intervals(
    model: ModelConfig,
    parts: Sequence[WindowSums],
    completion: Completion,
    metrics: dict[str, float | None],
    rng: np.random.Generator,
) -> dict[str, dict[str, Any]] | str:
    """The detail tier's intervals of a merged window's completed metrics
    (:func:`app.maturity.merged_completion_intervals`: each stored window drawn on its own,
    the draws summed), as :func:`maturity_intervals`; or the reason there are none.

    Every stored window is drawn on the same bins, at most :data:`MERGED_INTERVAL_BINS`
    cut at the quantiles of the merged window's completed rows and at every threshold
    (the metrics at a threshold are the same on both), and completed there; each
    interval is moved by the difference between the merged window's completed value and
    that of the summed coarse completions. The cost grows with the stored windows (a few
    milliseconds each), hence :data:`MAX_MERGED_INTERVAL_PARTS`.
    """
    if len(parts) > MAX_MERGED_INTERVAL_PARTS:
        return MERGED_TOO_MANY
    whole = completion.positives + completion.negatives
    starts = np.arange(len(whole))
    if len(whole) > MERGED_INTERVAL_BINS:
        cuts = quantile_bin_starts(whole, MERGED_INTERVAL_BINS)
        starts = np.union1d(cuts, bins_of_thresholds(model.bin_edges, model.thresholds))
        starts = starts[starts < len(whole)].astype(np.intp)
    edges = np.append(np.asarray(model.bin_edges)[starts], model.bin_edges[-1])
    drawn_parts: list[tuple[FloatArray, FloatArray, FloatArray, Completion]] = []
    for part in parts:
        assert part.hist_positives is not None and part.hist_negatives is not None
        pos = coarsen(part.hist_positives.astype(np.float64), starts)
        neg = coarsen(part.hist_negatives.astype(np.float64), starts)
        # a stored window of labelled rows only is its own scored rows (completeness 1)
        scored = pos + neg
        if part.unlabelled is not None and part.n_unlabelled > 0:
            scored = coarsen(part.unlabelled.astype(np.float64), starts)
        done = complete(
            scored,
            pos,
            neg,
            assumption="score" if completion.assumption == "score" else "class",
            threshold_bins=bins_of_thresholds(edges, model.thresholds),
            alpha=model.drift_settings().alpha,
        )
        if not isinstance(done, Completion):
            return MERGED_NOT_COMPLETED
        drawn_parts.append((scored, pos, neg, done))
    summed = _summed([p[3] for p in drawn_parts], model.drift_settings().alpha)
    options: dict[str, Any] = {
        "edges": edges,
        "thresholds": model.thresholds,
        "pi0": model.pi0,
        "cost_ratio": model.cost_ratio,
    }
    drawn = merged_completion_intervals(
        drawn_parts, summed, rng=rng, level=INTERVAL_LEVEL, **options
    )
    at = metrics if len(starts) == len(whole) else completed_metrics(summed, **options)
    return _shifted(metrics, drawn, at)


def _coarse(
    model: ModelConfig, rows: tuple[Any, Any, Any], completion: Completion
) -> tuple[tuple[Any, Any, Any], FloatArray, Completion]:
    """``rows`` (unlabelled, positives, negatives) on at most about :data:`INTERVAL_BINS`
    bins cut at the quantiles of the scored rows and at every threshold, their edges,
    and their completion; the fine rows, edges and completion when the coarse rows
    cannot be completed (the bootstrap then runs on every bin)."""
    unlabelled = np.asarray(rows[0], dtype=np.float64)
    cuts = quantile_bin_starts(unlabelled, INTERVAL_BINS)
    starts = np.union1d(cuts, bins_of_thresholds(model.bin_edges, model.thresholds))
    starts = starts[starts < len(unlabelled)].astype(np.intp)
    edges = np.append(np.asarray(model.bin_edges)[starts], model.bin_edges[-1])
    coarse_rows = (
        coarsen(unlabelled, starts),
        coarsen(np.asarray(rows[1], dtype=np.float64), starts),
        coarsen(np.asarray(rows[2], dtype=np.float64), starts),
    )
    out = complete(
        *coarse_rows,
        assumption="score" if completion.assumption == "score" else "class",
        threshold_bins=bins_of_thresholds(edges, model.thresholds),
        alpha=model.drift_settings().alpha,
    )
    if not isinstance(out, Completion):  # the coarse rows fail the protocol: draw on the fine
        return rows, np.asarray(model.bin_edges, dtype=np.float64), completion
    return coarse_rows, edges, out


UNDEFINED_DRAWS = "the metric is undefined in too many of the bootstrap's draws"
"""Reason of a null completed-metric interval."""


def whole_counts(values: FloatArray) -> Counts:
    """Fractional per-bin counts rounded to whole ones by cumulative rounding.

    >>> whole_counts(np.array([0.4, 0.4, 0.4, 1.8])).tolist()
    [0, 1, 0, 2]
    """
    cumulative = np.rint(np.cumsum(values)).astype(np.int64)
    return np.diff(cumulative, prepend=0)


def completed_sums(model: ModelConfig, window: WindowSums, completion: Completion) -> WindowSums:
    """``window`` with its labelled histograms replaced by the completed ones, rounded
    to whole counts (no unlabelled rows left): the whole window the drift tests read."""
    h1, h0 = whole_counts(completion.positives), whole_counts(completion.negatives)
    curve = cumulative_counts_from_histograms(h1, h0, model.bin_edges)
    positives, n = int(h1.sum()), int(h1.sum() + h0.sum())
    return replace(
        window,
        n=n,
        positives=positives,
        hist_positives=h1,
        hist_negatives=h0,
        confusion=tuple(curve.confusion_at(t) for t in model.thresholds),
        sums=None,
        unlabelled=None,
    )


def reference_window(model: ModelConfig, window: WindowSums) -> WindowSums:
    """A window as a drift reference sums it: completed (:func:`completed_sums`) where
    it is partially labelled and can be completed, else as it is."""
    completion = window_completion(model, (window,))
    if not isinstance(completion, Completion) or completion.scored == 0.0:
        return window
    return completed_sums(model, window, completion)
