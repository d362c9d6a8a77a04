"""Credible and bootstrap intervals (docs/cost.md, "Intervals").

Labeling metrics: credible intervals
------------------------------------
Brodersen, Ong, Stephan, Buhmann (2010), "The balanced accuracy and its
posterior distribution": with uniform priors and the observed counts,

    alpha (FPR)        ~ Beta(FP + 1, TN + 1)
    1 − beta (TPR)     ~ Beta(TP + 1, FN + 1)      independently.

Every labeling metric is M(pi, alpha, beta), so drawing S posterior samples of
(alpha, beta) and evaluating the registry function on
``ConfusionCounts.from_rates(pi, alpha, beta)`` (arrays of S) gives S samples
of the metric; the interval is their equal-tailed quantile range.

The prior pi is **fixed** by default: at ``pi0`` when given (calibrated
metrics, prior-invariant by construction) and otherwise at the data's prior
P/n — the interval then answers "what would this metric read on this class
mix, given the classifier's uncertain error rates", which is the quantity
monitoring compares across windows. ``sample_prior=True`` also draws
pi ~ Beta(P + 1, N + 1), for the metric of the population the window was drawn
from. Prior-invariant metrics (recall, specificity, balanced accuracy, ...)
are unaffected by the choice.

OPS intervals: the outperformance score is a distribution function of the
metric value at a fixed prior, hence monotone, so the OPS interval is the OPS
of the metric interval's ends (:func:`ops_interval`).

Curve areas: bootstrap intervals
--------------------------------
From per-class histograms (the form windows are stored in), B resamples of the
bin counts — multinomial within each class (class totals fixed: the default,
matching the fixed prior above) or Poisson per bin (totals vary too) — form a
(B, K) array of cumulative counts, and the batch area functions of
:mod:`app.metrics.curves` reduce it in one pass. Percentile intervals.

Conventions
-----------
Randomness is always injected (``rng``). An interval is ``(nan, nan)`` —
undefined, ``None`` in public mappings — when more than ``1 − level`` of the
samples are undefined (e.g. the metric is undefined for the data).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np

from app.errors import InvalidInput
from app.metrics._validation import check_count, check_probability
from app.metrics.confusion import ConfusionCounts
from app.metrics.curves import (
    average_precision_from_counts,
    gain_auc_from_counts,
    gini_from_counts,
    ks_from_counts,
    lift_auc_from_counts,
    nauc_lift_from_counts,
    pr_auc_trapezoid_from_counts,
    roc_auc_from_counts,
)
from app.metrics.labeling import LABELING_METRICS, Array

__all__ = [
    "CALIBRATED_PREFIX",
    "CURVE_AREAS",
    "DEFAULT_N_RESAMPLES",
    "DEFAULT_N_SAMPLES",
    "RatePosterior",
    "bootstrap_interval",
    "bootstrap_intervals",
    "credible_interval",
    "credible_intervals",
    "ops_interval",
    "sample_rate_posterior",
]

Interval = tuple[float, float]
ResampleMethod = Literal["multinomial", "poisson"]

DEFAULT_N_SAMPLES = 4_000
"""Posterior draws per credible interval: the 2.5% quantile's Monte-Carlo
standard error is then about 0.25 posterior standard deviations / sqrt(40)."""

DEFAULT_N_RESAMPLES = 500
"""Bootstrap resamples per call. Drawing dominates the cost, about B·K random
counts per class for K non-empty bins (bench/bench_uncertainty.py)."""

CALIBRATED_PREFIX = "calibrated_"
"""``calibrated_<area>``: the area of the curves at the reference prior pi0."""

CURVE_AREAS: Mapping[str, Callable[[Any, Any], Array]] = {
    "auc_roc": roc_auc_from_counts,
    "auc_pr": average_precision_from_counts,
    "auc_pr_trapezoid": pr_auc_trapezoid_from_counts,
    "auc_lift": lift_auc_from_counts,
    "nauc_lift": nauc_lift_from_counts,
    "auc_gain": gain_auc_from_counts,
    "ks": ks_from_counts,
    "gini": gini_from_counts,
}
"""Curve metrics with a bootstrap interval, by their names in ``evaluate``; each
also as ``calibrated_<name>`` (at pi0)."""

_MAX_CHUNK_ELEMENTS = 2_000_000  # resamples are reduced in chunks of (b, K) this large
_NAN_INTERVAL: Interval = (math.nan, math.nan)


# ---------------------------------------------------------------- validation


def _check_level(level: float) -> float:
    return check_probability("level", level)


def _check_size(name: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InvalidInput(name, f"is {value!r}, must be an integer >= {minimum}")
    return int(value)


def _check_rng(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise InvalidInput(
            "rng", "must be a numpy.random.Generator (e.g. np.random.default_rng(seed))"
        )
    return rng


def _check_counts(counts: Any) -> ConfusionCounts:
    if not isinstance(counts, ConfusionCounts):
        raise InvalidInput("counts", "must be a ConfusionCounts")
    for name in ("tp", "fp", "fn", "tn"):
        check_count(name, getattr(counts, name))
    return counts


def _interval(samples: Array, level: float) -> Interval:
    """Equal-tailed interval of the defined samples; (nan, nan) if too many are undefined."""
    defined = samples[np.isfinite(samples)]
    if defined.size == 0 or defined.size < level * samples.size:
        return _NAN_INTERVAL
    low, high = np.quantile(defined, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(low), float(high)


# ---------------------------------------------------------------- credible intervals


@dataclass(frozen=True, slots=True)
class RatePosterior:
    """S joint posterior draws of the rates of one confusion matrix.

    Attributes
    ----------
    prior : ndarray of float64, shape (S,)
        Class prior of draw s (constant unless the prior is sampled).
    alpha : ndarray of float64, shape (S,)
        FPR of draw s, from Beta(FP + 1, TN + 1).
    beta : ndarray of float64, shape (S,)
        FNR of draw s; 1 − beta is from Beta(TP + 1, FN + 1).
    """

    prior: Array
    alpha: Array
    beta: Array

    def metric_samples(self, metric: str) -> Array:
        """Samples of a registered labeling metric, element s from draw s."""
        m = LABELING_METRICS.get(metric)
        if m is None:
            raise InvalidInput(
                "metric",
                f"unknown labeling metric {metric!r}; one of {', '.join(LABELING_METRICS)}",
            )
        # from_rates is plain arithmetic, so it broadcasts over the arrays of draws
        c = ConfusionCounts.from_rates(
            cast(float, self.prior), cast(float, self.alpha), cast(float, self.beta)
        )
        return np.asarray(m.func(c.tp, c.fp, c.fn, c.tn), dtype=np.float64)


def sample_rate_posterior(
    counts: ConfusionCounts,
    *,
    rng: np.random.Generator,
    n_samples: int = DEFAULT_N_SAMPLES,
    pi0: float | None = None,
    sample_prior: bool = False,
) -> RatePosterior:
    """Draw the posterior of (pi, alpha, beta) given ``counts`` (Brodersen et al. 2010).

    Parameters
    ----------
    counts : ConfusionCounts
        The observed matrix (non-negative counts).
    rng : numpy.random.Generator
        Source of randomness; the same seed gives the same draws.
    n_samples : int
        Number of draws S (>= 100).
    pi0 : float or None
        Fix the prior at this reference prior (calibrated metrics).
    sample_prior : bool
        Without ``pi0``: draw pi ~ Beta(P + 1, N + 1) instead of fixing it at
        the data's prior P/n.
    """
    c = _check_counts(counts)
    gen = _check_rng(rng)
    s = _check_size("n_samples", n_samples, 100)
    tpr = gen.beta(c.tp + 1.0, c.fn + 1.0, size=s)
    alpha = gen.beta(c.fp + 1.0, c.tn + 1.0, size=s)
    if pi0 is not None:
        prior = np.full(s, check_probability("pi0", pi0))
    elif sample_prior:
        prior = gen.beta(c.positives + 1.0, c.negatives + 1.0, size=s)
    else:
        prior = np.full(s, c.prior)  # nan for an empty matrix: every metric undefined
    return RatePosterior(prior=prior, alpha=alpha, beta=1.0 - tpr)


def credible_intervals(
    counts: ConfusionCounts,
    metrics: Iterable[str],
    *,
    rng: np.random.Generator,
    pi0: float | None = None,
    level: float = 0.95,
    n_samples: int = DEFAULT_N_SAMPLES,
    sample_prior: bool = False,
) -> dict[str, Interval]:
    """Credible intervals of several labeling metrics from one set of posterior draws.

    Parameters
    ----------
    counts : ConfusionCounts
        The observed matrix.
    metrics : iterable of str
        Names in ``app.metrics.labeling.LABELING_METRICS``.
    rng : numpy.random.Generator
        Injected randomness (seed it for reproducible intervals).
    pi0 : float or None
        Evaluate every metric at this reference prior (the interval of
        ``calibrated_<name>``); None: at the data's prior (raw metric).
    level : float
        Posterior mass inside the interval, in (0, 1).
    n_samples : int
        Posterior draws (>= 100).
    sample_prior : bool
        Raw metrics only: also draw the prior (module docstring).

    Returns
    -------
    dict of str to (low, high)
        Equal-tailed intervals; ``(nan, nan)`` where the metric is undefined.

    Examples
    --------
    >>> ci = credible_intervals(ConfusionCounts(40, 10, 10, 940), ["recall", "f1"],
    ...                         rng=np.random.default_rng(0))
    >>> low, high = ci["recall"]
    >>> 0.65 < low < 0.8 < high < 0.9
    True
    """
    lvl = _check_level(level)
    posterior = sample_rate_posterior(
        counts, rng=rng, n_samples=n_samples, pi0=pi0, sample_prior=sample_prior
    )
    return {name: _interval(posterior.metric_samples(name), lvl) for name in metrics}


def credible_interval(
    counts: ConfusionCounts,
    metric: str,
    *,
    rng: np.random.Generator,
    pi0: float | None = None,
    level: float = 0.95,
    n_samples: int = DEFAULT_N_SAMPLES,
    sample_prior: bool = False,
) -> Interval:
    """Credible interval of one labeling metric; see :func:`credible_intervals`.

    Examples
    --------
    >>> low, high = credible_interval(ConfusionCounts(40, 10, 10, 940), "f1",
    ...                               pi0=0.5, rng=np.random.default_rng(0))
    >>> 0.75 < low < high < 0.95
    True
    """
    return credible_intervals(
        counts,
        [metric],
        rng=rng,
        pi0=pi0,
        level=level,
        n_samples=n_samples,
        sample_prior=sample_prior,
    )[metric]


def ops_interval(
    metric: str, interval: Interval, prior: float, *, at: float | None = None
) -> Interval:
    """The outperformance-score interval matching a metric interval at a fixed prior.

    OPS_M(mu; pi) is a distribution function of mu at fixed pi, so it maps an
    interval's ends to the interval's OPS ends (reversed for metrics where
    lower is better). Use the prior the metric interval was computed at: the
    data's prior for raw metrics, ``pi0`` for calibrated ones.

    Parameters
    ----------
    metric : str
        Any name :func:`app.metrics.ops.outperformance_score` accepts.
    interval : (low, high)
        The metric's interval; ``(nan, nan)`` gives ``(nan, nan)``.
    prior : float
        Class prior in (0, 1).
    at : float or None
        The point of a point metric (see ``outperformance_score``).
    """
    from app.metrics.ops import outperformance_score  # the DBT reference loads on demand

    low, high = (float(x) for x in interval)
    if math.isnan(low) or math.isnan(high):
        return _NAN_INTERVAL
    ends = (
        outperformance_score(metric, low, prior, at=at),
        outperformance_score(metric, high, prior, at=at),
    )
    return min(ends), max(ends)


# ---------------------------------------------------------------- bootstrap intervals


def _check_histograms(positives: Any, negatives: Any) -> tuple[Array, Array]:
    pos = check_count("positives", positives)
    neg = check_count("negatives", negatives)
    if pos.ndim != 1:
        raise InvalidInput("positives", "must be a one-dimensional array of bin counts")
    if neg.shape != pos.shape:
        raise InvalidInput("negatives", f"has shape {neg.shape} but positives has {pos.shape}")
    return pos, neg


def _resample(hist: Array, size: int, method: ResampleMethod, gen: np.random.Generator) -> Array:
    """(size, K) resampled bin counts of one class."""
    if method == "poisson":
        return gen.poisson(hist, size=(size, hist.size)).astype(np.float64)
    total = float(hist.sum())
    if total == 0.0:
        return np.zeros((size, hist.size))
    return gen.multinomial(round(total), hist / total, size=size).astype(np.float64)


def _areas(name: str, tps: Array, fps: Array, pi0: float) -> Array:
    """Area ``name`` of each row of cumulative counts; at pi0 for ``calibrated_`` names."""
    area = CURVE_AREAS[name.removeprefix(CALIBRATED_PREFIX)]
    if not name.startswith(CALIBRATED_PREFIX):
        return np.asarray(area(tps, fps), dtype=np.float64)
    p, n = tps[:, -1:], fps[:, -1:]
    defined = (p[:, 0] > 0.0) & (n[:, 0] > 0.0)  # rates need both classes
    at_prior_tps = pi0 * tps / np.where(p > 0.0, p, 1.0)
    at_prior_fps = (1.0 - pi0) * fps / np.where(n > 0.0, n, 1.0)
    return np.where(defined, area(at_prior_tps, at_prior_fps), np.nan)


def bootstrap_intervals(
    positives: Any,
    negatives: Any,
    areas: Iterable[str],
    *,
    rng: np.random.Generator,
    pi0: float | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    method: ResampleMethod = "multinomial",
) -> dict[str, Interval]:
    """Bootstrap intervals of curve areas from per-class score histograms.

    Parameters
    ----------
    positives, negatives : array_like of shape (J,)
        ``positives[j]`` / ``negatives[j]``: number of actual positives /
        negatives with score in bin j, bins in increasing score order (as
        ``app.metrics.binning.histogram_counts`` returns them). Integer counts
        for ``method="multinomial"``.
    areas : iterable of str
        Names in :data:`CURVE_AREAS` (``auc_roc``, ``auc_pr``, ...), or such a
        name prefixed ``calibrated_`` (``calibrated_auc_pr``): the area of each
        resampled curve at the reference prior ``pi0``. All share the same
        resamples.
    rng : numpy.random.Generator
        Injected randomness.
    pi0 : float or None
        Reference prior of the ``calibrated_`` areas (required by them).
    level : float
        Coverage of the percentile interval, in (0, 1).
    n_resamples : int
        Number B of resamples (>= 100).
    method : {"multinomial", "poisson"}
        ``multinomial``: each class's total is kept and its examples
        redistributed over the bins with the observed frequencies (fixed
        prior). ``poisson``: every bin count is redrawn ~ Poisson(count),
        so class totals vary as in an ordinary bootstrap of the examples.

    Returns
    -------
    dict of str to (low, high)
        Percentile intervals; ``(nan, nan)`` where the area is undefined
        (e.g. no positives).

    Examples
    --------
    >>> pos, neg = [1, 2, 5, 12, 30], [40, 25, 10, 4, 1]
    >>> low, high = bootstrap_interval(pos, neg, "auc_roc", rng=np.random.default_rng(0))
    >>> 0.85 < low < 0.946 < high < 0.99  # point estimate 0.946
    True
    """
    pos, neg = _check_histograms(positives, negatives)
    names = list(areas)
    for name in names:
        if name.removeprefix(CALIBRATED_PREFIX) not in CURVE_AREAS:
            raise InvalidInput(
                "area", f"unknown area {name!r}; one of {', '.join(CURVE_AREAS)}, or calibrated_*"
            )
    calibrated = [name for name in names if name.startswith(CALIBRATED_PREFIX)]
    if calibrated and pi0 is None:
        raise InvalidInput("pi0", f"is needed for {', '.join(calibrated)}")
    gen = _check_rng(rng)
    lvl = _check_level(level)
    b = _check_size("n_resamples", n_resamples, 100)
    if method not in ("multinomial", "poisson"):
        raise InvalidInput("method", f"is {method!r}, must be 'multinomial' or 'poisson'")
    if method == "multinomial" and not (
        np.all(pos == np.round(pos)) and np.all(neg == np.round(neg))
    ):
        raise InvalidInput("method", "multinomial resampling needs integer bin counts")
    prior = 0.5 if pi0 is None else check_probability("pi0", pi0)

    keep = (pos + neg) > 0.0  # empty bins stay empty and change no area
    if not keep.any():
        return dict.fromkeys(names, _NAN_INTERVAL)
    pos_desc, neg_desc = pos[keep][::-1], neg[keep][::-1]  # decreasing thresholds
    k = pos_desc.size
    samples: dict[str, list[Array]] = {name: [] for name in names}
    chunk = max(1, _MAX_CHUNK_ELEMENTS // k)
    for start in range(0, b, chunk):
        size = min(chunk, b - start)
        tps = np.cumsum(_resample(pos_desc, size, method, gen), axis=1)
        fps = np.cumsum(_resample(neg_desc, size, method, gen), axis=1)
        for name in names:
            samples[name].append(_areas(name, tps, fps, prior))
    return {name: _interval(np.concatenate(samples[name]), lvl) for name in names}


def bootstrap_interval(
    positives: Any,
    negatives: Any,
    area: str,
    *,
    rng: np.random.Generator,
    pi0: float | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    method: ResampleMethod = "multinomial",
) -> Interval:
    """Bootstrap interval of one curve area (or ``calibrated_<area>``); see
    :func:`bootstrap_intervals`."""
    return bootstrap_intervals(
        positives,
        negatives,
        [area],
        rng=rng,
        pi0=pi0,
        level=level,
        n_resamples=n_resamples,
        method=method,
    )[area]
