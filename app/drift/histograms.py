"""Per-class score histograms of one window (or of a whole reference period)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from app.errors import InvalidInput
from app.metrics.binning import check_bin_edges
from app.metrics.curves import CurveCounts, cumulative_counts_from_running_totals

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _check_counts(counts: object, n_bins: int, field: str) -> FloatArray:
    c = np.array(counts, dtype=np.float64)
    if c.ndim != 1 or c.shape[0] != n_bins:
        raise InvalidInput(field, f"must be a one-dimensional array of {n_bins} bin counts")
    if not np.all(np.isfinite(c)) or np.any(c < 0.0) or np.any(c != np.floor(c)):
        raise InvalidInput(field, "must hold whole numbers >= 0 (examples per bin)")
    c.flags.writeable = False
    return c


@dataclass(frozen=True, slots=True, eq=False)
class WindowHistograms:
    """Score histograms of the two classes over shared bin edges.

    Parameters
    ----------
    positives : array of shape (J,)
        ``positives[j]`` = number of actual positives with score in bin j,
        ``[edges[j], edges[j+1])`` (the last bin is closed at ``edges[J]``).
    negatives : array of shape (J,)
        The same for actual negatives.
    edges : array of shape (J + 1,)
        Strictly increasing scores from 0.0 to 1.0
        (``app.metrics.binning.check_bin_edges``).

    The arrays are validated, copied to float64 and made read-only; bad input
    raises :class:`~app.errors.InvalidInput` naming the field.

    Examples
    --------
    >>> h = WindowHistograms([1, 3], [5, 1], [0.0, 0.5, 1.0])
    >>> h.n_positives, h.n_negatives, h.prior
    (4.0, 6.0, 0.4)
    """

    positives: FloatArray
    negatives: FloatArray
    edges: FloatArray
    _totals: tuple[FloatArray, FloatArray] | None = field(default=None, init=False, repr=False)
    _sizes: tuple[float, float] = field(default=(0.0, 0.0), init=False, repr=False)

    def __init__(self, positives: object, negatives: object, edges: object) -> None:
        e = np.array(check_bin_edges(edges), dtype=np.float64)
        e.flags.writeable = False
        j = e.shape[0] - 1
        object.__setattr__(self, "edges", e)
        object.__setattr__(self, "positives", _check_counts(positives, j, "positives"))
        object.__setattr__(self, "negatives", _check_counts(negatives, j, "negatives"))
        self._summed()

    @classmethod
    def of_counts(
        cls, positives: IntArray, negatives: IntArray, edges: FloatArray
    ) -> WindowHistograms:
        """From stored integer counts (whole, >= 0 by construction) over checked edges
        (a model's): the same histograms as the constructor, whose validation of the
        values is skipped; the shapes are still checked."""
        hists = object.__new__(cls)
        n_bins = edges.shape[0] - 1
        for name, values in (("edges", edges), ("positives", positives), ("negatives", negatives)):
            a = np.array(values, dtype=np.float64)
            if name != "edges" and a.shape != (n_bins,):
                raise InvalidInput(name, f"must be a one-dimensional array of {n_bins} bin counts")
            a.flags.writeable = False
            object.__setattr__(hists, name, a)
        hists._summed()
        return hists

    def _summed(self) -> None:
        """Set the class sizes (read by every test) once; the running totals on demand."""
        object.__setattr__(
            self, "_sizes", (float(self.positives.sum()), float(self.negatives.sum()))
        )
        object.__setattr__(self, "_totals", None)

    def running_totals(self) -> tuple[FloatArray, FloatArray]:
        """``np.cumsum`` of the positives and of the negatives (computed once, read-only)."""
        if self._totals is None:
            totals = np.cumsum(self.positives), np.cumsum(self.negatives)
            for t in totals:
                t.flags.writeable = False
            object.__setattr__(self, "_totals", totals)
        assert self._totals is not None
        return self._totals

    def curve(self) -> CurveCounts:
        """The cumulative counts over the thresholds (one point per non-empty bin), as
        :func:`~app.metrics.curves.cumulative_counts_from_histograms` gives them."""
        return cumulative_counts_from_running_totals(
            self.positives, self.negatives, self.running_totals(), self.edges
        )

    @property
    def n_positives(self) -> float:
        """P, the number of actual positives."""
        return self._sizes[0]

    @property
    def n_negatives(self) -> float:
        """N, the number of actual negatives."""
        return self._sizes[1]

    @property
    def n(self) -> float:
        """P + N."""
        return self.n_positives + self.n_negatives

    @property
    def prior(self) -> float:
        """pi = P / n (nan for an empty window)."""
        return self.n_positives / self.n if self.n else float("nan")

    @classmethod
    def pooled(cls, windows: Iterable[WindowHistograms]) -> WindowHistograms:
        """The sum of windows over the same edges (e.g. a reference period).

        Raises ``InvalidInput("windows", ...)`` when there is no window or the
        edges differ.
        """
        items = list(windows)
        if not items:
            raise InvalidInput("windows", "must contain at least one window")
        edges = items[0].edges
        if any(not np.array_equal(w.edges, edges) for w in items[1:]):
            raise InvalidInput("windows", "must all share the same bin edges")
        return cls(
            np.sum([w.positives for w in items], axis=0),
            np.sum([w.negatives for w in items], axis=0),
            edges,
        )
