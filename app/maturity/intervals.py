"""Intervals of a completed window's metrics: a parametric bootstrap (docs/maturity.md).

Each draw builds a window the completion's model could have produced, completes
it as :func:`app.maturity.complete` does and computes its metrics; an
interval is the equal-tailed quantiles of the draws.

* ``class``: the labelled histograms are redrawn (multinomial per class, at
  the labelled shapes f1 = p / P_L, f0 = q / Q_L), and so is the remainder
  (its positives binomial at the fitted share pi_v, each class's rows
  multinomial at its shape); the share is estimated again from the drawn
  labelled rows and remainder. The draws hold the labelled sample's error in
  f1 and f0 and the remainder's in pi_v: at completeness 1 they are the
  labelled metrics' bootstrap.
* ``score``: the labelled rows are facts of the window, the remainder's split
  is not. Per group, the share of positives is drawn from its Jeffreys
  posterior Beta(p_g + 1/2, q_g + 1/2) (a group at 0 or 1 still varies) and
  the group's remainder split binomially at it.

Under ``class`` the completed calibrated AUC-PR and KS are the labelled ones,
so their intervals are the closed-form ones of
:mod:`app.metrics.area_intervals` on the labelled histograms (their
bootstrap does not cover); the prior's interval is the completion's own.
"""

from __future__ import annotations

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
    remainder,
    score_shares,
)
from app.maturity.metrics import NOT_COMPLETABLE
from app.metrics._validation import check_probability
from app.metrics.area_intervals import calibrated_auc_pr_interval, ks_interval
from app.metrics.confusion import ConfusionCounts
from app.metrics.cost import weighted_accuracy_from_counts
from app.metrics.evaluate import CURVE_METRICS, OPS_METRICS, threshold_suffix
from app.metrics.labeling import LABELING_METRICS, PRIOR_DEPENDENT
from app.metrics.uncertainty import ops_interval, row_areas

Interval = tuple[float, float]

JEFFREYS = 0.5
"""Half counts of the Beta posterior of a group's share under ``score``."""


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
    level = check_probability("level", level)
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 20:
        raise InvalidInput("draws", f"is {draws!r}, must be an integer >= 20")
    starts = np.asarray(completion.group_starts, dtype=np.intp)
    v = remainder(rows.unlabelled, rows.labelled, starts)
    if v is None:
        raise InvalidInput("completion", "does not belong to these histograms")
    if completion.assumption == "class":
        h1, h0 = _class_draws(rows.positives, rows.negatives, v, rng, draws)
    else:
        h1, h0 = _score_draws(rows.positives, rows.negatives, v, starts, rng, draws)
    drawn = _draw_metrics(h1, h0, edges, thresholds, pi0, cost_ratio)
    out: dict[str, Interval | None] = {
        key: _quantiles(values, draws, level) for key, values in drawn.items()
    }
    prior = (completion.prior.lower, completion.prior.upper)
    out.update(_ops_intervals(out, prior))
    out.update(dict.fromkeys(NOT_COMPLETABLE))
    out["prior"] = prior
    if completion.assumption == "class":
        out.update(_labelled_areas(rows.positives, rows.negatives, pi0, level))
    return out


def _draw_metrics(
    h1: FloatArray,
    h0: FloatArray,
    edges: Any,
    thresholds: Sequence[float],
    pi0: float | None,
    cost_ratio: float | None,
) -> dict[str, FloatArray]:
    """Every metric of each drawn window (rows of ``h1``, ``h0``), nan where undefined:
    the registry's functions, each evaluated once on all draws."""
    tps = np.cumsum(h1[:, ::-1], axis=1)
    fps = np.cumsum(h0[:, ::-1], axis=1)
    n_pos, n_neg = tps[:, -1], fps[:, -1]
    areas = [*CURVE_METRICS, *(("calibrated_auc_pr",) if pi0 is not None else ())]
    out = row_areas(areas, tps, fps, 0.5 if pi0 is None else pi0)
    out["prior"] = n_pos / (n_pos + n_neg)
    first_bins = np.searchsorted(np.asarray(edges, dtype=np.float64), thresholds)
    for i, (threshold, first) in enumerate(zip(thresholds, first_bins, strict=True)):
        suffix = "" if i == 0 else threshold_suffix(threshold)
        tp, fp = h1[:, first:].sum(axis=1), h0[:, first:].sum(axis=1)
        cells = (tp, fp, n_pos - tp, n_neg - fp)
        with np.errstate(invalid="ignore", divide="ignore"):
            for name, metric in LABELING_METRICS.items():
                out[name + suffix] = metric.func(*cells)
            if pi0 is not None:
                ref = ConfusionCounts.from_rates(pi0, fp / n_neg, cells[2] / n_pos)
                for name in PRIOR_DEPENDENT:
                    out[f"calibrated_{name}{suffix}"] = LABELING_METRICS[name].func(
                        ref.tp, ref.fp, ref.fn, ref.tn
                    )
            if cost_ratio is not None:
                out["weighted_accuracy" + suffix] = weighted_accuracy_from_counts(
                    *cells, cost_ratio
                )
    return out


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


def _quantiles(values: FloatArray, draws: int, level: float) -> Interval | None:
    """Equal-tailed quantiles of the defined draws; ``None`` when more than 1 - level of
    the ``draws`` (skipped ones included) are undefined."""
    defined = values[np.isfinite(values)]
    if draws - defined.size > (1.0 - level) * draws:
        return None
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(defined, [tail, 1.0 - tail])
    return float(low), float(high)


def _labelled_areas(
    positives: FloatArray, negatives: FloatArray, pi0: float | None, level: float
) -> dict[str, Interval | None]:
    def of(interval: tuple[float, float, str | None]) -> Interval | None:
        low, high, reason = interval
        return None if reason is not None else (low, high)

    out = {"ks": of(ks_interval(positives, negatives, level))}
    if pi0 is not None:
        out["calibrated_auc_pr"] = of(calibrated_auc_pr_interval(positives, negatives, pi0, level))
    return out


def _class_draws(
    positives: FloatArray,
    negatives: FloatArray,
    v: FloatArray,
    rng: np.random.Generator,
    draws: int,
) -> tuple[FloatArray, FloatArray]:
    n_pos, n_neg, total = float(positives.sum()), float(negatives.sum()), float(v.sum())
    f1, f0 = positives / n_pos, negatives / n_neg
    pos = rng.multinomial(int(np.rint(n_pos)), f1, size=draws).astype(np.float64)
    neg = rng.multinomial(int(np.rint(n_neg)), f0, size=draws).astype(np.float64)
    if total == 0.0:
        return pos, neg
    classes = GroupedClasses.from_bins(positives, negatives)
    share = class_share(classes, classes.grouped(v)).value
    whole = int(np.rint(total))
    k = rng.binomial(whole, share, size=draws)
    rest = rng.multinomial(k, f1) + rng.multinomial(whole - k, f0)
    h1, h0 = [], []
    for i in range(draws):
        try:
            drawn = GroupedClasses.from_bins(pos[i], neg[i])
        except InvalidInput:  # the draw's classes cannot be told apart: its metrics undefined
            continue
        drawn_share = class_share(drawn, drawn.grouped(rest[i].astype(np.float64))).value
        one, zero = class_histograms(pos[i], neg[i], drawn_share, total)
        h1.append(one)
        h0.append(zero)
    return np.array(h1).reshape(-1, v.shape[0]), np.array(h0).reshape(-1, v.shape[0])


def _score_draws(
    positives: FloatArray,
    negatives: FloatArray,
    v: FloatArray,
    starts: Any,
    rng: np.random.Generator,
    draws: int,
) -> tuple[FloatArray, FloatArray]:
    share, n_share = score_shares(
        coarsen(positives, starts), coarsen(positives + negatives, starts)
    )
    hits = share * n_share
    drawn_share = rng.beta(hits + JEFFREYS, n_share - hits + JEFFREYS, size=(draws, share.size))
    v_g = coarsen(v, starts)
    whole = np.rint(v_g).astype(np.int64)
    split = rng.binomial(whole, drawn_share) / np.maximum(whole, 1)
    split = np.where(whole > 0, split, drawn_share)
    per_bin = np.repeat(split, np.diff(np.append(starts, v.shape[0])), axis=1)
    return positives + per_bin * v, negatives + (1.0 - per_bin) * v
