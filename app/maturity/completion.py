"""Completion of a partially labelled window: its whole class histograms (docs/maturity.md).

A window holds every prediction's score without its label (the unlabelled
histogram u) and, as labels arrive, the labelled histograms p (positives) and
q (negatives) of some of those same predictions. The remainder
v = u - p - q are the rows still waiting for their label. Under a stated
assumption about how labels arrive, :func:`complete` splits v between the
classes and returns the completed per-class histograms h1 = p + (v's
positives), h0 = q + (v's negatives), from which every metric follows
(:mod:`app.maturity.metrics`).

* ``class``: labels arrive depending on the class only. The labelled
  positives are a random sample of the window's positives (and so for the
  negatives), so f1 = p / P_L and f0 = q / Q_L are the class-conditional
  score distributions, and v is the mixture pi_v f1 + (1 - pi_v) f0. pi_v is
  the grouped maximum-likelihood prior of the label-free estimate
  (:mod:`app.estimation`) with the window's own labelled rows as its
  reference, then h1 = p + pi_v V f1, h0 = q + (1 - pi_v) V f0.
* ``score``: labels arrive depending on the score only. Inside a group of
  consecutive bins the labelled rows are a random sample of the group's rows,
  so the group's labelled share of positives rho_g = p_g / (p_g + q_g) splits
  its remainder: h1_b = p_b + rho_g v_b, h0_b = q_b + (1 - rho_g) v_b.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from app.drift.histograms import FloatArray
from app.drift.two_sample import coarsen, quantile_bin_starts
from app.errors import InvalidInput
from app.estimation.fit import mixture_fit_test
from app.estimation.prior import ml_prior
from app.estimation.reference import GROUPS, GroupedClasses
from app.estimation.sampling import GroupedSampling, debiasing_map
from app.metrics.validation import check_class_histograms, check_count, check_probability

IntArray = npt.NDArray[np.intp]

Assumption = Literal["class", "score"]
"""How labels arrive: depending on the class only, or on the score only."""

ASSUMPTIONS: tuple[str, ...] = ("class", "score", "none")
"""The values of a model's ``label_missingness`` setting (``none``: no completion)."""

NO_SCORES = "no-scores"
"""Reason: the window holds no unlabelled (scored) rows."""
NO_LABELS = "no-labels"
"""Reason: the window holds no labelled rows yet."""
LABELS_EXCEED_SCORES = "labels-exceed-scores"
"""Reason: a group of bins holds clearly more labelled rows than scored rows (the
producer does not send each prediction once without its label)."""
CONFUSION_MATRIX_ROWS = "confusion-matrix-rows"
"""Reason (for the caller): the window holds confusion-matrix rows, which carry no scores."""
ONE_CLASS_LABELLED = "one-class-labelled"
"""Reason: under ``class`` the labelled rows hold one class only, so the other
class's score distribution, and the remainder's split, are unknown."""
SAME_CLASS_SCORES = "same-class-scores"
"""Reason: under ``class`` both labelled classes have the same grouped score
distribution, so the remainder's share of positives cannot be told apart."""

TOLERANCE_ROWS = 2.0
"""Labelled rows a group of bins may hold beyond its scored rows (absolute part)."""
TOLERANCE_SHARE = 0.005
"""... and relative part, a share of the group's scored rows: a score stored as
float32 on one side and float64 on the other can land in the neighbouring bin."""

MIN_LABELLED = 20
"""k: labelled rows per group of bins under ``score`` (measured in bench/bench_maturity.py)."""

DEFAULT_LEVEL = 0.95
"""Default coverage of the completed prior's interval."""


@dataclass(frozen=True)
class CompletedPrior:
    """The completed window's prior and its interval at ``level``."""

    value: float
    lower: float
    upper: float
    level: float

    def to_dict(self) -> dict[str, float]:
        """``{"value", "lower", "upper", "level"}``."""
        return {"value": self.value, "lower": self.lower, "upper": self.upper, "level": self.level}


@dataclass(frozen=True)
class CompletionFit:
    """The goodness-of-fit test of the remainder against the fitted mixture (``class`` only).

    Attributes
    ----------
    p_value : float
        Upper tail of the test's statistic (:func:`app.estimation.fit.mixture_fit_test`).
    reliable : bool
        ``p_value >= alpha``: the class assumption is not rejected.
    """

    p_value: float
    reliable: bool

    def to_dict(self) -> dict[str, Any]:
        """``{"p_value", "reliable"}``."""
        return {"p_value": self.p_value, "reliable": self.reliable}


@dataclass(frozen=True)
class Completion:
    """A completed window.

    Attributes
    ----------
    labelled : float
        L, the labelled rows.
    scored : float
        N, the scored (unlabelled) rows.
    completeness : float
        L / (L + V) in [0, 1], V the remainder after the tolerance's clamp:
        L / N when the protocol holds exactly.
    assumption : str
        ``"class"`` or ``"score"``.
    prior : CompletedPrior
        (P_L + the remainder's positives) / (L + V), with its interval.
    positives, negatives : array of float64, shape (J,)
        The completed per-bin positives h1 and negatives h0 (exactly the
        labelled counts where the remainder is empty).
    fit : CompletionFit or None
        Under ``class`` the fit test; ``None`` under ``score`` (its completion
        is saturated: every group's share is fitted, nothing is left to test),
        and where no test is possible (no remainder, fewer than 3 groups).
    group_starts : tuple of int
        First bin of each group of bins the protocol was checked on (and,
        under ``score``, each group whose share splits its remainder).
    """

    labelled: float
    scored: float
    completeness: float
    assumption: str
    prior: CompletedPrior
    positives: FloatArray
    negatives: FloatArray
    fit: CompletionFit | None
    group_starts: tuple[int, ...] = ()


@dataclass(frozen=True)
class NoCompletion:
    """A window that cannot be completed, and why (one of the reason constants)."""

    reason: str


class ClassShare(NamedTuple):
    """The remainder's share of positives under ``class`` (:func:`class_share`).

    Attributes
    ----------
    smoothed : float
        The maximiser of the likelihood on the smoothed groups.
    value : float
        The share on the raw scale, pi_v in [0, 1].
    slope : float
        d value / d smoothed (the debiasing map's slope).
    """

    smoothed: float
    value: float
    slope: float


@dataclass(frozen=True)
class _Rows:
    """A window's checked histograms and their totals."""

    unlabelled: FloatArray
    positives: FloatArray
    negatives: FloatArray
    n_unlabelled: float
    n_positives: float
    n_negatives: float

    @property
    def labelled(self) -> FloatArray:
        out: FloatArray = self.positives + self.negatives
        return out


def bins_of_thresholds(edges: Any, thresholds: Sequence[float]) -> tuple[int, ...]:
    """The bin each threshold begins (``edges[b] == threshold``, or the first edge above it).

    Examples
    --------
    >>> bins_of_thresholds([0.0, 0.25, 0.5, 0.75, 1.0], [0.5, 0.75])
    (2, 3)
    """
    e = np.asarray(edges, dtype=np.float64)
    return tuple(int(b) for b in np.searchsorted(e, np.asarray(thresholds, dtype=np.float64)))


def check_rows(unlabelled: Any, positives: Any, negatives: Any) -> _Rows:
    """The three histograms as float64 with their totals, checked (one dimension, one
    shape, finite, >= 0). Valid rows take one pass each for the minimum and one for the
    total (a total is finite when every count is); others go through the checks of
    :mod:`app.metrics.validation`, which name the faulty input."""
    try:
        u, pos, neg = (np.asarray(a, dtype=np.float64) for a in (unlabelled, positives, negatives))
        sums = (float(u.sum()), float(pos.sum()), float(neg.sum()))
        valid = (
            pos.ndim == 1
            and u.shape == pos.shape == neg.shape
            and min(u.min(), pos.min(), neg.min()) >= 0.0
            and math.isfinite(sum(sums))
        )
    except (TypeError, ValueError):  # not numbers, or no bins (no minimum)
        valid = False
    if not valid:
        pos, neg = check_class_histograms(positives, negatives)
        u = check_count("unlabelled", unlabelled)
        if u.shape != pos.shape:
            raise InvalidInput("unlabelled", f"has shape {u.shape} but positives has {pos.shape}")
        sums = (float(u.sum()), float(pos.sum()), float(neg.sum()))
    return _Rows(u, pos, neg, *sums)


def remainder(
    rows_unlabelled: FloatArray,
    labelled: FloatArray,
    starts: IntArray,
    grouped_labelled: FloatArray | None = None,
) -> FloatArray | None:
    """The remainder v per bin, or ``None`` when a group breaks the protocol.

    A group g whose labelled rows exceed its scored rows by more than
    :data:`TOLERANCE_ROWS` + :data:`TOLERANCE_SHARE` u_g breaks it. Within the
    tolerance, negative remainders are clamped at 0 and the group's clamped
    remainders scaled to sum to max(u_g - L_g, 0), so that rows landing in a
    neighbouring bin leave no phantom remainder.

    Parameters
    ----------
    rows_unlabelled, labelled : arrays of shape (J,)
        u and p + q.
    starts : int array of shape (G,)
        First bin of each group.
    grouped_labelled : array of shape (G,), optional
        ``coarsen(labelled, starts)``, when the caller has it.

    Examples
    --------
    >>> u, lab = np.array([3.0, 5.0, 4.0]), np.array([3.0, 1.0, 5.0])
    >>> remainder(u, lab, np.array([0, 1])).tolist()
    [0.0, 3.0, 0.0]
    """
    grouped_u = coarsen(rows_unlabelled, starts)
    lab_g = coarsen(labelled, starts) if grouped_labelled is None else grouped_labelled
    excess = lab_g - grouped_u
    if np.any(excess > TOLERANCE_ROWS + TOLERANCE_SHARE * grouped_u):
        return None
    v = rows_unlabelled - labelled
    if not v.min() < 0.0:  # the usual case: no bin to clamp
        return v
    negative = v < 0.0
    v[negative] = 0.0
    clamped = coarsen(negative.astype(np.float64), starts) > 0.0
    got = coarsen(v, starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(clamped & (got > 0.0), np.maximum(-excess, 0.0) / got, 1.0)
    sizes = np.diff(np.append(starts, v.shape[0]))
    out: FloatArray = v * np.repeat(scale, sizes)
    return out


def score_group_starts(
    labelled: FloatArray, threshold_bins: Sequence[int], min_labelled: int
) -> IntArray:
    """Groups of consecutive bins with at least ``min_labelled`` labelled rows each.

    The bins are first cut at every threshold bin (a group never spans a
    threshold); each piece is then cut greedily, from its lowest bin, into
    groups that close at the bin where their labelled rows reach
    ``min_labelled``, the piece's last group taking what is left when that is
    fewer. A piece with fewer labelled rows is one group (with none, it
    borrows its neighbours' share, :func:`score_shares`).

    Examples
    --------
    >>> lab = np.array([5.0, 0, 5, 5, 1, 9, 5])
    >>> score_group_starts(lab, [5], 5).tolist()
    [0, 1, 3, 5, 6]
    """
    n_bins = labelled.shape[0]
    bounds = [0, *sorted({int(b) for b in threshold_bins if 0 < b < n_bins}), n_bins]
    pieces: list[IntArray] = []
    for lo, hi in itertools.pairwise(bounds):
        pieces.append(np.array([lo], dtype=np.intp))
        filled = np.flatnonzero(labelled[lo:hi])
        if filled.size == 0:
            continue
        cum = np.cumsum(labelled[lo:hi][filled]).tolist()
        total, closing = cum[-1], list[int]()
        i = bisect_left(cum, min_labelled)
        while i < len(cum) and not total - cum[i] < min_labelled:
            closing.append(i)
            i = bisect_left(cum, cum[i] + min_labelled, i)
        pieces.append(lo + filled[closing] + 1)
    return np.concatenate(pieces).astype(np.intp, copy=False)


def complete(
    unlabelled: Any,
    positives: Any,
    negatives: Any,
    *,
    assumption: Assumption,
    threshold_bins: Sequence[int] = (),
    alpha: float = 0.05,
    level: float = DEFAULT_LEVEL,
    min_labelled: int = MIN_LABELLED,
) -> Completion | NoCompletion:
    """Complete a partially labelled window under an assumption on how its labels arrive.

    Parameters
    ----------
    unlabelled : array_like of shape (J,)
        u: every scored prediction per bin, sent without its label.
    positives, negatives : array_like of shape (J,)
        p, q: the labelled rows per bin so far (labels of some of those predictions).
    assumption : {"class", "score"}
        Labels arrive depending on the class only, or on the score only.
    threshold_bins : sequence of int
        The bin each of the model's thresholds begins (:func:`bins_of_thresholds`):
        under ``score`` no group spans one.
    alpha : float in (0, 1)
        Level of the fit test under ``class`` (the model's drift alpha).
    level : float in (0, 1)
        Coverage of the prior's interval.
    min_labelled : int
        k, labelled rows per group under ``score``.

    Returns
    -------
    Completion or NoCompletion
        NoCompletion with :data:`NO_SCORES`, :data:`NO_LABELS`,
        :data:`LABELS_EXCEED_SCORES`, :data:`ONE_CLASS_LABELLED` or
        :data:`SAME_CLASS_SCORES`.

    Examples
    --------
    >>> c = complete([6, 6], [2, 0], [1, 3], assumption="score")
    >>> c.completeness, c.positives.tolist(), c.negatives.tolist()
    (0.5, [3.0, 1.0], [3.0, 5.0])
    """
    rows = check_rows(unlabelled, positives, negatives)
    alpha = check_probability("alpha", alpha)
    level = check_probability("level", level)
    if isinstance(min_labelled, bool) or not isinstance(min_labelled, int) or min_labelled < 1:
        raise InvalidInput("min_labelled", f"is {min_labelled!r}, must be an integer >= 1")
    if assumption not in ("class", "score"):
        raise InvalidInput("assumption", f"is {assumption!r}, must be 'class' or 'score'")
    if not rows.n_unlabelled > 0.0:
        return NoCompletion(NO_SCORES)
    if not rows.n_positives + rows.n_negatives > 0.0:
        return NoCompletion(NO_LABELS)
    labelled = rows.labelled
    if assumption == "class":
        return _complete_class(rows, labelled, alpha, level)
    starts = score_group_starts(labelled, threshold_bins, min_labelled)
    return _complete_score(rows, labelled, starts, level)


def class_share(classes: GroupedClasses, grouped_remainder: FloatArray) -> ClassShare:
    """The remainder's share of positives under ``class``: the grouped maximum-likelihood
    prior of :mod:`app.estimation.prior` with the labelled rows as reference, carried to
    the raw groups' scale by :func:`app.estimation.sampling.debiasing_map`."""
    smoothed = ml_prior(grouped_remainder, classes.f_positive, classes.f_negative)
    offset, slope = debiasing_map(classes, smoothed)
    return ClassShare(smoothed, _clip(offset + slope * smoothed), slope)


def class_spread(
    classes: GroupedClasses, share: ClassShare, total: float
) -> tuple[GroupedSampling, float]:
    """The sampling model at the share and the share's standard error: the remainder's
    own sampling and the labelled rows' error in f1 and f0 (:mod:`app.estimation.sampling`)."""
    sampling = GroupedSampling.at(classes, share.smoothed, total)
    variance = sampling.window_variance + sampling.reference_variance
    return sampling, share.slope * math.sqrt(variance)


def class_histograms(
    positives: FloatArray, negatives: FloatArray, share: float | FloatArray, total: float
) -> tuple[FloatArray, FloatArray]:
    """h1 = p (1 + share V / P_L), h0 = q (1 + (1 - share) V / Q_L): the labelled
    histograms scaled, so that every class-conditional rate is the labelled one.

    Rows of 2-D ``positives`` and ``negatives`` are windows, each with its element of
    ``share``.
    """
    s = np.asarray(share, dtype=np.float64)[..., None]
    n_pos = positives.sum(axis=-1, keepdims=True)
    n_neg = negatives.sum(axis=-1, keepdims=True)
    return (
        positives * (1.0 + s * total / n_pos),
        negatives * (1.0 + (1.0 - s) * total / n_neg),
    )


def _labelled_only(rows: _Rows, assumption: str, starts: IntArray) -> Completion:
    labelled = rows.n_positives + rows.n_negatives
    prior = rows.n_positives / labelled
    return Completion(
        labelled=labelled,
        scored=rows.n_unlabelled,
        completeness=1.0,
        assumption=assumption,
        prior=CompletedPrior(prior, prior, prior, DEFAULT_LEVEL),
        positives=rows.positives.copy(),
        negatives=rows.negatives.copy(),
        fit=None,
        group_starts=tuple(starts.tolist()),
    )


def _complete_class(
    rows: _Rows, pooled: FloatArray, alpha: float, level: float
) -> Completion | NoCompletion:
    n_pos, n_neg = rows.n_positives, rows.n_negatives
    classes = None
    if n_pos > 0.0 and n_neg > 0.0:
        try:
            classes = GroupedClasses.from_bins(rows.positives, rows.negatives)
        except InvalidInput:
            return NoCompletion(SAME_CLASS_SCORES)
    # the protocol is checked on the groups of the likelihood (equal labelled mass)
    if classes is None:
        starts = quantile_bin_starts(pooled, GROUPS)
        v = remainder(rows.unlabelled, pooled, starts)
    else:
        starts = classes.starts
        v = remainder(rows.unlabelled, pooled, starts, classes.positives + classes.negatives)
    if v is None:
        return NoCompletion(LABELS_EXCEED_SCORES)
    total = float(v.sum())
    if total == 0.0:
        return _labelled_only(rows, "class", starts)
    if classes is None:
        return NoCompletion(ONE_CLASS_LABELLED)
    counts = classes.grouped(v)
    share = class_share(classes, counts)
    sampling, spread = class_spread(classes, share, total)
    from scipy import special  # on first use: scipy.special is not a start-up import

    half = float(special.ndtri((1.0 + level) / 2.0)) * spread
    labelled = n_pos + n_neg
    whole = labelled + total

    def prior_at(s: float) -> float:
        return (n_pos + _clip(s) * total) / whole

    test = mixture_fit_test(counts, sampling)
    h1, h0 = class_histograms(rows.positives, rows.negatives, share.value, total)
    return Completion(
        labelled=labelled,
        scored=rows.n_unlabelled,
        completeness=labelled / whole,
        assumption="class",
        prior=CompletedPrior(
            prior_at(share.value),
            prior_at(share.value - half),
            prior_at(share.value + half),
            level,
        ),
        positives=h1,
        negatives=h0,
        fit=None if test.p_value is None else CompletionFit(test.p_value, test.p_value >= alpha),
        group_starts=tuple(starts.tolist()),
    )


def score_shares(positives: FloatArray, labelled: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per group: the share of positives among the labelled rows and their count;
    a group without labelled rows pools its nearest labelled neighbours on each side."""
    count = len(labelled)
    idx = np.arange(count)
    has = labelled > 0.0
    left = np.maximum.accumulate(np.where(has, idx, -1))
    right = np.minimum.accumulate(np.where(has, idx, count)[::-1])[::-1]
    pos_pad, lab_pad = np.append(positives, 0.0), np.append(labelled, 0.0)
    lr, rr = np.where(left < 0, count, left), right
    pooled_pos = np.where(has, positives, pos_pad[lr] + pos_pad[rr])
    pooled_lab = np.where(has, labelled, lab_pad[lr] + lab_pad[rr])
    share: FloatArray = pooled_pos / pooled_lab
    return share, pooled_lab


def _complete_score(
    rows: _Rows, labelled: FloatArray, starts: IntArray, level: float
) -> Completion | NoCompletion:
    group_lab = coarsen(labelled, starts)
    v = remainder(rows.unlabelled, labelled, starts, group_lab)
    if v is None:
        return NoCompletion(LABELS_EXCEED_SCORES)
    total = float(v.sum())
    if total == 0.0:
        return _labelled_only(rows, "score", starts)
    share, n_share = score_shares(coarsen(rows.positives, starts), group_lab)
    sizes = np.diff(np.append(starts, labelled.shape[0]))
    positives_v = np.repeat(share, sizes) * v  # the remainder's positives per bin
    h1 = rows.positives + positives_v
    h0 = rows.negatives + (v - positives_v)
    n_pos, n_lab = rows.n_positives, rows.n_positives + rows.n_negatives
    whole = n_lab + total
    v_g = coarsen(v, starts)
    value = (n_pos + float(np.dot(share, v_g))) / whole
    half = _score_prior_half_width(n_share, share, v_g, level) / whole
    return Completion(
        labelled=n_lab,
        scored=rows.n_unlabelled,
        completeness=n_lab / whole,
        assumption="score",
        prior=CompletedPrior(value, max(value - half, 0.0), min(value + half, 1.0), level),
        positives=h1,
        negatives=h0,
        fit=None,
        group_starts=tuple(starts.tolist()),
    )


def _score_prior_half_width(
    n_share: FloatArray, share: FloatArray, v_g: FloatArray, level: float
) -> float:
    """Normal half-width of the remainder's positives: per group, the share's sampling
    error (v_g^2 r (1 - r) / n_g) and the remainder's own binomial split (v_g r (1 - r)),
    r smoothed by a Jeffreys half count so that a group at 0 or 1 still counts."""
    r = (share * n_share + 0.5) / (n_share + 1.0)
    spread = r * (1.0 - r)
    variance = float(np.sum(v_g * v_g * spread / n_share + v_g * spread))
    from scipy import special  # on first use: scipy.special is not a start-up import

    return float(special.ndtri((1.0 + level) / 2.0)) * math.sqrt(variance)


def _clip(value: float) -> float:
    return min(max(value, 0.0), 1.0)
