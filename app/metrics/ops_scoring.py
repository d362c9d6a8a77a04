"""Outperformance score of scoring metrics against DBT reference curves.

OPS_M(mu; pi) = (1/G) #{g : M_g(pi) < mu}, where M_g(pi) is metric M of DBT
reference curve g (:mod:`app.metrics.dbt`) evaluated at the window's prior pi
exactly as for an observed curve: the curve's normalised cumulative counts
``tps = pi (1 - beta)``, ``fps = (1 - pi) alpha`` go through the area functions
of :mod:`app.metrics.curves`, and point metrics interpolate (alpha, beta)
linearly between neighbouring points. Its Monte-Carlo standard error is
``sqrt(OPS (1 - OPS) / G)`` (:func:`app.metrics.dbt.monte_carlo_standard_error`).

Two phases (built once per reference, evaluated cheaply per window):

* ROC-AUC and KS are prior-free: the G reference values are computed once and
  sorted; an OPS is one ``searchsorted``.
* Precision at recall u is a decreasing function of alpha_g(u), the curve's
  FPR at recall u, which is prior-free: precision_g < mu exactly when
  alpha_g(u) > pi u (1 - mu) / ((1 - pi) mu). The sorted alpha_g(u) are kept
  per u.
* Precision at a fraction x predicted positive reduces to the same quantity:
  on a curve increasing in both recall and fraction, the precision at x is
  below mu exactly when the curve reaches recall r = mu x / pi at a fraction
  above x, i.e. alpha_g(r) > (x - pi r) / (1 - pi). alpha_g(r) for all curves
  is a two-level ``searchsorted`` in the recalls of every curve laid end to end
  (curve g shifted by 2g): a few milliseconds at any prior, bound by the
  latency of reading one block of each curve.
* AUC-PR and the lift-curve area depend on pi. For each curve they are smooth
  functions of s = logit(pi) (sums of logistic functions of s), so they are
  tabulated on the grid s_j = j * LOGIT_STEP (nodes computed exactly with the
  area functions, lazily, the first time a prior needs them) and interpolated
  per curve with the cubic Lagrange polynomial through the four nearest
  nodes, on a transformed scale: logit(AUC-PR) and (lift area - 1) / (-ln pi).
  With LOGIT_STEP = 0.25 the per-curve error is below 1e-5 and the OPS error
  about 1e-4, far below the Monte-Carlo error (measured by bench/bench_ops.py
  and tests/unit/metrics/test_ops_scoring.py against :meth:`ScoringReference.exact_values`).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from app.metrics.areas import AREA_KERNELS
from app.metrics.curves import CurveCounts, lift_at_fraction, precision_at_recall
from app.metrics.dbt import (
    DEFAULT_DEPTH,
    DEFAULT_N_CURVES,
    DEFAULT_SEED,
    DBTReference,
    dbt_reference,
)

Array = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

LOGIT_STEP = 0.25
"""Spacing in logit(pi) of the AUC-PR and lift-area interpolation nodes."""

CHUNK_ROWS = 512
"""Curves per call of an area function: keeps the temporaries in cache."""

CURVE_POINTS = 20
"""Grid size of the OPRC and OPS-lift curves."""

_N_BLOCKS = 16  # blocks per curve of the two-level recall search

PRIOR_DEPENDENT_AREAS = ("auc_pr", "auc_lift")
PRIOR_FREE_AREAS = ("auc_roc", "ks")


def _logit(p: Any) -> Any:
    return np.log(p) - np.log1p(-p)


def _sigmoid(s: float) -> float:
    return 1.0 / (1.0 + math.exp(-s))


def _neg_log_sigmoid(s: float) -> float:
    """-ln(sigmoid(s)), exact where sigmoid(s) rounds to 1 (s above about 36.7)."""
    return math.log1p(math.exp(-s)) if s > 0 else -s + math.log1p(math.exp(s))


def _to_scale(area: str, values: Any, neg_log_prior: float) -> Any:
    """Per-curve values on the scale they are interpolated on (increasing in the value);
    ``neg_log_prior`` is -ln(pi), the lift area of a perfect ranking minus 1."""
    if area == "auc_pr":
        return _logit(np.clip(values, 1e-300, 1.0 - 1e-16))
    return (values - 1.0) / neg_log_prior  # lift area: 0 random, 1 perfect ranking


def _cubic_weights(x: float) -> tuple[float, float, float, float]:
    """Lagrange weights of nodes at -1, 0, 1, 2 for a point x in [0, 1)."""
    return (
        -x * (x - 1.0) * (x - 2.0) / 6.0,
        (x + 1.0) * (x - 1.0) * (x - 2.0) / 2.0,
        -(x + 1.0) * x * (x - 2.0) / 2.0,
        (x + 1.0) * x * (x - 1.0) / 6.0,
    )


def recall_grid(n_points: int = CURVE_POINTS) -> Array:
    """The OPRC / OPS-lift grid: midpoints (k - 0.5)/n, k = 1..n, of (0, 1).

    End points are left out: at recall (or fraction) 1 every reference curve
    has precision pi, and at 0 precision is undefined.

    >>> recall_grid(4).tolist()
    [0.125, 0.375, 0.625, 0.875]
    """
    return (np.arange(n_points, dtype=np.float64) + 0.5) / n_points


class NodeStore(Protocol):
    """Where a :class:`ScoringReference` keeps its AUC-PR and lift nodes and its sorted
    prior-free areas beyond its own process (the worker's
    :class:`app.worker.node_store.NodeDirectory`): arrays of G values."""

    def node(self, area: str, index: int, build: Callable[[], Array]) -> Array:
        """The node (``area``, ``index``): the stored one, else ``build()`` (then stored)."""
        ...


class ScoringReference:
    """OPS of scoring metrics against one set of DBT curves (two-phase, thread-safe).

    Parameters
    ----------
    dbt : DBTReference
        The reference curves; see :func:`scoring_reference` for the cached
        default.

    Notes
    -----
    Everything prior-free is computed on first use and kept; AUC-PR and lift
    nodes are added as priors need them. Results are deterministic given the
    curves.
    """

    def __init__(self, dbt: DBTReference) -> None:
        self.dbt = dbt
        self._lock = threading.Lock()
        self._sorted: dict[str, Array] = {}
        self._nodes: dict[tuple[str, int], Array] = {}
        self._alpha_sorted: dict[float, Array] = {}
        self._tpr_shifted: tuple[Array, Array] | None = None
        self._store: NodeStore | None = None

    def store_nodes_in(self, store: NodeStore | None) -> None:
        """Read and keep the AUC-PR and lift nodes and the sorted prior-free areas in
        ``store`` from now on (None: in this process only). The same bytes either way."""
        self._store = store

    @property
    def n_curves(self) -> int:
        """G."""
        return self.dbt.n_curves

    def warm_up(self, priors: Iterable[float] = ()) -> None:
        """Build what a window's summary needs now: the sorted ROC-AUC values, and the
        AUC-PR and lift nodes around ``priors``.

        Optional: everything is otherwise built on first use. A worker calls it
        at start (no priors: which ones its windows hold is not known), so that
        every summary finds the prior-free part built; a window at a new prior
        builds its nodes (0.05-0.1 s each, 4 per region). What only the detail
        tier reads (the recall index of the point metrics and the sorted FPRs
        at the OPRC grid, :func:`recall_grid`: 0.15 s) and the KS values (which
        no window reads) are left to their first use, so that a worker's
        first summaries do not wait for them.
        """
        self.sorted_values("auc_roc")
        for prior in priors:
            for area in PRIOR_DEPENDENT_AREAS:
                self._scaled(area, prior)

    # ----------------------------------------------------------------- areas
    def exact_values(self, area: str, prior: float) -> Array:
        """Metric ``area`` of every reference curve at ``prior``, computed exactly.

        Parameters
        ----------
        area : {"auc_pr", "auc_lift", "auc_roc", "ks"}
        prior : float
            Class prior pi in (0, 1).

        Returns
        -------
        ndarray of float64, shape (G,)
            Element g is the area function of :mod:`app.metrics.curves` applied
            to curve g's counts ``pi (1 - beta)``, ``(1 - pi) alpha``.
        """
        func = AREA_KERNELS[area]  # the curves are valid by construction: no check
        out = np.empty(self.n_curves, dtype=np.float64)
        for start in range(0, self.n_curves, CHUNK_ROWS):
            rows = slice(start, start + CHUNK_ROWS)
            out[rows] = func(*self.dbt.counts_at_prior(prior, rows))
        return out

    def sorted_values(self, area: str) -> Array:
        """Sorted values of prior-free area ``area`` ("auc_roc" or "ks"), shape (G,);
        kept in the node store as node (``sorted-`` + area, 0) when there is one."""
        cached = self._sorted.get(area)
        if cached is None:

            def build() -> Array:
                return np.sort(self.exact_values(area, 0.5))

            store = self._store
            cached = build() if store is None else store.node(f"sorted-{area}", 0, build)
            with self._lock:
                self._sorted[area] = cached
        return cached

    def _node(self, area: str, index: int) -> Array:
        key = (area, index)
        node = self._nodes.get(key)
        if node is None:
            store = self._store
            if store is None:
                node = self._built_node(area, index)
            else:
                node = store.node(area, index, lambda: self._built_node(area, index))
            with self._lock:
                self._nodes.setdefault(key, node)
        return node

    def _built_node(self, area: str, index: int) -> Array:
        s = index * LOGIT_STEP
        node: Array = _to_scale(area, self.exact_values(area, _sigmoid(s)), _neg_log_sigmoid(s))
        return node

    def interpolated_values(self, area: str, prior: float) -> Array:
        """AUC-PR or lift area of every curve at ``prior``, interpolated on the logit grid.

        Returns
        -------
        ndarray of float64, shape (G,)
            Element g approximates ``exact_values(area, prior)[g]`` (about 1e-5).
        """
        return np.asarray(self._from_scale(area, self._scaled(area, prior), prior), np.float64)

    def _scaled(self, area: str, prior: float) -> Array:
        s = float(_logit(prior)) / LOGIT_STEP
        base = math.floor(s)
        weights = _cubic_weights(s - base)
        # The weighted nodes summed in order, each product into one reused buffer: the
        # values of summing them onto zeros (0.0 + x is x, up to the sign of a zero).
        (w0, i0), *rest = [(w, base + k) for k, w in enumerate(weights, -1) if w != 0.0]
        total: Array = self._node(area, i0) * w0
        product = np.empty_like(total)
        for w, index in rest:
            total += np.multiply(self._node(area, index), w, out=product)
        return total

    @staticmethod
    def _from_scale(area: str, scaled: Any, prior: float) -> Any:
        if area == "auc_pr":
            return 1.0 / (1.0 + np.exp(-scaled))
        return 1.0 + scaled * -math.log(prior)

    def ops_area(self, area: str, value: float, prior: float) -> float:
        """OPS of an observed area: the fraction of reference curves with a lower one.

        Parameters
        ----------
        area : {"auc_pr", "auc_lift", "auc_roc", "ks"}
        value : float
            Observed area mu.
        prior : float
            Class prior pi in (0, 1) (ignored by the prior-free areas).
        """
        if area in PRIOR_FREE_AREAS:
            ref = self.sorted_values(area)
            return int(np.searchsorted(ref, value, side="left")) / ref.size
        if area == "auc_pr" and value >= 1.0:
            return 1.0
        if area == "auc_pr" and value <= 0.0:
            return 0.0
        threshold = _to_scale(area, np.float64(value), -math.log(prior))
        return int(np.count_nonzero(self._scaled(area, prior) < threshold)) / self.n_curves

    # --------------------------------------------------------- point metrics
    def _shifted_recalls(self) -> tuple[Array, Array]:
        """Every curve's recalls laid end to end, curve g shifted by 2g (so globally sorted).

        Returns
        -------
        coarse : ndarray of float64, shape (G * (2^d / BLOCK + 1),)
            Every BLOCK-th point of each curve (its first and last included).
        fine : ndarray of float64, shape (G * (2^d + 1),)
            Every point.
        """
        if self._tpr_shifted is None:
            shift = 2.0 * np.arange(self.n_curves, dtype=np.float64)[:, None]
            fine = self.dbt.tpr + shift
            block = max(1, (self.dbt.n_points - 1) // _N_BLOCKS)
            coarse = np.ascontiguousarray(fine[:, ::block]).ravel()
            with self._lock:
                self._tpr_shifted = (coarse, fine.ravel())
        return self._tpr_shifted

    def alpha_at_recall(self, recall: Any) -> Array:
        """FPR of every reference curve where its recall first reaches ``recall``.

        Parameters
        ----------
        recall : float or ndarray of shape (G,)
            Recall r in (0, 1] (one per curve, or one for all).

        Returns
        -------
        ndarray of float64, shape (G,)
            alpha_g(r), read linearly between the two neighbouring points of
            curve g (the first point with recall >= r and the one before).
        """
        g = self.n_curves
        width = self.dbt.n_points
        r = np.broadcast_to(np.asarray(recall, dtype=np.float64), (g,))
        rows = np.arange(g)
        query = r + 2.0 * rows
        # Two-level search, cache-friendly: first among every BLOCK-th point of
        # every curve, then among the BLOCK points of the block found.
        coarse, fine = self._shifted_recalls()
        n_coarse = coarse.size // g
        block = (width - 1) // (n_coarse - 1)
        kc = np.clip(np.searchsorted(coarse, query, side="left") - rows * n_coarse, 1, n_coarse - 1)
        first = rows * width + (kc - 1) * block + 1  # the block's first point after the coarse one
        inside = fine.take(first[:, None] + np.arange(block)[None, :])
        k = (kc - 1) * block + 1 + np.count_nonzero(inside < query[:, None], axis=1)
        hi = rows * width + np.clip(k, 1, width - 1)
        tpr, alpha = self.dbt.tpr.ravel(), self.dbt.alpha.ravel()
        r0, r1 = tpr.take(hi - 1), tpr.take(hi)
        a0, a1 = alpha.take(hi - 1), alpha.take(hi)
        w = np.clip((r - r0) / np.where(r1 > r0, r1 - r0, 1.0), 0.0, 1.0)
        return np.asarray(a0 + w * (a1 - a0), dtype=np.float64)

    def sorted_alpha_at_recall(self, recall: float) -> Array:
        """``np.sort(alpha_at_recall(recall))``, kept per recall value."""
        key = float(recall)
        cached = self._alpha_sorted.get(key)
        if cached is None:
            cached = np.sort(self.alpha_at_recall(key))
            with self._lock:
                if len(self._alpha_sorted) > 256:
                    self._alpha_sorted.clear()
                self._alpha_sorted[key] = cached
        return cached

    def ops_precision_at_recall(self, value: float, prior: float, recall: float) -> float:
        """OPS of precision ``value`` observed at recall ``recall`` (u in (0, 1]) at ``prior``."""
        if value <= 0.0:
            return 0.0
        if value > 1.0:
            return 1.0
        alpha_max = prior * recall * (1.0 - value) / ((1.0 - prior) * value)
        ref = self.sorted_alpha_at_recall(recall)
        return (ref.size - int(np.searchsorted(ref, alpha_max, side="right"))) / ref.size

    def ops_precision_at_fraction(self, value: float, prior: float, fraction: float) -> float:
        """OPS of precision ``value`` among the top ``fraction`` x in (0, 1] at ``prior``."""
        if value <= 0.0:
            return 0.0
        needed = value * fraction / prior  # the recall that precision ``value`` implies at x
        if needed > 1.0:
            return 1.0
        alpha_max = (fraction - prior * needed) / (1.0 - prior)
        worse = self.alpha_at_recall(needed) > alpha_max
        return int(np.count_nonzero(worse)) / self.n_curves


def scoring_reference(
    depth: int = DEFAULT_DEPTH, n_curves: int = DEFAULT_N_CURVES, seed: int = DEFAULT_SEED
) -> ScoringReference:
    """The :class:`ScoringReference` of ``dbt_reference(depth, n_curves, seed)``, built once."""
    return _scoring_reference(depth, n_curves, seed)


@functools.lru_cache(maxsize=4)
def _scoring_reference(depth: int, n_curves: int, seed: int) -> ScoringReference:
    return ScoringReference(dbt_reference(depth, n_curves, seed))


def oprc_curve(
    curve: CurveCounts,
    prior: float | None = None,
    *,
    n_points: int = CURVE_POINTS,
    reference: ScoringReference | None = None,
) -> tuple[Array, Array]:
    """OPRC: OPS of the observed precision at each recall of a grid.

    Parameters
    ----------
    curve : CurveCounts
        The observed curve.
    prior : float or None
        Prior at which precision is read and compared; ``None`` for the
        curve's own prior.
    n_points : int
        Size of the recall grid (:func:`recall_grid`).
    reference : ScoringReference or None
        Defaults to :func:`scoring_reference`.

    Returns
    -------
    recall : ndarray of float64, shape (n_points,)
        The grid u_k = (k - 0.5) / n_points.
    ops : ndarray of float64, shape (n_points,)
        ``ops[k]`` = OPS(precision | recall = u_k): the fraction of reference
        curves with a lower precision at that recall; nan where the observed
        precision is undefined (no positives), and everywhere at a prior of 0
        or 1 (one class only: no reference curve to compare with).
    """
    ref = reference if reference is not None else scoring_reference()
    pi = curve.prior if prior is None else prior
    u = recall_grid(n_points)
    if not 0.0 < pi < 1.0:
        return u, np.full(n_points, np.nan)
    observed = np.asarray(precision_at_recall(curve, u, prior), dtype=np.float64)
    ops = np.array(
        [
            ref.ops_precision_at_recall(float(p), pi, float(r)) if np.isfinite(p) else np.nan
            for p, r in zip(observed, u, strict=True)
        ]
    )
    return u, ops


def ops_lift_curve(
    curve: CurveCounts,
    prior: float | None = None,
    *,
    n_points: int = CURVE_POINTS,
    reference: ScoringReference | None = None,
) -> tuple[Array, Array]:
    """OPS-lift curve: OPS of the observed lift at each fraction predicted positive.

    Lift is precision / pi at a fixed prior, so its OPS is that of the
    precision at the same fraction.

    Returns
    -------
    fraction : ndarray of float64, shape (n_points,)
        The grid x_k = (k - 0.5) / n_points.
    ops : ndarray of float64, shape (n_points,)
        ``ops[k]`` = OPS(lift | fraction = x_k); nan where the observed lift
        is undefined, and everywhere at a prior of 0 or 1.
    """
    ref = reference if reference is not None else scoring_reference()
    pi = curve.prior if prior is None else prior
    x = recall_grid(n_points)
    if not 0.0 < pi < 1.0:
        return x, np.full(n_points, np.nan)
    observed = np.asarray(lift_at_fraction(curve, x, prior), dtype=np.float64)
    ops = np.array(
        [
            ref.ops_precision_at_fraction(float(v) * pi, pi, float(f)) if np.isfinite(v) else np.nan
            for v, f in zip(observed, x, strict=True)
        ]
    )
    return x, ops
