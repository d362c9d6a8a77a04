"""The reference side of a label-free estimate, built once per reference period.

Under a pure prior shift a window's unlabelled scores are a mixture
``pi f1 + (1 - pi) f0`` of the reference's two class distributions.
:class:`MixtureReference` holds what every window of the period is compared
with: the reference's per-class histograms on the model's bins (for the
thresholds and curves), and the same counts merged into groups of bins of
equal reference mass with a pseudo-count (for the likelihood of the prior).

The model's bins are far finer than a reference period can fill (10,000
bins against a few thousand positives); on them the estimate of the prior is
biased by a few hundredths. On :data:`GROUPS` groups it is not.

The pseudo-count keeps every group probability above 0 (so the likelihood is
finite at every prior), and it must not bias the prior. Added uniformly, it
pulls f1 towards the flat distribution, which is close to f0 when positives
are rare; the mixture then needs more positives to explain the same scores:
pi_hat was biased by about +G c / R1 (+10% at 100 reference positives, +20%
at 50). Here each class's G c pseudo-examples are spread as the pooled
reference is, w = (positives + negatives) / R = rho f1 + (1 - rho) f0 with
rho = R1 / R. Then, with k_y = R_y / (R_y + G c),

    smoothed f1 = f0 + a1 (f1 - f0),  a1 = k1 + (1 - k1) rho,
    smoothed f0 = f0 + a0 (f1 - f0),  a0 = (1 - k0) rho,

both on the segment between the raw f0 and f1, so the smoothed mixture at p
is the raw mixture at pi = a0 + p (a1 - a0): the estimate and its interval
(:func:`app.estimation.sampling.debiasing_map`) are those of the raw group
frequencies, with the prior kept in [a0, a1] where no probability is 0.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from app.drift.histograms import FloatArray, WindowHistograms
from app.drift.two_sample import coarsen, quantile_bin_starts
from app.errors import InvalidInput
from app.metrics._validation import check_count
from app.metrics.curves import CurveCounts, cumulative_counts_from_histograms

GROUPS = 20
"""Number of groups of bins of equal reference mass (fewer when a bin holds more than 1/20)."""

PSEUDO_COUNT = 0.5
"""Pseudo-examples per group of each class, spread as the pooled reference (module docstring)."""


@dataclass(frozen=True, eq=False)
class GroupedClasses:
    """Two classes' counts merged into groups of bins of equal pooled mass, smoothed.

    The grouped half of a :class:`MixtureReference`, built from bin counts
    alone (no edges, no curve) with :meth:`from_bins`: what the likelihood of
    a mixture prior (:mod:`app.estimation.prior`), its sampling model
    (:class:`~app.estimation.sampling.GroupedSampling`) and the debiasing map
    read. The label-maturity completion (:mod:`app.maturity`) builds one from
    a window's own labelled rows.

    Attributes
    ----------
    starts : int array of shape (G,)
        ``starts[g]`` is the first bin of group g; group g runs to
        ``starts[g + 1] - 1`` (the last to bin J - 1). Group k < G ends with
        the first bin at which the cumulative count (both classes) reaches
        k/G of the total (:func:`app.drift.two_sample.quantile_bin_starts`).
    positives, negatives : array of shape (G,)
        Positives / negatives per group (no pseudo-count).
    f_positive, f_negative : array of shape (G,)
        ``(counts + G pseudo_count w) / (total + G pseudo_count)`` per class,
        w the pooled counts' group shares: the smoothed group probabilities
        f1_g and f0_g of the mixture. Each is > 0.
    smoothing : (float, float)
        (a0, a1): the smoothed f0 and f1 are the raw mixtures at priors a0
        and a1 (module docstring).
    """

    starts: npt.NDArray[np.intp]
    positives: FloatArray
    negatives: FloatArray
    f_positive: FloatArray
    f_negative: FloatArray
    smoothing: tuple[float, float]

    @classmethod
    def from_bins(
        cls,
        positives: FloatArray,
        negatives: FloatArray,
        *,
        groups: int = GROUPS,
        pseudo_count: float = PSEUDO_COUNT,
    ) -> GroupedClasses:
        """Group per-class bin counts (checked: finite, >= 0, one shape; both classes present).

        Parameters
        ----------
        positives, negatives : array of shape (J,)
            Examples of each class per bin (weights allowed).
        groups : int
            Wanted number of groups G (>= 2).
        pseudo_count : float
            Added to every group count of each class (> 0).

        Examples
        --------
        >>> pos, neg = np.array([0.0, 1, 3, 6]), np.array([6.0, 3, 1, 0])
        >>> g = GroupedClasses.from_bins(pos, neg, groups=2)
        >>> g.starts.tolist(), g.positives.tolist(), g.n_groups
        ([0, 2], [1.0, 9.0], 2)
        """
        if isinstance(groups, bool) or not isinstance(groups, int) or groups < 2:
            raise InvalidInput("groups", f"is {groups!r}, must be an integer >= 2")
        if not (np.isfinite(pseudo_count) and pseudo_count > 0):
            raise InvalidInput("pseudo_count", f"is {pseudo_count!r}, must be > 0")
        starts = quantile_bin_starts(positives + negatives, groups)
        pos = coarsen(positives, starts)
        neg = coarsen(negatives, starts)
        extra = starts.shape[0] * pseudo_count
        r1, r0 = float(pos.sum()), float(neg.sum())
        pooled = (pos + neg) / (r1 + r0)
        f_positive = (pos + extra * pooled) / (r1 + extra)
        f_negative = (neg + extra * pooled) / (r0 + extra)
        rho, k1, k0 = r1 / (r1 + r0), r1 / (r1 + extra), r0 / (r0 + extra)
        if np.array_equal(f_positive, f_negative):
            raise InvalidInput(
                "reference", "both classes have the same score distribution: no prior to estimate"
            )
        return cls(
            starts=starts,
            positives=pos,
            negatives=neg,
            f_positive=f_positive,
            f_negative=f_negative,
            smoothing=((1.0 - k0) * rho, k1 + (1.0 - k1) * rho),
        )

    @property
    def n_groups(self) -> int:
        """G, the number of groups."""
        return int(self.starts.shape[0])

    @property
    def n_positives(self) -> float:
        """R1, the positives."""
        return float(self.positives.sum())

    @property
    def n_negatives(self) -> float:
        """R0, the negatives."""
        return float(self.negatives.sum())

    def grouped(self, counts: FloatArray) -> FloatArray:
        """Counts of a checked histogram on the same bins, per group, shape (G,)."""
        return coarsen(counts, self.starts)


@dataclass(frozen=True, eq=False)
class MixtureReference(GroupedClasses):
    """A reference period's class distributions, on the bins and on groups of bins.

    Build it with :meth:`from_histograms`; evaluate any number of windows against it.

    Attributes
    ----------
    starts, positives, negatives, f_positive, f_negative, smoothing
        The reference's counts per group, as in :class:`GroupedClasses`.
    edges : array of shape (J + 1,)
        The model's bin edges.
    curve : CurveCounts
        Cumulative reference counts on the model's bins: TPR and FPR at every
        bin edge.
    """

    edges: FloatArray
    curve: CurveCounts

    @classmethod
    def from_histograms(
        cls,
        reference: WindowHistograms,
        *,
        groups: int = GROUPS,
        pseudo_count: float = PSEUDO_COUNT,
    ) -> MixtureReference:
        """Group a reference period's per-class histograms.

        Parameters
        ----------
        reference : WindowHistograms
            The reference period's positives and negatives per bin (the sum
            of its windows); both classes must be present.
        groups : int
            Wanted number of groups G (>= 2).
        pseudo_count : float
            Added to every group count of each class (> 0).

        Examples
        --------
        >>> h = WindowHistograms([0, 1, 3, 6], [6, 3, 1, 0], [0.0, 0.25, 0.5, 0.75, 1.0])
        >>> ref = MixtureReference.from_histograms(h, groups=2)
        >>> ref.starts.tolist(), ref.positives.tolist(), ref.negatives.tolist()
        ([0, 2], [1.0, 9.0], [9.0, 1.0])
        """
        if reference.n_positives <= 0 or reference.n_negatives <= 0:
            raise InvalidInput("reference", "needs examples of both classes")
        grouped = GroupedClasses.from_bins(
            reference.positives, reference.negatives, groups=groups, pseudo_count=pseudo_count
        )
        return cls(
            **{f.name: getattr(grouped, f.name) for f in fields(GroupedClasses)},
            edges=reference.edges,
            curve=cumulative_counts_from_histograms(
                reference.positives, reference.negatives, reference.edges
            ),
        )

    @property
    def n_positives(self) -> float:
        """R1, the reference's positives."""
        return self.curve.positives

    @property
    def n_negatives(self) -> float:
        """R0, the reference's negatives."""
        return self.curve.negatives

    @property
    def prior(self) -> float:
        """The reference's prior R1 / (R1 + R0)."""
        return self.curve.prior

    def check_unlabelled(self, unlabelled: object) -> FloatArray:
        """Validate a window's unlabelled histogram on the model's bins.

        Parameters
        ----------
        unlabelled : array_like of shape (J,)
            ``unlabelled[j]`` = examples without labels with a score in bin j
            (finite, non-negative; weights allowed; not all zero).

        Returns
        -------
        array of float64, shape (J,)
        """
        u = check_count("unlabelled", unlabelled)
        n_bins = self.edges.shape[0] - 1
        if u.ndim != 1 or u.shape[0] != n_bins:
            raise InvalidInput(
                "unlabelled", f"must be a one-dimensional array of {n_bins} bin counts"
            )
        if not u.sum() > 0:
            raise InvalidInput("unlabelled", "is empty (no examples)")
        return u
