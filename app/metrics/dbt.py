"""Directed Binary Tree (DBT) reference curves for the outperformance score.

The reference distribution of whole curves of docs/outperformance.md, "Scoring metrics"
(Zhao, Bui, Yu, Dzieciolowski, "Outperformance Score"). One curve is drawn as a
binary tree of (alpha, beta) = (FPR, FNR) points:

* the root draws alpha_1, beta_1 ~ U[0, 1];
* every drawn point splits both ranges: its left child draws alpha in
  [lower alpha, alpha_1) and beta in (beta_1, upper beta], its right child alpha
  in (alpha_1, upper alpha] and beta in [lower beta, beta_1);
* recursion to depth d gives J = 2^d - 1 points; read in order (left subtree,
  node, right subtree) alpha increases and beta decreases.

With the end points (0, 1) and (1, 0) added, a curve has 2^d + 1 points.

Generation is vectorised over curves and done level by level in place: after
level l the array holds the points of depths <= l at columns that are
multiples of ``2^(d-l)``, so a new point at column c draws between the already
placed columns ``c - step`` and ``c + step``. The draws are taken level by
level over all curves (level 1 of every curve, then level 2, ...), but applied
to blocks of :data:`_BLOCK_ROWS` curves at a time, every level of a block
while it is in the cache: the same values, in a third less time than whole
levels of the 41 MB array (the draws themselves are a fifth of the build).
The alpha and beta draws are independent, and because ``1 - beta`` follows the
same splitting law as alpha, the recall (TPR = 1 - beta) array is generated
with the same routine.

The reference for a (depth, n_curves, seed) triple is built once per process
and cached (:func:`dbt_reference`), or read from a :class:`CurveStore` where
the worker keeps it (the same bytes); the Monte-Carlo standard error of an OPS
value p estimated from G curves is ``sqrt(p (1 - p) / G)`` (at most
``0.5 / sqrt(G)``, 0.0035 for the default G = 20,000).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from app.errors import InvalidInput
from app.metrics.validation import check_probability

Array = npt.NDArray[np.float64]

DEFAULT_DEPTH = 8
"""Tree depth d of the default reference: 2^8 - 1 = 255 drawn points per curve."""

DEFAULT_N_CURVES = 20_000
"""Number G of reference curves: Monte-Carlo standard error at most 0.0035."""

DEFAULT_SEED = 20_250_511
"""Seed of the default reference (the paper's submission date)."""

_MAX_DEPTH = 16


@dataclass(frozen=True, eq=False)
class DBTReference:
    """G reference curves sampled from the DBT distribution.

    Attributes
    ----------
    alpha : ndarray of float64, shape (G, 2^d + 1)
        ``alpha[g, k]`` = false-positive rate (type-I error) of point k of
        curve g, points in the order of decreasing threshold: non-decreasing
        along each row, ``alpha[:, 0] = 0`` and ``alpha[:, -1] = 1``.
    tpr : ndarray of float64, shape (G, 2^d + 1)
        ``tpr[g, k]`` = recall 1 - beta of the same point: non-decreasing,
        ``tpr[:, 0] = 0`` and ``tpr[:, -1] = 1``.
    depth : int
        Tree depth d.
    seed : int or None
        Seed of the generator the curves were drawn with (None if unknown).
    """

    alpha: Array
    tpr: Array
    depth: int
    seed: int | None = None

    @property
    def n_curves(self) -> int:
        """G, the number of curves."""
        return int(self.alpha.shape[0])

    @property
    def n_points(self) -> int:
        """Points per curve including both end points, 2^d + 1."""
        return int(self.alpha.shape[1])

    @property
    def beta(self) -> Array:
        """Type-II error 1 - TPR of every point, shape (G, 2^d + 1), non-increasing."""
        return 1.0 - self.tpr

    def counts_at_prior(self, prior: float, rows: slice = slice(None)) -> tuple[Array, Array]:
        """Normalised cumulative counts of curves ``rows`` at class prior ``prior``.

        Returns
        -------
        tps, fps : ndarray of float64, shape (rows, 2^d)
            ``prior * TPR`` and ``(1 - prior) * FPR`` at every point except the
            start point (0, 1), which is the origin the area functions of
            :mod:`app.metrics.areas` leave out; the last column is the end
            point (1, 0), so ``tps[:, -1] = prior`` and ``fps[:, -1] = 1 - prior``.
        """
        return prior * self.tpr[rows, 1:], (1.0 - prior) * self.alpha[rows, 1:]


_BLOCK_ROWS = 256
"""Curves per block of :func:`_split_levels` (256 rows of depth 8: 0.5 MB)."""


def _split_levels(n_curves: int, depth: int, rng: np.random.Generator) -> Array:
    """Rows of non-decreasing values from 0 to 1 drawn by recursive uniform splitting.

    Returns
    -------
    ndarray of float64, shape (n_curves, 2^depth + 1)
        Column 0 is 0, the last column 1; the point placed at level l of the
        tree sits at a column that is an odd multiple of ``2^(depth - l)`` and
        was drawn uniformly in [left neighbour, right neighbour) of the columns
        one half-step away. The draws of level l are the ``n_curves * 2^(l-1)``
        after those of the levels before, row by row.
    """
    width = 1 << depth
    draws = rng.random(n_curves * (width - 1))
    out = np.empty((n_curves, width + 1), dtype=np.float64)
    out[:, 0] = 0.0
    out[:, -1] = 1.0
    gap = np.empty(_BLOCK_ROWS * (width // 2), dtype=np.float64)
    for first in range(0, n_curves, _BLOCK_ROWS):
        last = min(first + _BLOCK_ROWS, n_curves)
        block = out[first:last]
        level_start = 0  # where the draws of the level begin
        for level in range(1, depth + 1):
            step = 1 << (depth - level)
            n_new = 1 << (level - 1)
            u = draws[level_start + first * n_new : level_start + last * n_new]
            level_start += n_curves * n_new
            placed = block[:, :: 2 * step]  # the points of depths < level, with both ends
            d = gap[: (last - first) * n_new].reshape(last - first, n_new)
            np.subtract(placed[:, 1:], placed[:, :-1], out=d)
            d *= u.reshape(last - first, n_new)
            d += placed[:, :-1]
            block[:, step :: 2 * step] = d
    return out


def sample_dbt(n_curves: int, depth: int, rng: np.random.Generator) -> DBTReference:
    """Draw ``n_curves`` DBT curves of depth ``depth`` with generator ``rng``.

    Parameters
    ----------
    n_curves : int
        G >= 1.
    depth : int
        d in [1, 16]; each curve gets 2^d - 1 drawn points plus both end points.
    rng : numpy.random.Generator
        Source of randomness; alpha is drawn first, then recall.

    Returns
    -------
    DBTReference

    Examples
    --------
    >>> ref = sample_dbt(3, 2, np.random.default_rng(0))
    >>> ref.alpha.shape
    (3, 5)
    >>> bool(np.all(np.diff(ref.alpha, axis=1) >= 0) and np.all(np.diff(ref.beta, axis=1) <= 0))
    True
    """
    if not (isinstance(n_curves, int | np.integer) and n_curves >= 1):
        raise InvalidInput("n_curves", f"is {n_curves!r}, must be a positive integer")
    if not (isinstance(depth, int | np.integer) and 1 <= depth <= _MAX_DEPTH):
        raise InvalidInput("depth", f"is {depth!r}, must be an integer in [1, {_MAX_DEPTH}]")
    alpha = _split_levels(int(n_curves), int(depth), rng)
    tpr = _split_levels(int(n_curves), int(depth), rng)
    return DBTReference(alpha=alpha, tpr=tpr, depth=int(depth))


def root_draws_match(ref: DBTReference, seed: int) -> bool:
    """Whether the roots of ``ref``'s curves (the level-1 points, drawn first: the
    first G draws of each array, alpha then recall) are those of ``default_rng(seed)``.

    A cheap check (2 G draws) that stored curves are those a build with this numpy
    would draw, without drawing all G (2^d - 1) points of each array.
    """
    g, root = ref.n_curves, ref.n_points // 2
    bits = np.random.PCG64(seed)  # default_rng's bit generator
    rng = np.random.Generator(bits)
    alpha_roots = rng.random(g)
    bits.advance(g * (ref.n_points - 3))  # past alpha's other points: one step per draw
    tpr_roots = rng.random(g)
    return bool(
        np.array_equal(ref.alpha[:, root], alpha_roots)
        and np.array_equal(ref.tpr[:, root], tpr_roots)
    )


class CurveStore(Protocol):
    """Where a process reads reference curves it has not built yet (the worker's
    :class:`app.worker.node_store.CurveDirectory`)."""

    def reference(
        self, depth: int, n_curves: int, seed: int, build: Callable[[], DBTReference]
    ) -> DBTReference:
        """The stored reference (read-only arrays), else ``build()`` (then stored)."""
        ...


_REFERENCES: dict[tuple[int, int, int], DBTReference] = {}
"""The process's references, by (depth, n_curves, seed): one or two in a process."""


def dbt_reference(
    depth: int = DEFAULT_DEPTH,
    n_curves: int = DEFAULT_N_CURVES,
    seed: int = DEFAULT_SEED,
    store: CurveStore | None = None,
) -> DBTReference:
    """The reference curves for (depth, n_curves, seed), built once per process.

    The arrays are read-only so that no caller can alter the cached reference.
    With ``store``, a reference this process has not built yet is read from it
    (which keeps the one it builds): the same bytes as a build.

    >>> dbt_reference(2, 10, 1) is dbt_reference(depth=2, n_curves=10, seed=1)
    True
    """
    key = (depth, n_curves, seed)
    ref = _REFERENCES.get(key)
    if ref is None:

        def build() -> DBTReference:
            return _read_only(sample_dbt(n_curves, depth, np.random.default_rng(seed)), seed)

        ref = build() if store is None else store.reference(depth, n_curves, seed, build)
        ref = _REFERENCES.setdefault(key, ref)
    return ref


def _read_only(ref: DBTReference, seed: int) -> DBTReference:
    ref.alpha.flags.writeable = False
    ref.tpr.flags.writeable = False
    return DBTReference(alpha=ref.alpha, tpr=ref.tpr, depth=ref.depth, seed=seed)


def monte_carlo_standard_error(ops: float, n_curves: int) -> float:
    """Standard error of an OPS value ``ops`` estimated as a fraction of ``n_curves`` curves.

    ``sqrt(ops * (1 - ops) / G)``: the binomial standard error of the fraction.

    >>> round(monte_carlo_standard_error(0.5, 20_000), 4)
    0.0035
    """
    p = check_probability("ops", ops, open_interval=False)
    if n_curves < 1:
        raise InvalidInput("n_curves", f"is {n_curves!r}, must be a positive integer")
    return math.sqrt(p * (1.0 - p) / n_curves)
