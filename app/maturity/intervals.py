"""Intervals of a completed window's metrics: a parametric bootstrap (docs/maturity.md).

Each draw builds a window the completion's model could have produced, completes
it as :func:`app.maturity.complete` does and computes its metrics; an
interval is the equal-tailed quantiles of the draws.

* ``class``: the labelled histograms are redrawn (multinomial per class, at
  the labelled shapes f1 = p / P_L, f0 = q / Q_L), and the remainder's share
  of positives moves with them as the maximum-likelihood share would, to
  first order (its influence vector, :mod:`app.estimation.sampling`), plus
  the remainder's own normal sampling error: the same intervals as refitting
  pi_v in each draw, without 200 maximisations. At completeness 1 this is the
  labelled metrics' bootstrap.
* ``score``: the labelled rows are facts of the window, the remainder's split
  is not. Per group, the share of positives is drawn from its posterior
  Beta(p_g + m, q_g + 1 - m), one pseudo-row split as the labelled rows of
  the group's piece between two thresholds (m their share of positives: a
  group at 0 or 1 still varies, and the pseudo-rows add no positives to the
  piece on average, which half a row per class in each of many small groups
  would), and the group's remainder is split binomially at the drawn share.

Under ``class`` the completed AUC-ROC, Gini, KS and calibrated AUC-PR are the
labelled ones, so their intervals are the labelled window's (BCa, and the
closed forms of :mod:`app.metrics.area_intervals` where the bootstrap does
not cover); the prior's interval is the completion's own. The OPS intervals
are the OPS of their metric's interval over the prior's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from app.drift.histograms import FloatArray
from app.drift.two_sample import coarsen
from app.errors import InvalidInput
from app.estimation.reference import GroupedClasses
from app.maturity.completion import (
    Completion,
    check_rows,
    class_histograms,
    class_share,
    class_spread,
    remainder,
    score_shares,
)
from app.maturity.metrics import NOT_COMPLETABLE, row_metrics
from app.metrics.evaluate import OPS_METRICS
from app.metrics.uncertainty import bootstrap_intervals, ops_interval, row_quantiles
from app.metrics.validation import check_probability

Interval = tuple[float, float]


def completion_intervals(
    unlabelled: Any,
    positives: Any,
    negatives: Any,
    completion: Completion,
    *,
    edges: Any,
    thresholds: Sequence[float],
    pi0: float | None,
    cost_ratio: float | None,
    rng: np.random.Generator,
    draws: int = 200,
    level: float = 0.95,
) -> dict[str, Interval | None]:
    """Equal-tailed intervals of every completed metric (module docstring).

    Parameters
    ----------
    unlabelled, positives, negatives : array_like of shape (J,)
        The window's histograms, as given to :func:`app.maturity.complete`.
    completion : Completion
        Their completion.
    edges, thresholds, pi0, cost_ratio
        As in :func:`app.maturity.completed_metrics`.
    rng : numpy.random.Generator
        Source of the draws.
    draws : int
        Bootstrap draws (>= 20).
    level : float in (0, 1)
        Coverage of each interval.

    Returns
    -------
    dict
        The keys of :func:`app.maturity.completed_metrics`; ``None`` for
        :data:`~app.maturity.metrics.NOT_COMPLETABLE` and where more than
        1 - ``level`` of the draws leave the metric undefined.
    """
    rows = check_rows(unlabelled, positives, negatives)
    level = _checked_options(draws, level)
    starts = np.asarray(completion.group_starts, dtype=np.intp)
    v = remainder(rows.unlabelled, rows.labelled, starts)
    if v is None:
        raise InvalidInput("completion", "does not belong to these histograms")
    # empty bins hold nothing in any draw and move no metric: draw on the others only
    keep = np.flatnonzero(rows.unlabelled + rows.labelled > 0.0)
    group = np.searchsorted(starts, keep, side="right") - 1
    kept_starts = np.flatnonzero(np.append(True, group[1:] != group[:-1]))
    kept_edges = np.append(np.asarray(edges, dtype=np.float64)[keep], 1.0)
    pos, neg, rest = rows.positives[keep], rows.negatives[keep], v[keep]

    def metrics_of(h: tuple[FloatArray, FloatArray]) -> dict[str, FloatArray]:
        return row_metrics(
            h[0], h[1], edges=kept_edges, thresholds=thresholds, pi0=pi0, cost_ratio=cost_ratio
        )

    if completion.assumption == "class":
        drawn = metrics_of(_class_draws(pos, neg, rest, rng, draws))
    else:
        completed, truth = _score_draws(pos, neg, rest, kept_starts, rng, draws)
        point = metrics_of((completion.positives[None, keep], completion.negatives[None, keep]))
        drawn = _pivoted(point, metrics_of(completed), metrics_of(truth))
    out = _quantiles(drawn, draws, level)
    if completion.assumption == "class":
        out.update(_labelled_areas(rows.positives, rows.negatives, pi0, level, rng))
    return _with_prior(out, completion)


def merged_completion_intervals(
    parts: Sequence[tuple[Any, Any, Any, Completion]],
    completion: Completion,
    *,
    edges: Any,
    thresholds: Sequence[float],
    pi0: float | None,
    cost_ratio: float | None,
    rng: np.random.Generator,
    draws: int = 200,
    level: float = 0.95,
) -> dict[str, Interval | None]:
    """Intervals of a merged window's completed metrics, the window being the sum of
    the completed windows ``parts`` (docs/maturity.md, "Windows built from windows").

    Each part is drawn as :func:`completion_intervals` draws a window, and each draw's
    completed histograms are summed over the parts (under ``score`` so are the draw's
    truths, the merged error being that of the summed completion against the summed
    truth), so that every part's error enters every draw. A part under ``class``
    holding one class only (fully labelled, else it has no completion) does not vary.
    The curve areas take the draws' quantiles too: the summed curve is not a labelled
    one. OPS intervals and the prior's interval are those of ``completion``.

    Parameters
    ----------
    parts : sequence of (unlabelled, positives, negatives, Completion)
        Each stored window's histograms (its unlabelled rows being its labelled ones
        when it holds no scored rows) on the merged window's bins, and their completion.
    completion : Completion
        The merged window's: the sum of the parts' completions.
    edges, thresholds, pi0, cost_ratio, rng, draws, level
        As in :func:`completion_intervals`.

    Returns
    -------
    dict
        As :func:`completion_intervals`.
    """
    level = _checked_options(draws, level)
    shape = (draws, len(completion.positives))
    completed = (np.zeros(shape), np.zeros(shape))
    truth = (np.zeros(shape), np.zeros(shape))
    for unlabelled, positives, negatives, part in parts:
        rows = check_rows(unlabelled, positives, negatives)
        starts = np.asarray(part.group_starts, dtype=np.intp)
        v = remainder(rows.unlabelled, rows.labelled, starts)
        if v is None or part.assumption != completion.assumption:
            raise InvalidInput("parts", "a completion does not belong to its histograms")
        if part.assumption == "score":
            drawn, drawn_truth = _score_draws(rows.positives, rows.negatives, v, starts, rng, draws)
        elif rows.n_positives > 0.0 and rows.n_negatives > 0.0:
            drawn = drawn_truth = _class_draws(rows.positives, rows.negatives, v, rng, draws)
        else:
            drawn = drawn_truth = (rows.positives[None, :], rows.negatives[None, :])
        for total, add in ((completed, drawn), (truth, drawn_truth)):
            total[0][:] += add[0]
            total[1][:] += add[1]

    def metrics_of(h: tuple[FloatArray, FloatArray]) -> dict[str, FloatArray]:
        return row_metrics(
            h[0], h[1], edges=edges, thresholds=thresholds, pi0=pi0, cost_ratio=cost_ratio
        )

    drawn_metrics = metrics_of(completed)
    if completion.assumption == "score":
        point = metrics_of((completion.positives[None, :], completion.negatives[None, :]))
        drawn_metrics = _pivoted(point, drawn_metrics, metrics_of(truth))
    return _with_prior(_quantiles(drawn_metrics, draws, level), completion)


def _checked_options(draws: int, level: float) -> float:
    """``level`` checked (and returned as a float), ``draws`` an integer >= 20."""
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 20:
        raise InvalidInput("draws", f"is {draws!r}, must be an integer >= 20")
    return check_probability("level", level)


def _pivoted(
    point: dict[str, FloatArray], estimates: dict[str, FloatArray], truths: dict[str, FloatArray]
) -> dict[str, FloatArray]:
    """``score``: the point estimate less each draw's error (its completion's metric less
    its truth's), inside the values drawn."""
    return {
        key: _within(point[key] - (values - truths[key]), truths[key], values)
        for key, values in estimates.items()
    }


def _with_prior(
    intervals: dict[str, Interval | None], completion: Completion
) -> dict[str, Interval | None]:
    """``intervals`` with the OPS ones over the prior's, the not completable ones
    (``None``) and the prior's own (the completion's)."""
    prior = (completion.prior.lower, completion.prior.upper)
    intervals.update(_ops_intervals(intervals, prior))
    intervals.update(dict.fromkeys(NOT_COMPLETABLE))
    intervals["prior"] = prior
    return intervals


def _ops_intervals(
    intervals: dict[str, Interval | None], prior: Interval
) -> dict[str, Interval | None]:
    """``ops_<name>`` of each metric of :data:`OPS_METRICS` at every threshold: the OPS of
    the metric interval's ends over the prior's interval
    (:func:`app.metrics.uncertainty.ops_interval`)."""
    out: dict[str, Interval | None] = {}
    for key, interval in intervals.items():
        name = key.split("@", 1)[0]
        if name not in OPS_METRICS:
            continue
        ops = None if interval is None else ops_interval(name, interval, prior)
        out[f"ops_{key}"] = None if ops is None or np.isnan(ops[0]) else ops
    return out


def _within(values: FloatArray, *drawn: FloatArray) -> FloatArray:
    """``values`` clipped to the range the metric took in the ``drawn`` windows (nan
    ignored): inside its possible values, as an OPS needs."""
    possible = np.concatenate(drawn)
    out: FloatArray = np.clip(values, np.fmin.reduce(possible), np.fmax.reduce(possible))
    return out


def _quantiles(
    drawn: dict[str, FloatArray], draws: int, level: float
) -> dict[str, Interval | None]:
    """Equal-tailed quantiles of each metric's defined draws (those defined in every draw
    from one sort); ``None`` when more than 1 - level of the ``draws`` are undefined."""
    probs = [(1.0 - level) / 2.0, (1.0 + level) / 2.0]
    out: dict[str, Interval | None] = {}
    whole = [key for key, values in drawn.items() if np.isfinite(values).all()]
    if whole:
        tails = row_quantiles(np.stack([drawn[key] for key in whole]), probs)
        out.update(zip(whole, zip(tails[0].tolist(), tails[1].tolist(), strict=True), strict=True))
    for key, values in drawn.items():
        if key in out:
            continue
        defined = values[np.isfinite(values)]
        if draws - defined.size > (1.0 - level) * draws:
            out[key] = None
        else:
            low, high = np.quantile(defined, probs)
            out[key] = float(low), float(high)
    return out


def _labelled_areas(
    positives: FloatArray,
    negatives: FloatArray,
    pi0: float | None,
    level: float,
    rng: np.random.Generator,
) -> dict[str, Interval | None]:
    """Under ``class`` the completed curve's class-conditional areas are the labelled
    ones: their intervals are the labelled window's (BCa for AUC-ROC and Gini, the
    closed forms for KS and calibrated AUC-PR, :func:`app.metrics.uncertainty.bootstrap_intervals`),
    which cover where a percentile bootstrap of few labelled positives does not."""
    names = ["auc_roc", "gini", "ks", *(["calibrated_auc_pr"] if pi0 is not None else [])]
    areas = bootstrap_intervals(positives, negatives, names, rng=rng, pi0=pi0, level=level)
    return {n: None if np.isnan(low) else (low, high) for n, (low, high) in areas.items()}


def _class_draws(
    positives: FloatArray,
    negatives: FloatArray,
    v: FloatArray,
    rng: np.random.Generator,
    draws: int,
) -> tuple[FloatArray, FloatArray]:
    """Completed histograms of each draw: the labelled rows multinomial per class at the
    labelled shapes, the remainder's share normal at the completion's share and standard
    error (which holds the labelled rows' error in f1 and f0 and the remainder's own)."""
    n_pos, n_neg, total = float(positives.sum()), float(negatives.sum()), float(v.sum())
    pos = rng.multinomial(int(np.rint(n_pos)), positives / n_pos, size=draws).astype(np.float64)
    neg = rng.multinomial(int(np.rint(n_neg)), negatives / n_neg, size=draws).astype(np.float64)
    if total == 0.0:
        return pos, neg
    classes = GroupedClasses.from_bins(positives, negatives)
    share = class_share(classes, classes.grouped(v))
    sampling, _ = class_spread(classes, share, total)
    # the maximiser moves by b'(e - pi e1 - (1 - pi) e0) (app.estimation.sampling): e1, e0
    # the draw's errors in the labelled group shares, e the remainder's own, normal
    e1 = coarsen_rows(pos, classes.starts) / n_pos - classes.positives / n_pos
    e0 = coarsen_rows(neg, classes.starts) / n_neg - classes.negatives / n_neg
    moved = -(share.smoothed * e1 + (1.0 - share.smoothed) * e0) @ sampling.influence
    moved += rng.normal(0.0, math.sqrt(sampling.window_variance), size=draws)
    drawn_share = np.clip(share.value + share.slope * moved, 0.0, 1.0)
    return class_histograms(pos, neg, drawn_share, total)


def coarsen_rows(rows: FloatArray, starts: Any) -> FloatArray:
    """:func:`app.drift.two_sample.coarsen` of each row."""
    out: FloatArray = np.add.reduceat(rows, starts, axis=1)
    return out


def _score_draws(
    positives: FloatArray,
    negatives: FloatArray,
    v: FloatArray,
    starts: Any,
    rng: np.random.Generator,
    draws: int,
) -> tuple[tuple[FloatArray, FloatArray], tuple[FloatArray, FloatArray]]:
    """(completed, truth) histograms of each draw: the labelled rows and the remainder's
    positives drawn per bin at the bin's smoothed share, the draw completed as
    :func:`app.maturity.complete` completes it."""
    labelled = positives + negatives
    sizes = np.diff(np.append(starts, v.shape[0]))
    share, rows = score_shares(coarsen(positives, starts), coarsen(labelled, starts))
    # each group's share drawn from its Jeffreys posterior: the error of each draw's
    # completion is measured against the draw's own truth, so the half rows shape the
    # spread only (a group seen at 0 or 1 still varies), not the centre
    hits = share * rows
    truth_share = rng.beta(hits + 0.5, rows - hits + 0.5, size=(draws, rows.size))
    per_bin_truth = np.repeat(truth_share, sizes, axis=1)
    n_rows, v_rows = np.rint(labelled).astype(np.int64), np.rint(v).astype(np.int64)
    drawn_pos = rng.binomial(n_rows, per_bin_truth).astype(np.float64)
    drawn_rest = rng.binomial(v_rows, per_bin_truth).astype(np.float64)
    drawn_lab = n_rows.astype(np.float64)
    drawn_share = np.array(
        [score_shares(coarsen(row, starts), coarsen(drawn_lab, starts))[0] for row in drawn_pos]
    )
    per_bin = np.repeat(drawn_share, sizes, axis=1)
    drawn_neg = drawn_lab - drawn_pos
    completed = (drawn_pos + per_bin * v, drawn_neg + (1.0 - per_bin) * v)
    truth = (drawn_pos + drawn_rest, drawn_neg + v_rows - drawn_rest)
    return completed, truth
