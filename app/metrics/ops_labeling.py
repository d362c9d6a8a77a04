"""Outperformance score of labeling metrics (docs/outperformance.md, "Labeling metrics").

For a labeling metric M written as M(pi, alpha, beta), the reference
classifier has independent type-I and type-II errors A, B ~ U[0, 1], so

    OPS_M(mu; pi) = area of {(a, b) in [0, 1]^2 : M(pi, a, b) is worse than mu}

where "worse" means ``M < mu`` for a metric where higher is better (the
paper's definition) and ``M > mu`` for one where lower is better (error_rate,
fpr, fnr): the OPS is a percentile rank and higher is always better, so
``OPS_error_rate(e) = OPS_accuracy(1 - e)``. An undefined value (nan, on
sets of measure zero such as a corner of the square) counts as not worse.

F1 has a closed form (docs/outperformance.md), and so have MCC, precision and
accuracy (:mod:`app.metrics.ops_closed`): :func:`labeling_ops` and its batch
forms use them. Every other registered metric is
evaluated through its registry function on ``ConfusionCounts.from_rates`` (no
formula is written twice) by a one-dimensional method along the diagonals of
the square:

* coordinates s = a - b in (-1, 1) and t = a + b in [|s|, 2 - |s|], so that
  da db = ds dt / 2;
* on each diagonal (s fixed) the "worse" set is located by evaluating M on a
  grid of t, bracketing every change of the predicate between neighbours and
  bisecting each bracket (vectorised over all brackets of all diagonals); its
  length in t is summed from whole cells and the located end points;
* the lengths are integrated over s with the midpoint rule.

Along a diagonal both error rates grow together, so for every registered
metric (each is monotone in alpha and in beta; a test checks it) the worse
set is one interval and its end point moves with slope at most 1 in t as s
changes. The integrand is therefore Lipschitz with constant 2 whatever the
prior, with kinks only where the boundary meets the square's edges, which
makes the midpoint rule accurate to about h^2 = (2/512)^2 = 1.5e-5 even when
the level set is nearly parallel to an axis (extreme priors, prior-free
metrics such as recall). The bisection leaves at most 0.125 / 2^13 = 1.5e-5 on
each end point. The total error stays below 1e-4 (tests compare with the F1
closed form, the prior-free closed forms and a brute-force grid).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from app.metrics.confusion import ConfusionCounts
from app.metrics.labeling import LABELING_METRICS, LabelingMetric
from app.metrics.ops_closed import CLOSED_FORMS

Array = npt.NDArray[np.float64]
FloatArray = npt.NDArray[np.floating[Any]]
IntArray = npt.NDArray[np.intp]

N_DIAGONALS = 512
"""Midpoint nodes in s = alpha - beta (quadrature error about (2/N)^2)."""

N_BRACKET = 9
"""Points on each diagonal at which M is evaluated to bracket the boundary."""

N_BISECT = 9
"""Bisection steps per bracket before a final secant step (bracket 0.25 / 2^6 wide)."""

_STEP = 2.0 / N_DIAGONALS
_S = -1.0 + (np.arange(N_DIAGONALS) + 0.5) * _STEP  # diagonal s = a - b, shape (N_DIAGONALS,)
_T_LO = np.abs(_S)  # first t on each diagonal
_SPAN = 2.0 - 2.0 * _T_LO  # length in t of each diagonal
_CELL = _SPAN / (N_BRACKET - 1)  # bracketing cell length on each diagonal
_T_GRID = _T_LO[:, None] + _CELL[:, None] * np.arange(N_BRACKET)[None, :]
# The end points of a diagonal lie on the square's edges, where some metrics are
# undefined (recall_gain at beta = 1, precision at the corner (0, 1), ...): sample
# them a hair inside so that a thin worse band along an edge is still bracketed.
_T_GRID[:, 0] += 1e-9 * _SPAN
_T_GRID[:, -1] -= 1e-9 * _SPAN


def f1_ops(value: float, prior: float) -> float:
    """Closed-form OPS of F1 at prior ``prior`` (docs/outperformance.md, "Labeling metrics").

    Parameters
    ----------
    value : float
        Observed F1, mu in [0, 1].
    prior : float
        Class prior pi in (0, 1).

    Returns
    -------
    float
        Pr{F1(pi, A, B) < mu} for independent A, B ~ U[0, 1].

    Examples
    --------
    >>> round(f1_ops(0.6, 0.1), 6)  # the paper's example
    0.957672
    """
    mu, pi = float(value), float(prior)
    if mu <= 0.0:
        return 0.0
    first = (1.0 + pi) * mu / (2.0 * pi * (2.0 - mu))
    if mu <= 2.0 * pi / (1.0 + pi):
        return first
    excess = (1.0 + pi) * mu - 2.0 * pi
    return min(1.0, first - excess * excess / (2.0 * pi * (1.0 - pi) * mu * (2.0 - mu)))


def _rates(s: FloatArray, t: FloatArray) -> tuple[Array, Array]:
    """The error rates a = (t+s)/2, b = (t-s)/2 of diagonal points, clipped to [0, 1]."""
    a = np.minimum(np.maximum(0.5 * (t + s), 0.0), 1.0)  # np.clip's values, without its overhead
    b = np.minimum(np.maximum(0.5 * (t - s), 0.0), 1.0)
    return a, b


def _gap_of(metric: LabelingMetric, m: Array, value: float | Array) -> Array:
    """Signed gap of metric values ``m`` to ``value``: negative exactly where M is worse.

    ``M - value`` when higher is better, ``value - M`` otherwise; nan where M is
    undefined (never worse, since ``nan < 0`` is false).
    """
    return m - value if metric.greater_is_better else value - m


def _metric_on(metric: LabelingMetric, c: ConfusionCounts, part: slice | IntArray) -> Array:
    """M on the matrices ``part`` of ``c`` (a ConfusionCounts of arrays: from_rates broadcasts)."""
    cells = (cast(Array, x)[part] for x in (c.tp, c.fp, c.fn, c.tn))
    m: Array = metric.func(*cells)
    return m


_A_GRID, _B_GRID = _rates(_S[:, None], _T_GRID)  # the bracketing grid's rates, for every metric


def worse_area(metric: LabelingMetric, value: float, prior: float) -> float:
    """Area of {(a, b) in [0, 1]^2 : M(prior, a, b) worse than ``value``} (module docstring).

    Parameters
    ----------
    metric : LabelingMetric
        A registry entry; "worse" is ``<`` or ``>`` by ``metric.greater_is_better``.
    value : float
        Observed value mu (finite).
    prior : float
        Class prior pi in (0, 1).

    Returns
    -------
    float
        The OPS, in [0, 1], to about 1e-5.
    """
    return float(worse_areas(metric, [value], [prior])[0])


def worse_areas(metric: LabelingMetric, values: Sequence[float], priors: Sequence[float]) -> Array:
    """:func:`worse_area` of several (value, prior) pairs, in one vectorised evaluation.

    Parameters
    ----------
    metric : LabelingMetric
        A registry entry.
    values, priors : sequences of float, length M
        Pair i is the observed value ``values[i]`` at prior ``priors[i]``.

    Returns
    -------
    ndarray of float64, shape (M,)
        Element i equals ``worse_area(metric, values[i], priors[i])``.
    """
    return _worse_areas([metric] * len(values), values, priors)


def _worse_areas(
    metrics: Sequence[LabelingMetric], values: Sequence[float], priors: Sequence[float]
) -> Array:
    """:func:`worse_area` of the triples (``metrics[i]``, ``values[i]``, ``priors[i]``), where
    the pairs of one metric are consecutive; every metric is evaluated on the grid at every
    distinct prior (the batches share their priors)."""
    mu = np.asarray(values, dtype=np.float64)
    pi = np.asarray(priors, dtype=np.float64)
    pairs = mu.size
    if pairs == 0:
        return np.zeros(0, dtype=np.float64)
    runs = _runs(metrics)
    # (pairs, diagonals, points); every operation is elementwise, so a pair's
    # values are those of evaluating it alone. M on the grid depends on the
    # prior only: once per distinct prior (an interval's two ends share one).
    distinct, which = np.unique(pi, return_inverse=True)
    which = which.reshape(pairs)
    grid = ConfusionCounts.from_rates(*cast(Any, (distinct[:, None, None], _A_GRID, _B_GRID)))
    every = slice(None)
    gap = _joined(
        _gap_of(m, _metric_on(m, grid, every)[which[run]], mu[run, None, None]) for m, run in runs
    )
    worse = gap < 0.0
    left, right = worse[..., :-1], worse[..., 1:]
    length = np.count_nonzero(left & right, axis=-1) * _CELL  # whole cells inside
    pair, line, cell = np.nonzero(left != right)  # one bracket per change of the predicate
    if line.size:
        s = _S[line]
        start = _T_LO[line] + cell * _CELL[line]
        end = start + _CELL[line]
        lo, hi = start, end
        g_lo, g_hi = gap[pair, line, cell], gap[pair, line, cell + 1]
        worse_lo = left[pair, line, cell]
        pair_pi, pair_mu = pi[pair], mu[pair]
        # the brackets of each metric's pairs (ordered by pair, so consecutive)
        cuts = np.searchsorted(pair, [run.start for _, run in runs] + [pairs])
        brackets = [
            (m, slice(a, b)) for (m, _), a, b in zip(runs, cuts[:-1], cuts[1:], strict=True)
        ]
        for _ in range(N_BISECT):
            mid = 0.5 * (lo + hi)
            at_mid = ConfusionCounts.from_rates(cast(float, pair_pi), *cast(Any, _rates(s, mid)))
            g_mid = _joined(
                _gap_of(m, _metric_on(m, at_mid, part), pair_mu[part]) for m, part in brackets
            )
            same = (g_mid < 0.0) == worse_lo
            lo, g_lo = np.where(same, mid, lo), np.where(same, g_mid, g_lo)
            hi, g_hi = np.where(same, hi, mid), np.where(same, g_hi, g_mid)
        # A last secant step where both ends are defined; the midpoint otherwise.
        secant = np.isfinite(g_lo) & np.isfinite(g_hi) & (g_lo != g_hi)
        frac = np.where(secant, g_lo / np.where(secant, g_lo - g_hi, 1.0), 0.5)
        edge = lo + np.clip(frac, 0.0, 1.0) * (hi - lo)
        part = np.where(worse_lo, edge - start, end - edge)
        found = np.bincount(pair * N_DIAGONALS + line, weights=part, minlength=length.size)
        length = length + found.reshape(length.shape)
    area = 0.5 * _STEP * np.sum(length, axis=-1)
    clipped: Array = np.where(area > 0.0, np.minimum(area, 1.0), 0.0)
    return clipped.reshape(pairs)


def _runs(metrics: Sequence[LabelingMetric]) -> list[tuple[LabelingMetric, slice]]:
    """The runs of consecutive equal metrics, each with its slice of the pairs."""
    runs: list[tuple[LabelingMetric, slice]] = []
    for i, metric in enumerate(metrics):
        if runs and runs[-1][0] is metric:
            runs[-1] = (metric, slice(runs[-1][1].start, i + 1))
        else:
            runs.append((metric, slice(i, i + 1)))
    return runs


def _joined(parts: Iterable[Array]) -> Array:
    """The parts end to end along the first axis (a single part as it is)."""
    arrays = list(parts)
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


_CLOSED: dict[str, Callable[[float, float], float]] = {"f1": f1_ops, **CLOSED_FORMS}
"""The labeling metrics whose OPS is a closed form, not :func:`worse_area`."""


def labeling_ops(name: str, value: float, prior: float) -> float:
    """OPS of labeling metric ``name`` (a key of ``LABELING_METRICS``) at ``prior``.

    F1 uses :func:`f1_ops`, MCC, precision and accuracy their closed forms
    (:mod:`app.metrics.ops_closed`); every other metric :func:`worse_area`. Arguments
    are trusted (validated by :func:`app.metrics.ops.outperformance_score`).

    Examples
    --------
    >>> round(labeling_ops("recall", 0.3, 0.1), 4)  # prior-free: OPS_recall(mu) = mu
    0.3
    """
    return labeling_ops_pairs(name, [value], [prior])[0]


def labeling_ops_pairs(name: str, values: Sequence[float], priors: Sequence[float]) -> list[float]:
    """:func:`labeling_ops` of several (value, prior) pairs (one evaluation of :func:`worse_areas`).

    Examples
    --------
    >>> [round(x, 4) for x in labeling_ops_pairs("recall", [0.3, 0.6], [0.1, 0.5])]
    [0.3, 0.6]
    """
    closed = _CLOSED.get(name)
    if closed is not None:
        return [closed(v, p) for v, p in zip(values, priors, strict=True)]
    return [float(x) for x in worse_areas(LABELING_METRICS[name], values, priors)]


def labeling_ops_at(values: Mapping[str, float], prior: float) -> dict[str, float]:
    """:func:`labeling_ops` of several metrics at one prior, by name.

    The same values as one call per metric; the areas of all of them are
    evaluated together (one grid of rates, one bisection).

    Examples
    --------
    >>> ops = labeling_ops_at({"recall": 0.3, "f1": 0.6}, 0.1)
    >>> round(ops["recall"], 4), round(ops["f1"], 4)
    (0.3, 0.9577)
    """
    names = [name for name in values if name not in _CLOSED]
    metrics = [LABELING_METRICS[name] for name in names]
    found: dict[str, float] = {}
    if names:
        areas = _worse_areas(metrics, [values[n] for n in names], [prior] * len(names))
        found = dict(zip(names, areas.tolist(), strict=True))
    return {
        name: closed(value, prior) if (closed := _CLOSED.get(name)) else found[name]
        for name, value in values.items()
    }
