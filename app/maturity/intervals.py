"""Intervals of a completed window's metrics: a parametric bootstrap (docs/maturity.md).

Each draw builds a full-label window the completion's model could have come
from; an interval is the equal-tailed quantiles of the draws' metrics.

* ``class``: the labelled histograms are redrawn (multinomial per class, at
  the labelled shapes f1 = p / P_L, f0 = q / Q_L), and the remainder's share
  of positives moves with them as the maximum-likelihood share would, to
  first order (its influence vector, :mod:`app.estimation.sampling`), plus
  the remainder's own normal sampling error: the same intervals as refitting
  pi_v in each draw, without 200 maximisations. At completeness 1 this is the
  labelled metrics' bootstrap.
* ``score``: the labelled rows are facts of the window, the remainder's split
  is not. Each draw keeps the labelled rows and splits every bin's remainder
  binomially at a share drawn for its group (with the spread of the group's
  labelled share, and one pseudo-row per piece between two thresholds) and
  tilted by the bin's own labelled rows (:func:`_score_draws`): the draws are
  the window's possible full-label histograms, not completions of them.

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
    bins_of_thresholds,
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
        out = _quantiles(metrics_of(_class_draws(pos, neg, rest, rng, draws)), draws, level)
        out.update(_labelled_areas(rows.positives, rows.negatives, pi0, level, rng))
    else:
        pieces = _pieces(edges, thresholds, keep[kept_starts])
        full = _score_draws(pos, neg, rest, kept_starts, pieces, rng, draws)
        out = _quantiles(metrics_of(full), draws, level)
        point = (completion.positives[keep], completion.negatives[keep])
        out["ks"] = _ks_floor(out["ks"], full, point, level)
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
    full-label histograms are summed over the parts, so that every part's
    uncertainty enters every draw. A part under ``class``
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
    for unlabelled, positives, negatives, part in parts:
        rows = check_rows(unlabelled, positives, negatives)
        starts = np.asarray(part.group_starts, dtype=np.intp)
        v = remainder(rows.unlabelled, rows.labelled, starts)
        if v is None or part.assumption != completion.assumption:
            raise InvalidInput("parts", "a completion does not belong to its histograms")
        if part.assumption == "score":
            pieces = _pieces(edges, thresholds, starts)
            drawn = _score_draws(rows.positives, rows.negatives, v, starts, pieces, rng, draws)
        elif rows.n_positives > 0.0 and rows.n_negatives > 0.0:
            drawn = _class_draws(rows.positives, rows.negatives, v, rng, draws)
        else:
            drawn = (rows.positives[None, :], rows.negatives[None, :])
        completed[0][:] += drawn[0]
        completed[1][:] += drawn[1]

    drawn_metrics = row_metrics(
        completed[0],
        completed[1],
        edges=edges,
        thresholds=thresholds,
        pi0=pi0,
        cost_ratio=cost_ratio,
    )
    out = _quantiles(drawn_metrics, draws, level)
    if completion.assumption == "score":
        point = (completion.positives, completion.negatives)
        out["ks"] = _ks_floor(out["ks"], completed, point, level)
    return _with_prior(out, completion)


def _ks_floor(
    interval: Interval | None,
    drawn: tuple[FloatArray, FloatArray],
    point: tuple[FloatArray, FloatArray],
    level: float,
) -> Interval | None:
    """The KS interval of ``score`` draws with its lower end taken from the draws' gap
    TPR - FPR at the completed curve's maximising bin (docs/maturity.md, "KS").

    KS is the maximum gap over the curve, so each drawn KS takes a lift from the noise
    of its drawn curve, and the draws' lower quantile lies above many full-label
    values. The full-label KS is at least its gap at any fixed bin; the gap at a bin
    fixed by the completion (not by the draw) has no such lift, so the lower quantile
    of its draws bounds the full-label KS from below. The upper end is the drawn KS's.
    """
    if interval is None:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):  # a class absent: nan, dropped
        at = int(np.argmax(_gaps(point[0][None, :], point[1][None, :])[0]))
        gaps = _gaps(drawn[0], drawn[1])[:, at]
    gaps = gaps[np.isfinite(gaps)]
    if gaps.size == 0:
        return interval
    low = float(np.quantile(gaps, (1.0 - level) / 2.0))
    return min(max(low, 0.0), interval[0]), interval[1]


def _gaps(h1: FloatArray, h0: FloatArray) -> FloatArray:
    """TPR - FPR of each row's histograms at every bin's lower edge, scores descending."""
    tps, fps = np.cumsum(h1[:, ::-1], axis=1), np.cumsum(h0[:, ::-1], axis=1)
    out: FloatArray = tps / tps[:, -1:] - fps / fps[:, -1:]
    return out


def _checked_options(draws: int, level: float) -> float:
    """``level`` checked (and returned as a float), ``draws`` an integer >= 20."""
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 20:
        raise InvalidInput("draws", f"is {draws!r}, must be an integer >= 20")
    return check_probability("level", level)


def _pieces(edges: Any, thresholds: Sequence[float], first_bins: Any) -> Any:
    """The piece between two thresholds (0 below the lowest) of each group's first bin."""
    thresholds_at = np.sort(np.asarray(bins_of_thresholds(edges, thresholds), dtype=np.intp))
    return np.searchsorted(thresholds_at, first_bins, side="right")


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
    pieces: Any,
    rng: np.random.Generator,
    draws: int,
) -> tuple[FloatArray, FloatArray]:
    """Full-label histograms of each draw: the labelled rows as they are, and each bin's
    remainder split binomially at a share drawn as below.

    * Group g's share: Beta with mean (p_g + a_g) / (n_g + 2 a_g) and concentration
      n_g - 2 (at least 1), so that its variance is the unbiased estimate of the
      labelled share's sampling variance, m(1 - m) / (n_g - 1). a_g = n_g / (2 n_j):
      each piece j between two thresholds holds one pseudo-row (half a positive, half
      a negative) shared among its groups by their labelled rows n_g. Summed over a
      piece whose groups hold few positives, the remainder's positives are then about
      the Jeffreys posterior of their Poisson count (a piece with no labelled positive
      still draws some), where half a row per group would add many.
    * Inside the group, bin b's share is the group's tilted by the bin's own labelled
      share (drawn from Beta(p_b + m_g, q_b + 1 - m_g): one pseudo-row at the group's
      share m_g), scaled so that the group's remainder expects the group's share. The
      completion spreads a group's remainder evenly over its bins; the draws carry the
      bins' own shares, which the curve metrics (AUC-ROC, KS...) see.
    """
    sizes = np.diff(np.append(starts, v.shape[0]))
    share, rows = score_shares(coarsen(positives, starts), coarsen(positives + negatives, starts))
    hits = np.clip(share * rows, 0.0, rows)
    prior = 0.5 * rows / np.bincount(pieces, weights=rows)[pieces]
    mean = (hits + prior) / (rows + 2.0 * prior)
    spread = np.maximum(rows - 2.0, 1.0)
    drawn = rng.beta(mean * spread, (1.0 - mean) * spread, size=(draws, rows.size))
    m = np.repeat(mean, sizes)
    tilt = np.where(v > 0.0, rng.beta(positives + m, negatives + 1.0 - m, (draws, m.size)), 0.0)
    top = np.repeat(np.maximum.reduceat(tilt, starts, axis=1), sizes, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):  # a group without remainder: nan
        tilt = np.where(top > 0.0, tilt / top, 1.0)  # tilts all 0 (underflow): spread evenly
        mass = np.repeat(coarsen_rows(tilt * v, starts) / coarsen(v, starts), sizes, axis=1)
        tilt = np.where(mass > 0.0, tilt / mass, 1.0)
    per_bin = np.repeat(drawn, sizes, axis=1) * tilt
    v_rows = np.rint(v).astype(np.int64)
    rest = rng.binomial(v_rows, np.clip(per_bin, 0.0, 1.0)).astype(np.float64)
    return positives + rest, negatives + (v_rows - rest)
