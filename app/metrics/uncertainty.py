"""Credible and bootstrap intervals (docs/cost.md, "Intervals").

Labeling metrics: credible intervals
------------------------------------
Brodersen, Ong, Stephan, Buhmann (2010), "The balanced accuracy and its
posterior distribution": the rates have independent Beta posteriors given the
counts,

    alpha (FPR)        ~ Beta(FP + a, TN + a)
    1 − beta (TPR)     ~ Beta(TP + a, FN + a)

with ``a = 1`` under Brodersen et al.'s uniform prior. Every
labeling metric is M(pi, alpha, beta), so drawing S posterior samples and
evaluating the registry function on ``ConfusionCounts.from_rates(pi, alpha,
beta)`` (arrays of S) gives S samples of the metric.

The interval rule (docs/intervals.md) is chosen for its frequentist coverage,
which the uniform posterior's equal-tailed interval does not have near a
boundary (coverage 0 when n·FPR < 0.025, 0.87 at n·FPR ≈ 0.6):

* the draws use the Jeffreys prior, ``a = 1/2`` (:data:`JEFFREYS`), whose
  equal-tailed interval is the one Brown, Cai and DasGupta (2001) recommend
  for a binomial proportion;
* with their boundary modification: when a rate's count is at most one away
  from the boundary (FP <= 1, TN <= 1, TP <= 1 or FN <= 1), the interval is
  the hull of the intervals with that rate drawn as above, set to its
  boundary value (FPR = 0, ...), and drawn from the uniform-prior posterior
  Beta(x + 1, n − x + 1) (whose tail away from the boundary is Clopper and
  Pearson's there). So an FPR with FP = 0 out of n has the interval
  [0, 1 − 0.025^(1/(n+1))], and a precision with FP <= 1 upper bound 1;
* the prior: at ``pi0`` when given (calibrated metrics, prior-invariant by
  construction); otherwise the window's prior is itself an estimate, and is
  drawn jointly, pi ~ Beta(P + a, N + a), with the same boundary rule. The
  interval then covers the metric of the population the window was drawn
  from. Prior-invariant metrics (recall, specificity, balanced accuracy, ...)
  do not depend on it.

OPS intervals: the outperformance score is a distribution function of the
metric value at a fixed prior, hence monotone in the value, so the OPS
interval is the OPS of the metric interval's ends (:func:`ops_interval`); for
an estimated prior, the hull of those ends over the prior's own interval.

Curve areas: bootstrap intervals
--------------------------------
From per-class histograms (the form windows are stored in), B resamples of the
bin counts — multinomial within each class (class totals fixed) or Poisson per
bin (totals vary too, as in the binomial sampling of a real window) — form a
(B, K) array of cumulative counts, and the batch area functions of
:mod:`app.metrics.curves` reduce it in one pass. Intervals are bias-corrected
and accelerated (BCa, Efron 1987), the acceleration from a jackknife over the
examples (one leave-one-out value per non-empty bin). docs/intervals.md lists
the areas and regimes where they cover and where the worker stores none.
Calibrated AUC-PR and KS are not resampled (their bootstrap does not cover):
:func:`bootstrap_intervals` returns the closed-form intervals of
:mod:`app.metrics.area_intervals` for them, as the worker stores.

Conventions
-----------
Randomness is always injected (``rng``). An interval is ``(nan, nan)`` —
undefined, ``None`` in public mappings — when more than ``1 − level`` of the
samples are undefined (e.g. the metric is undefined for the data).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np

from app.errors import InvalidInput
from app.metrics.area_intervals import calibrated_auc_pr_interval, ks_interval
from app.metrics.areas import AREA_KERNELS
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
from app.metrics.labeling import (
    CALIBRATED_PREFIX,
    LABELING_METRICS,
    Array,
    LabelingMetric,
    MetricFunc,
)
from app.metrics.validation import check_class_histograms, check_count, check_probability

__all__ = [
    "CURVE_AREAS",
    "DEFAULT_N_RESAMPLES",
    "DEFAULT_N_SAMPLES",
    "INTERVAL_LEVEL",
    "JEFFREYS",
    "RatePosterior",
    "bootstrap_interval",
    "bootstrap_intervals",
    "credible_interval",
    "credible_intervals",
    "ops_interval",
    "rate_interval",
    "row_areas",
    "sample_rate_posterior",
]

Interval = tuple[float, float]
ResampleMethod = Literal["multinomial", "poisson"]

INTERVAL_LEVEL = 0.95
"""Level of every interval priorwatch stores and shows (the metrics' and the
label-free estimate's)."""

JEFFREYS = 0.5
"""Prior count ``a`` of the Beta(a, a) prior of the rates behind every credible interval."""

DEFAULT_N_SAMPLES = 4_000
"""Posterior draws per credible interval: the 2.5% quantile's Monte-Carlo
standard error is then about 0.25 posterior standard deviations / sqrt(40)."""

DEFAULT_N_RESAMPLES = 500
"""Bootstrap resamples per call. Drawing dominates the cost, about B·K random
counts per class for K non-empty bins (bench/bench_uncertainty.py)."""

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
        Class prior of draw s (constant when fixed at pi0).
    alpha : ndarray of float64, shape (S,)
        FPR of draw s, from Beta(FP + a, TN + a).
    beta : ndarray of float64, shape (S,)
        FNR of draw s; 1 − beta is from Beta(TP + a, FN + a).
    boundaries : tuple of (str, ndarray)
        Other draws of a rate whose count is within one of a boundary (the
        rate at its boundary value, and its uniform-prior posterior), e.g.
        ``("alpha", zeros)`` when FP <= 1: the boundary rule of :meth:`interval`.
    """

    prior: Array
    alpha: Array
    beta: Array
    boundaries: tuple[tuple[str, Array], ...] = ()

    def metric_samples(self, metric: str) -> Array:
        """Samples of a registered labeling metric, element s from draw s."""
        func = _registered(metric).func
        return _metric_samples([func], _counts(self.prior, self.alpha, self.beta))[0]

    def interval(self, metric: str, level: float = 0.95) -> Interval:
        """Equal-tailed ``level`` interval of the metric, widened at the boundaries.

        The hull of the equal-tailed intervals of the draws and of the draws
        with a rate replaced by each of its :attr:`boundaries` alternatives
        (Brown, Cai and DasGupta's modification, for any metric).
        """
        return self.intervals([metric], level)[metric]

    def intervals(self, metrics: Iterable[str], level: float = 0.95) -> dict[str, Interval]:
        """:meth:`interval` of several metrics, evaluated together.

        Each set of draws becomes one confusion matrix of arrays, shared by the
        metrics, and the quantiles of every metric come from one call: the
        same intervals as one :meth:`interval` call per metric.
        """
        lvl = _check_level(level)
        names = list(dict.fromkeys(metrics))
        funcs = [_registered(name).func for name in names]
        draws = {"prior": self.prior, "alpha": self.alpha, "beta": self.beta}
        hulls = _equal_tailed(_metric_samples(funcs, _counts(**draws)), lvl)
        for rate, other in self.boundaries:
            alternative = _equal_tailed(
                _metric_samples(funcs, _counts(**{**draws, rate: other})), lvl
            )
            for i, ((low, high), (b_low, b_high)) in enumerate(
                zip(hulls, alternative, strict=True)
            ):
                if not (math.isnan(low) or math.isnan(b_low)):
                    hulls[i] = min(low, b_low), max(high, b_high)
        return dict(zip(names, hulls, strict=True))


def _registered(metric: str) -> LabelingMetric:
    m = LABELING_METRICS.get(metric)
    if m is None:
        raise InvalidInput(
            "metric",
            f"unknown labeling metric {metric!r}; one of {', '.join(LABELING_METRICS)}",
        )
    return m


def _counts(prior: Array, alpha: Array, beta: Array) -> ConfusionCounts:
    """The matrices of S draws as one ConfusionCounts of arrays (from_rates broadcasts)."""
    return ConfusionCounts.from_rates(cast(float, prior), cast(float, alpha), cast(float, beta))


def _metric_samples(funcs: list[MetricFunc], c: ConfusionCounts) -> list[Array]:
    """Each metric function on the matrices of the draws, shape (S,) each."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return [np.asarray(func(c.tp, c.fp, c.fn, c.tn), dtype=np.float64) for func in funcs]


def _equal_tailed(samples: list[Array], level: float) -> list[Interval]:
    """:func:`_interval` of each sample array; the fully defined ones from one quantile call."""
    defined = [bool(np.isfinite(x).all()) for x in samples]
    out = [
        _NAN_INTERVAL if full else _interval(x, level)
        for x, full in zip(samples, defined, strict=True)
    ]
    whole = [i for i, full in enumerate(defined) if full]
    if whole:
        tails = row_quantiles(
            np.stack([samples[i] for i in whole]), [(1.0 - level) / 2.0, (1.0 + level) / 2.0]
        )
        for i, low, high in zip(whole, tails[0].tolist(), tails[1].tolist(), strict=True):
            out[i] = low, high
    return out


def row_quantiles(rows: Array, probs: Sequence[float]) -> Array:
    """``np.quantile(rows, probs, axis=1)`` (method "linear") bit for bit, for finite rows.

    Each row is sorted once and the two neighbours of every virtual index
    ``(n - 1) q`` are interpolated with numpy's own formula. numpy partitions
    along the first axis of a transposed copy with six split points, which
    for a few metrics of 4,000 draws costs about three times a sort.

    Parameters
    ----------
    rows : ndarray of float64, shape (M, S)
        Finite values.
    probs : sequence of float in [0, 1]

    Returns
    -------
    ndarray of float64, shape (len(probs), M)
    """
    ordered = np.sort(rows, axis=1)
    n = ordered.shape[1]
    virtual = (n - 1) * np.asarray(probs, dtype=np.float64)
    previous = np.floor(virtual)
    following = previous + 1.0
    last = virtual >= n - 1
    previous[last] = following[last] = -1.0
    gamma = (virtual - previous)[:, None]
    a = ordered[:, previous.astype(np.intp)].T
    b = ordered[:, following.astype(np.intp)].T
    diff = b - a
    out: Array = a + diff * gamma
    np.subtract(b, diff * (1.0 - gamma), out=out, where=gamma >= 0.5)
    return out


def _boundaries(
    c: ConfusionCounts, sample_prior: bool, gen: np.random.Generator, size: int
) -> tuple[tuple[str, Array], ...]:
    """Alternative draws of each rate whose count is within one of a boundary.

    The rate at its boundary value, and drawn from its uniform-prior posterior
    Beta(x + 1, n − x + 1) (``beta`` is 1 − TPR, so its draws are reflected).
    """
    cases = [
        ("alpha", c.fp, c.tn, False),
        ("beta", c.fn, c.tp, False),
        ("prior", c.positives, c.negatives, not sample_prior),
    ]
    out: list[tuple[str, Array]] = []
    for rate, x, rest, skip in cases:
        if skip or min(x, rest) > 1:
            continue
        uniform = gen.beta(x + 1.0, rest + 1.0, size=size)
        edge = 0.0 if x <= 1 else 1.0
        out += [(rate, np.full(size, edge)), (rate, uniform)]
        if max(x, rest) <= 1:  # both ends are near: n <= 2
            out.append((rate, np.full(size, 1.0 - edge)))
    return tuple(out)


def sample_rate_posterior(
    counts: ConfusionCounts,
    *,
    rng: np.random.Generator,
    n_samples: int = DEFAULT_N_SAMPLES,
    pi0: float | None = None,
    prior_count: float = JEFFREYS,
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
        Fix the prior at this reference prior (calibrated metrics); None: draw
        pi ~ Beta(P + a, N + a) jointly with the rates.
    prior_count : float
        ``a`` of the Beta(a, a) prior of every rate: 1/2 (Jeffreys, the
        interval rule) or 1 (uniform, Brodersen et al.'s posterior).
    """
    c = _check_counts(counts)
    gen = _check_rng(rng)
    s = _check_size("n_samples", n_samples, 100)
    a = float(prior_count)
    if not (math.isfinite(a) and a > 0.0):
        raise InvalidInput("prior_count", f"is {prior_count!r}, must be > 0")
    tpr = gen.beta(c.tp + a, c.fn + a, size=s)
    alpha = gen.beta(c.fp + a, c.tn + a, size=s)
    if pi0 is not None:
        prior = np.full(s, check_probability("pi0", pi0))
    elif c.n == 0:
        prior = np.full(s, math.nan)  # an empty window: every raw metric undefined
    else:
        prior = gen.beta(c.positives + a, c.negatives + a, size=s)
    sample_prior = pi0 is None and c.n > 0
    return RatePosterior(
        prior=prior,
        alpha=alpha,
        beta=1.0 - tpr,
        boundaries=_boundaries(c, sample_prior, gen, s),
    )


def rate_interval(successes: float, trials: float, level: float = 0.95) -> Interval:
    """Jeffreys interval of a binomial proportion with the boundary modification.

    The equal-tailed ``level`` interval of Beta(x + 1/2, n − x + 1/2); when
    x <= 1 the lower bound is 0 and the upper bound at least that of
    Beta(x + 1, n − x + 1), and symmetrically when x >= n − 1 (Brown, Cai
    and DasGupta 2001, section 4.1.2): the rule of every credible interval
    here, in closed form.
    ``(nan, nan)`` when ``trials`` is 0.

    Examples
    --------
    >>> rate_interval(0, 30)[0], round(rate_interval(0, 30)[1], 4)
    (0.0, 0.1122)
    """
    x, n, lvl = float(successes), float(trials), _check_level(level)
    if not (0.0 <= x <= n) or n == 0.0:
        return _NAN_INTERVAL
    tails = np.array([[(1.0 - lvl) / 2.0], [(1.0 + lvl) / 2.0]])
    # column 0 Jeffreys, column 1 uniform prior: one elementwise call for both
    # betaincinv is scipy.stats.beta.ppf without the scipy.stats import (same values)
    from scipy import special  # on first use: scipy.special is not a start-up import

    ends = special.betaincinv([x + JEFFREYS, x + 1.0], [n - x + JEFFREYS, n - x + 1.0], tails)
    low, high = float(ends[0, 0]), float(ends[1, 0])
    uniform = ends[:, 1]
    if x <= 1.0:
        low, high = 0.0, max(high, float(uniform[1]))
    if x >= n - 1.0:
        low, high = min(low, float(uniform[0])), 1.0
    return low, high


def credible_intervals(
    counts: ConfusionCounts,
    metrics: Iterable[str],
    *,
    rng: np.random.Generator,
    pi0: float | None = None,
    level: float = 0.95,
    n_samples: int = DEFAULT_N_SAMPLES,
    prior_count: float = JEFFREYS,
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
        ``calibrated_<name>``); None: the raw metric, the window's prior drawn
        with the rates (module docstring).
    level : float
        Posterior mass inside the interval, in (0, 1).
    n_samples : int
        Posterior draws (>= 100).
    prior_count : float
        ``a`` of the rates' Beta(a, a) prior (:func:`sample_rate_posterior`).

    Returns
    -------
    dict of str to (low, high)
        Equal-tailed Jeffreys intervals widened at the boundaries
        (:meth:`RatePosterior.interval`); ``(nan, nan)`` where the metric is
        undefined.

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
        counts, rng=rng, n_samples=n_samples, pi0=pi0, prior_count=prior_count
    )
    return posterior.intervals(metrics, lvl)


def credible_interval(
    counts: ConfusionCounts,
    metric: str,
    *,
    rng: np.random.Generator,
    pi0: float | None = None,
    level: float = 0.95,
    n_samples: int = DEFAULT_N_SAMPLES,
    prior_count: float = JEFFREYS,
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
        prior_count=prior_count,
    )[metric]


def ops_interval(
    metric: str,
    interval: Interval,
    prior: float | Interval,
    *,
    at: float | None = None,
) -> Interval:
    """The outperformance-score interval matching a metric interval.

    OPS_M(mu; pi) is a distribution function of mu at fixed pi, so it maps an
    interval's ends to the interval's OPS ends (reversed for metrics where
    lower is better). With a fixed prior (``pi0`` for calibrated metrics) pass
    that prior; with an estimated one (a window's P/n) pass its interval
    (:func:`rate_interval`): the result is the hull of the OPS of the metric's
    ends at the prior's two ends (ends at 0 or 1 are moved inside by 1e-9).

    Parameters
    ----------
    metric : str
        Any name :func:`app.metrics.ops.outperformance_score` accepts.
    interval : (low, high)
        The metric's interval; ``(nan, nan)`` gives ``(nan, nan)``.
    prior : float or (low, high)
        Class prior in (0, 1), or an interval of it.
    at : float or None
        The point of a point metric (see ``outperformance_score``).
    """
    from app.metrics.ops import outperformance_scores  # the DBT reference loads on demand

    low, high = (float(x) for x in interval)
    priors = (prior,) if isinstance(prior, int | float) else tuple(float(p) for p in prior)
    if math.isnan(low) or math.isnan(high) or any(math.isnan(p) for p in priors):
        return _NAN_INTERVAL
    inside = [min(max(p, 1e-9), 1.0 - 1e-9) for p in priors]
    ends = outperformance_scores(
        metric, [low, high] * len(inside), [p for p in inside for _ in (low, high)], at=at
    )
    return min(ends), max(ends)


# ---------------------------------------------------------------- bootstrap intervals


def _resample(hist: Array, size: int, method: ResampleMethod, gen: np.random.Generator) -> Array:
    """(size, K) cumulative counts of resampled bins of one class.

    The draws are whole numbers, so their cumulative sums are exact in any
    order: they are summed as integers and converted once.
    """
    if method == "poisson":
        draws = gen.poisson(hist, size=(size, hist.size))
    else:
        total = float(hist.sum())
        if total == 0.0:
            return np.zeros((size, hist.size))
        draws = gen.multinomial(round(total), hist / total, size=size)
    return np.cumsum(draws, axis=1).astype(np.float64)


def row_areas(names: Iterable[str], tps: Array, fps: Array, pi0: float) -> dict[str, Array]:
    """Each area of ``names`` for every row of cumulative counts; at pi0 for ``calibrated_`` names.

    The counts are valid by construction (cumulative sums of observed or
    resampled bin counts), so the kernels run without validation; gini is
    2·auc_roc − 1 of the same rows (as :func:`gini_from_counts` computes it)
    and the curves at pi0 are built once for all ``calibrated_`` names.

    The rows are taken in blocks of about :data:`ROW_BLOCK_ELEMENTS` counts:
    every area is a function of its own row, so the values are those of all rows
    at once, and the kernels' temporaries stay small (400 resamples of 256 bins
    in one block took twice the CPU).
    """
    wanted = list(names)
    step = max(1, ROW_BLOCK_ELEMENTS // max(1, tps.shape[-1]))
    if tps.shape[0] <= step:
        return _block_areas(wanted, tps, fps, pi0)
    blocks = [
        _block_areas(wanted, tps[i : i + step], fps[i : i + step], pi0)
        for i in range(0, tps.shape[0], step)
    ]
    return {name: np.concatenate([block[name] for block in blocks]) for name in wanted}


ROW_BLOCK_ELEMENTS = 16_384
"""Counts per block of rows in :func:`row_areas` (128 KB per temporary)."""


def _block_areas(wanted: list[str], tps: Array, fps: Array, pi0: float) -> dict[str, Array]:
    """:func:`row_areas` of one block of rows."""
    at_pi0 = None
    if any(name.startswith(CALIBRATED_PREFIX) for name in wanted):
        p, n = tps[:, -1:], fps[:, -1:]
        defined = (p[:, 0] > 0.0) & (n[:, 0] > 0.0)  # rates need both classes
        at_pi0 = (
            pi0 * tps / np.where(p > 0.0, p, 1.0),
            (1.0 - pi0) * fps / np.where(n > 0.0, n, 1.0),
        )
    done: dict[str, Array] = {}

    def area(name: str) -> Array:
        if name not in done:
            base = name.removeprefix(CALIBRATED_PREFIX)
            if base == "gini":
                done[name] = 2.0 * area(name.replace("gini", "auc_roc")) - 1.0
            elif at_pi0 is None or base == name:
                done[name] = np.asarray(AREA_KERNELS[base](tps, fps), dtype=np.float64)
            else:
                done[name] = np.where(defined, AREA_KERNELS[base](*at_pi0), np.nan)
        return done[name]

    return {name: area(name) for name in wanted}


def _jackknife(
    names: list[str], pos_desc: Array, neg_desc: Array, prior: float
) -> dict[str, tuple[Array, Array]]:
    """Leave-one-example-out values of each area and how many examples each stands for.

    Removing one example from a bin gives the same area for every example of
    that bin, so one value per non-empty bin of each class suffices (the bin's
    count is its weight). Bins with a count below one lose what they hold.
    The rows of both classes are built once and shared by every area.
    """
    k = pos_desc.size
    tps, fps = np.cumsum(pos_desc), np.cumsum(neg_desc)
    later = np.arange(k)[None, :] >= np.arange(k)[:, None]  # row j: bins j.. lose the example
    held_pos, held_neg = pos_desc > 0.0, neg_desc > 0.0
    rows_tps = np.concatenate(
        (
            (tps - later * np.minimum(pos_desc, 1.0)[:, None])[held_pos],
            np.broadcast_to(tps, (int(np.count_nonzero(held_neg)), k)),
        )
    )
    rows_fps = np.concatenate(
        (
            np.broadcast_to(fps, (int(np.count_nonzero(held_pos)), k)),
            (fps - later * np.minimum(neg_desc, 1.0)[:, None])[held_neg],
        )
    )
    weights = np.concatenate((pos_desc[held_pos], neg_desc[held_neg]))
    return {
        name: (values, weights)
        for name, values in row_areas(names, rows_tps, rows_fps, prior).items()
    }


def _bca_levels(
    samples: Array, point: float, jack: tuple[Array, Array], level: float
) -> tuple[float, float] | None:
    """The BCa percentile levels (Efron 1987) of an equal-tailed ``level`` interval.

    Bias correction ``z0 = Phi^-1(share of resamples below the point, ties
    half)`` and acceleration ``a`` from the jackknife's skewness:
    ``a = sum w d^3 / (6 (sum w d^2)^1.5)``, ``d`` the deviations of the
    leave-one-out values from their mean. None when the point is undefined.
    """
    defined = samples[np.isfinite(samples)]
    values, weights = jack
    keep = np.isfinite(values)
    if not math.isfinite(point) or defined.size == 0 or not keep.any():
        return None
    below = (np.count_nonzero(defined < point) + 0.5 * np.count_nonzero(defined == point)) / (
        defined.size
    )
    share = min(max(below, 1.0 / (defined.size + 1)), defined.size / (defined.size + 1))
    from scipy import special  # on first use: scipy.special is not a start-up import

    z0 = float(special.ndtri(share))
    values, weights = values[keep], weights[keep]
    d = np.average(values, weights=weights) - values
    spread = float(np.sum(weights * d * d))
    a = float(np.sum(weights * d**3)) / (6.0 * spread**1.5) if spread > 0.0 else 0.0
    out = []
    for q in ((1.0 - level) / 2.0, (1.0 + level) / 2.0):
        z = z0 + float(special.ndtri(q))
        out.append(float(special.ndtr(z0 + z / (1.0 - a * z))))
    return out[0], out[1]


def _bca_interval(
    samples: Array, point: float, jack: tuple[Array, Array], level: float
) -> Interval:
    """BCa interval of the resampled values; (nan, nan) as :func:`_interval` when undefined."""
    defined = samples[np.isfinite(samples)]
    levels = _bca_levels(samples, point, jack, level)
    if levels is None or defined.size < level * samples.size:
        return _NAN_INTERVAL
    low, high = np.quantile(defined, levels)
    return float(low), float(high)


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
        Coverage of the interval, in (0, 1).
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
        BCa intervals (module docstring); ``(nan, nan)`` where the area is
        undefined (e.g. no positives). ``calibrated_auc_pr``, ``ks`` and
        ``calibrated_ks`` (the same value) are not resampled: they get the
        closed-form intervals the worker stores
        (:mod:`app.metrics.area_intervals`: the bootstrap of these two does
        not cover), ``(nan, nan)`` where those are null.

    Examples
    --------
    >>> pos, neg = [1, 2, 5, 12, 30], [40, 25, 10, 4, 1]
    >>> low, high = bootstrap_interval(pos, neg, "auc_roc", rng=np.random.default_rng(0))
    >>> 0.85 < low < 0.946 < high < 0.99  # point estimate 0.946
    True
    """
    pos, neg = check_class_histograms(positives, negatives)
    names = list(dict.fromkeys(areas))
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
    out = {
        name: _closed_form_interval(name, pos, neg, prior, lvl)
        for name in names
        if name in CLOSED_FORM_AREAS
    }
    resampled = [name for name in names if name not in out]
    if resampled:
        out.update(_bca_bootstrap(pos, neg, resampled, gen, prior, lvl, b, method))
    return {name: out[name] for name in names}


CLOSED_FORM_AREAS = frozenset({"calibrated_auc_pr", "ks", "calibrated_ks"})
"""Areas whose interval :func:`bootstrap_intervals` takes from :mod:`app.metrics.area_intervals`."""


def _closed_form_interval(name: str, pos: Array, neg: Array, pi0: float, level: float) -> Interval:
    if name == "calibrated_auc_pr":
        found = calibrated_auc_pr_interval(pos, neg, pi0, level)
    else:
        found = ks_interval(pos, neg, level)
    return found.low, found.high


def _bca_bootstrap(
    pos: Array,
    neg: Array,
    names: list[str],
    gen: np.random.Generator,
    prior: float,
    lvl: float,
    b: int,
    method: ResampleMethod,
) -> dict[str, Interval]:
    """BCa intervals of ``names`` from B resamples of the histograms (validated)."""
    keep = (pos + neg) > 0.0  # empty bins stay empty and change no area
    if not keep.any():
        return dict.fromkeys(names, _NAN_INTERVAL)
    pos_desc, neg_desc = pos[keep][::-1], neg[keep][::-1]  # decreasing thresholds
    k = pos_desc.size
    samples: dict[str, list[Array]] = {name: [] for name in names}
    chunk = max(1, _MAX_CHUNK_ELEMENTS // k)
    for start in range(0, b, chunk):
        size = min(chunk, b - start)
        tps = _resample(pos_desc, size, method, gen)
        fps = _resample(neg_desc, size, method, gen)
        for name, values in row_areas(names, tps, fps, prior).items():
            samples[name].append(values)
    points = row_areas(names, np.cumsum(pos_desc)[None, :], np.cumsum(neg_desc)[None, :], prior)
    jacks = _jackknife(names, pos_desc, neg_desc, prior)
    return {
        name: _bca_interval(np.concatenate(samples[name]), float(points[name][0]), jacks[name], lvl)
        for name in names
    }


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
