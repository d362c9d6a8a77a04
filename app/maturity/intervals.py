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
from app.maturity.metrics import NOT_COMPLETABLE, histogram_metrics
from app.metrics._validation import check_probability
from app.metrics.area_intervals import calibrated_auc_pr_interval, ks_interval

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
        samples = _class_draws(rows.positives, rows.negatives, v, rng, draws)
    else:
        samples = _score_draws(rows.positives, rows.negatives, v, starts, rng, draws)
    columns: dict[str, list[float | None]] = {}
    for h1, h0 in samples:
        drawn = histogram_metrics(
            h1, h0, edges=edges, thresholds=thresholds, pi0=pi0, cost_ratio=cost_ratio
        )
        for key, value in drawn.items():
            columns.setdefault(key, []).append(value)
    out = {key: _quantiles(values, draws, level) for key, values in columns.items()}
    out.update(dict.fromkeys(NOT_COMPLETABLE))
    out["prior"] = (completion.prior.lower, completion.prior.upper)
    if completion.assumption == "class":
        out.update(_labelled_areas(rows.positives, rows.negatives, pi0, level))
    return out


def _quantiles(values: list[float | None], draws: int, level: float) -> Interval | None:
    defined = np.array([x for x in values if x is not None], dtype=np.float64)
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
) -> list[tuple[FloatArray, FloatArray]]:
    n_pos, n_neg, total = float(positives.sum()), float(negatives.sum()), float(v.sum())
    f1, f0 = positives / n_pos, negatives / n_neg
    pos = rng.multinomial(int(np.rint(n_pos)), f1, size=draws).astype(np.float64)
    neg = rng.multinomial(int(np.rint(n_neg)), f0, size=draws).astype(np.float64)
    if total == 0.0:
        return [(pos[i], neg[i]) for i in range(draws)]
    classes = GroupedClasses.from_bins(positives, negatives)
    share = class_share(classes, classes.grouped(v)).value
    whole = int(np.rint(total))
    k = rng.binomial(whole, share, size=draws)
    rest = rng.multinomial(k, f1) + rng.multinomial(whole - k, f0)
    out = []
    for i in range(draws):
        try:
            drawn = GroupedClasses.from_bins(pos[i], neg[i])
        except InvalidInput:  # the draw's classes cannot be told apart: its metrics undefined
            continue
        drawn_share = class_share(drawn, drawn.grouped(rest[i].astype(np.float64))).value
        out.append(class_histograms(pos[i], neg[i], drawn_share, total))
    return out


def _score_draws(
    positives: FloatArray,
    negatives: FloatArray,
    v: FloatArray,
    starts: Any,
    rng: np.random.Generator,
    draws: int,
) -> list[tuple[FloatArray, FloatArray]]:
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
    h1 = positives + per_bin * v
    h0 = negatives + (1.0 - per_bin) * v
    return [(h1[i], h0[i]) for i in range(draws)]
