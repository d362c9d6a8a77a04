"""Likelihood shift: have the per-class score distributions P(s|y) moved?

Each class is tested on its own histogram, never on pooled scores: the pooled
score distribution ``pi P(s|y=1) + (1-pi) P(s|y=0)`` moves under a pure prior
shift, the per-class ones do not.

Per class, two tests of "the window's histogram comes from the reference's
distribution", combined by Bonferroni (``p = min(1, 2 min(p_rank, p_chi2))``):

- the Wilcoxon-Mann-Whitney rank-sum test on the fine histogram (examples in
  one bin are ties and share their mid-rank; normal approximation with the tie
  correction), the most powerful simple test against the typical drift, a
  shift of the class's scores up or down;
- Pearson's chi-square test of homogeneity after merging the fine bins (up to
  10,000) into at most ``test_bins`` bins cut at the quantiles of the pooled
  sample (reference + window), so that every bin expects at least
  :data:`~app.drift.settings.MIN_EXPECTED_COUNT` examples of the window and
  of the reference: it catches changes of shape (spread, bimodality) that
  leave the ranks balanced. The cuts depend on the pooled sample only, which
  under "no change" is all that is known: the test keeps its level whatever
  the two sizes. Cuts at the reference's own quantiles do not: when the
  window is much larger than the reference, the reference's sampling noise
  in its quantiles is read as a difference (about 4% false alarms at alpha
  0.01 with a reference 100 times smaller; docs/intervals.md).

The two classes are disjoint samples, so their tests are independent and
Šidák's correction ``1 - (1 - p)^m`` (m = number of classes tested) keeps the
false-alarm rate of "some class moved" at alpha; unlike Fisher's combination
it also says *which* class moved, and it keeps its power when only one class
moves (the common case).

Effect sizes per class: the population stability index over the reference's
deciles (``app.metrics.probability.population_stability_index``) and the
Wasserstein-1 distance on the score and on its logit. The PSI is the effect
compared with ``min_likelihood_effect``; the distances are reported only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.drift.histograms import FloatArray, WindowHistograms
from app.drift.settings import MIN_EXPECTED_COUNT, DriftSettings
from app.drift.two_sample import (
    bin_midpoints,
    chi_square_homogeneity,
    coarsen,
    logit_bin_midpoints,
    quantile_bin_starts,
    rank_sum_test,
    sidak,
    wasserstein_distances,
)
from app.metrics.probability import population_stability_index
from app.statuses import DriftStatus

PSI_BINS = 10
"""The PSI is computed over the reference's deciles, as is customary."""


@dataclass(frozen=True, slots=True)
class ClassShiftTest:
    """Test of one class's score histogram, window against reference.

    ``status`` is ``"ok"`` or ``"insufficient_data"`` (fewer than
    ``min_class_count`` examples of the class in the window or the reference);
    then every statistic and ``flag`` are ``None``.

    Attributes
    ----------
    n_reference, n_window : float
        Examples of the class in the reference and in the window.
    rank_z, rank_p_value : float | None
        Rank-sum test: standardised statistic (negative: window scores lower)
        and two-sided p-value.
    superiority : float | None
        P(window score > reference score), ties one half; 0.5 is no shift.
    chi2_statistic, chi2_p_value : float | None
        Chi-square homogeneity test on the merged bins.
    chi2_bins : int | None
        Its non-empty bins (degrees of freedom + 1).
    p_value : float | None
        This class's p-value: ``min(1, 2 min(rank_p_value, chi2_p_value))``.
    p_adjusted : float | None
        ``p_value`` Šidák-adjusted over the classes tested in this window:
        the number compared with alpha.
    psi : float | None
        Population stability index over the reference's deciles (the effect).
    wasserstein_score, wasserstein_logit : float | None
        Wasserstein-1 distance between the class's score distributions, on the
        score and on its logit (reported, not used by the flag).
    flag : bool | None
        ``p_adjusted < alpha and psi > min_likelihood_effect``.
    """

    status: str
    n_reference: float
    n_window: float
    rank_z: float | None = None
    rank_p_value: float | None = None
    superiority: float | None = None
    chi2_statistic: float | None = None
    chi2_p_value: float | None = None
    chi2_bins: int | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    psi: float | None = None
    wasserstein_score: float | None = None
    wasserstein_logit: float | None = None
    flag: bool | None = None

    @property
    def effect(self) -> float | None:
        """The effect size compared with the minimum effect: the PSI."""
        return self.psi

    def to_dict(self) -> dict[str, Any]:
        """JSON shape: ``{"status", "flag", "p_value", "effect", ...}``.

        ``p_value`` is the adjusted one (compared with alpha);
        ``p_value_unadjusted`` is the class's own.
        """
        return {
            "status": self.status,
            "flag": self.flag,
            "p_value": self.p_adjusted,
            "p_value_unadjusted": self.p_value,
            "effect": self.effect,
            "psi": self.psi,
            "wasserstein_score": self.wasserstein_score,
            "wasserstein_logit": self.wasserstein_logit,
            "superiority": self.superiority,
            "rank_sum": {"z": self.rank_z, "p_value": self.rank_p_value},
            "chi2": {
                "statistic": self.chi2_statistic,
                "p_value": self.chi2_p_value,
                "bins": self.chi2_bins,
            },
            "n_reference": self.n_reference,
            "n_window": self.n_window,
        }


@dataclass(frozen=True, slots=True)
class LikelihoodShiftTest:
    """Likelihood-shift verdict of a window: both classes, combined.

    Attributes
    ----------
    status : str
        ``"ok"`` when at least one class was tested, else ``"insufficient_data"``.
    p_value : float | None
        Smallest Šidák-adjusted class p-value: the p-value of "neither tested
        class moved".
    effect : float | None
        Largest PSI of the tested classes.
    flag : bool | None
        True when some class has ``p_adjusted < alpha`` and
        ``psi > min_likelihood_effect``; then also ``p_value < alpha`` and
        ``effect > min_likelihood_effect``.
    positive, negative : ClassShiftTest
        The per-class tests (y = 1 and y = 0).
    """

    status: str
    p_value: float | None
    effect: float | None
    flag: bool | None
    positive: ClassShiftTest
    negative: ClassShiftTest

    def to_dict(self) -> dict[str, Any]:
        """JSON shape: ``{"status", "flag", "p_value", "effect", "per_class": {...}}``."""
        return {
            "status": self.status,
            "flag": self.flag,
            "p_value": self.p_value,
            "effect": self.effect,
            "effect_measure": "psi",
            "combination": "sidak",
            "per_class": {"positive": self.positive.to_dict(), "negative": self.negative.to_dict()},
        }


def _has_enough(n_reference: float, n_window: float, settings: DriftSettings) -> bool:
    """Both samples hold at least ``min_class_count`` (>= 1) examples of the class."""
    return min(n_reference, n_window) >= settings.min_class_count


def _test_bins(n_reference: float, n_window: float, settings: DriftSettings) -> int:
    most = int(min(n_reference, n_window) // MIN_EXPECTED_COUNT)
    return max(2, min(settings.test_bins, most))


def _class_shift_test(
    reference: FloatArray,
    window: FloatArray,
    totals: tuple[FloatArray, FloatArray],
    midpoints: tuple[FloatArray, FloatArray],
    settings: DriftSettings,
    n_tests: int,
) -> ClassShiftTest:
    """Test one class's fine histogram in the window against the reference's.

    ``totals`` are the running totals of the two histograms (shared by the
    tests; the pooled one is their sum, exact for whole counts);
    ``midpoints`` are the bins' locations on the score and on the logit scale
    (for the Wasserstein distances); ``n_tests`` is the number of classes
    tested in this window, for the Šidák adjustment.
    """
    n_r, n_w = float(reference.sum()), float(window.sum())
    if not _has_enough(n_r, n_w, settings):
        return ClassShiftTest(DriftStatus.INSUFFICIENT_DATA, n_r, n_w)
    cum_r, cum_w = totals
    rank_z, rank_p, superiority = rank_sum_test(reference, window, reference_cumulative=cum_r)
    starts = quantile_bin_starts(
        reference + window, _test_bins(n_r, n_w, settings), cumulative=cum_r + cum_w
    )
    chi2, df, chi2_p = chi_square_homogeneity(coarsen(reference, starts), coarsen(window, starts))
    p_value = min(1.0, 2.0 * min(rank_p, chi2_p))
    p_adjusted = sidak(p_value, n_tests)
    deciles = quantile_bin_starts(reference, PSI_BINS, cumulative=cum_r)
    psi = population_stability_index(coarsen(reference, deciles), coarsen(window, deciles))
    wasserstein_score, wasserstein_logit = wasserstein_distances(
        reference, window, midpoints, cumulatives=(cum_r, cum_w)
    )
    return ClassShiftTest(
        DriftStatus.OK,
        n_r,
        n_w,
        rank_z=rank_z,
        rank_p_value=rank_p,
        superiority=superiority,
        chi2_statistic=chi2,
        chi2_p_value=chi2_p,
        chi2_bins=df + 1,
        p_value=p_value,
        p_adjusted=p_adjusted,
        psi=psi,
        wasserstein_score=wasserstein_score,
        wasserstein_logit=wasserstein_logit,
        flag=p_adjusted < settings.alpha and psi > settings.min_likelihood_effect,
    )


@functools.lru_cache(maxsize=16)
def _midpoints(edges: bytes) -> tuple[FloatArray, FloatArray]:
    """The bins' locations on the score and on the logit scale, by edges (those of a
    few models serve every window)."""
    e = np.frombuffer(edges, dtype=np.float64)
    score, logit = bin_midpoints(e), logit_bin_midpoints(e)
    score.flags.writeable = logit.flags.writeable = False
    return score, logit


def likelihood_shift_test(
    reference: WindowHistograms, window: WindowHistograms, settings: DriftSettings
) -> LikelihoodShiftTest:
    """Test both classes' score histograms of ``window`` against ``reference``.

    Parameters
    ----------
    reference, window : WindowHistograms
        Over the same edges (the caller checks it).
    settings : DriftSettings
        ``alpha``, ``min_likelihood_effect``, ``min_class_count``, ``test_bins``.

    Returns
    -------
    LikelihoodShiftTest

    Examples
    --------
    >>> edges = [0.0, 0.25, 0.5, 0.75, 1.0]
    >>> ref = WindowHistograms([50, 100, 300, 550], [5000, 3000, 800, 200], edges)
    >>> win = WindowHistograms([30, 50, 60, 60], [500, 300, 80, 20], edges)
    >>> r = likelihood_shift_test(ref, win, DriftSettings())
    >>> r.flag, r.positive.flag, r.negative.flag, r.positive.superiority < 0.5
    (True, True, False, True)
    """
    (ref_pos, ref_neg), (win_pos, win_neg) = reference.running_totals(), window.running_totals()
    pairs = (
        (reference.positives, window.positives, (ref_pos, win_pos)),
        (reference.negatives, window.negatives, (ref_neg, win_neg)),
    )
    n_tests = sum(_has_enough(float(r.sum()), float(w.sum()), settings) for r, w, _ in pairs)
    midpoints = _midpoints(reference.edges.tobytes())
    positive, negative = (
        _class_shift_test(r, w, totals, midpoints, settings, max(n_tests, 1))
        for r, w, totals in pairs
    )
    tested = [c for c in (positive, negative) if c.status == DriftStatus.OK]
    if not tested:
        return LikelihoodShiftTest(
            DriftStatus.INSUFFICIENT_DATA, None, None, None, positive, negative
        )
    return LikelihoodShiftTest(
        DriftStatus.OK,
        min(c.p_adjusted for c in tested if c.p_adjusted is not None),
        max(c.psi for c in tested if c.psi is not None),
        any(bool(c.flag) for c in tested),
        positive,
        negative,
    )
