"""The completion of a partially labelled window: protocol, both assumptions, the fit test."""

from __future__ import annotations

import numpy as np
import pytest
from _windows import EDGES, THRESHOLD_BINS, class_windows, score_windows
from hypothesis import given
from hypothesis import strategies as st

from app.drift.two_sample import quantile_bin_starts
from app.errors import InvalidInput
from app.estimation import GROUPS
from app.maturity import (
    LABELS_EXCEED_SCORES,
    NO_LABELS,
    NO_SCORES,
    ONE_CLASS_LABELLED,
    SAME_CLASS_SCORES,
    Completion,
    NoCompletion,
    bins_of_thresholds,
    complete,
)
from app.maturity.completion import TOLERANCE_ROWS, remainder, score_group_starts


def _completed(result: Completion | NoCompletion) -> Completion:
    assert isinstance(result, Completion), result
    return result


@pytest.mark.parametrize("assumption", ["class", "score"])
def test_a_fully_labelled_window_completes_to_its_labelled_counts(assumption: str) -> None:
    rng = np.random.default_rng(1)
    w = next(class_windows(rng, 1, prior=0.05, completeness=1.0))
    c = _completed(
        complete(
            w.positives + w.negatives,
            w.positives,
            w.negatives,
            assumption=assumption,  # type: ignore[arg-type]
            threshold_bins=THRESHOLD_BINS,
        )
    )
    assert np.array_equal(c.positives, w.positives)
    assert np.array_equal(c.negatives, w.negatives)
    prior = w.positives.sum() / (w.positives.sum() + w.negatives.sum())
    assert c.completeness == 1.0
    assert c.prior.value == c.prior.lower == c.prior.upper == prior
    assert c.fit is None


def test_totals_and_prior_of_a_class_completion() -> None:
    rng = np.random.default_rng(2)
    w = next(class_windows(rng, 1, prior=0.1, completeness=0.3))
    c = _completed(complete(w.unlabelled, w.positives, w.negatives, assumption="class"))
    n = w.unlabelled.sum()
    assert c.scored == n
    assert c.labelled == w.positives.sum() + w.negatives.sum()
    assert c.completeness == pytest.approx(c.labelled / n, rel=1e-12)
    assert c.positives.sum() + c.negatives.sum() == pytest.approx(n, rel=1e-12)
    assert c.prior.value == pytest.approx(c.positives.sum() / n, rel=1e-12)
    assert c.prior.lower < c.prior.value < c.prior.upper
    # h1 is p scaled by one factor (the labelled positives' shape), h0 likewise
    ratio1, ratio0 = c.positives / np.where(w.positives > 0, w.positives, np.nan), None
    assert np.nanmax(ratio1) == pytest.approx(np.nanmin(ratio1), rel=1e-12)
    ratio0 = c.negatives / np.where(w.negatives > 0, w.negatives, np.nan)
    assert np.nanmax(ratio0) == pytest.approx(np.nanmin(ratio0), rel=1e-12)
    assert c.fit is not None and c.fit.to_dict() == {
        "p_value": c.fit.p_value,
        "reliable": c.fit.p_value >= 0.05,
    }
    assert c.prior.to_dict() == {
        "value": c.prior.value,
        "lower": c.prior.lower,
        "upper": c.prior.upper,
        "level": 0.95,
    }


def test_score_completion_splits_each_group_by_its_labelled_share() -> None:
    # two groups (k = 3, one threshold at bin 2): shares 1/3 and 3/4
    u = np.array([10.0, 5.0, 8.0, 4.0])
    p = np.array([1.0, 0.0, 2.0, 1.0])
    q = np.array([1.0, 1.0, 1.0, 0.0])
    c = _completed(complete(u, p, q, assumption="score", threshold_bins=[2], min_labelled=3))
    assert c.group_starts == (0, 2)
    v = u - p - q
    share = np.array([1 / 3, 1 / 3, 3 / 4, 3 / 4])
    np.testing.assert_allclose(c.positives, p + share * v, rtol=1e-15)
    np.testing.assert_allclose(c.negatives, q + (1 - share) * v, rtol=1e-15)
    assert c.prior.value == pytest.approx((p.sum() + (share * v).sum()) / u.sum(), rel=1e-15)
    assert c.fit is None


def test_a_group_without_labels_borrows_its_neighbours_share() -> None:
    u = np.array([10.0, 6.0, 10.0])
    p = np.array([1.0, 0.0, 3.0])
    q = np.array([3.0, 0.0, 1.0])
    c = _completed(complete(u, p, q, assumption="score", threshold_bins=[1, 2], min_labelled=2))
    assert c.group_starts == (0, 1, 2)
    assert c.positives[1] == pytest.approx(6.0 * (1 + 3) / (4 + 4))


@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=30),
    st.lists(st.integers(0, 30), max_size=4),
    st.integers(1, 8),
)
def test_score_groups_against_a_plain_greedy_scan(
    counts: list[int], cuts: list[int], k: int
) -> None:
    labelled = np.array(counts, dtype=np.float64)
    starts = score_group_starts(labelled, cuts, k).tolist()
    # independent: walk bin by bin, close a group at k unless fewer than k remain in its piece
    n = len(counts)
    breaks = sorted({c for c in cuts if 0 < c < n})
    expected: list[int] = []
    for lo, hi in zip([0, *breaks], [*breaks, n], strict=True):
        expected.append(lo)
        acc, left = 0, sum(counts[lo:hi])
        for b in range(lo, hi):
            acc += counts[b]
            left -= counts[b]
            if counts[b] and acc >= k and left >= k:
                expected.append(b + 1)
                acc = 0
    assert starts == expected


def test_labels_beyond_the_scores_break_the_protocol() -> None:
    u = np.array([50.0, 50.0, 50.0, 50.0])
    p = np.array([0.0, 10.0, 60.0, 10.0])  # group of bin 2 holds 70 labelled rows for 50 scored
    q = np.array([10.0, 10.0, 10.0, 0.0])
    for assumption in ("class", "score"):
        result = complete(u, p, q, assumption=assumption, threshold_bins=[2], min_labelled=5)  # type: ignore[arg-type]
        assert result == NoCompletion(LABELS_EXCEED_SCORES)


def test_a_neighbouring_bin_within_the_tolerance_is_clamped() -> None:
    # every row labelled; one row's scored copy landed in the next bin (float32 rounding),
    # inside one group of the likelihood's groups
    rng = np.random.default_rng(5)
    w = next(class_windows(rng, 1, prior=0.1, completeness=1.0))
    p, q = w.positives, w.negatives
    starts = quantile_bin_starts(p + q, GROUPS)
    wide = int(np.argmax(np.diff(starts)))  # a group of several bins
    b = int(starts[wide]) + int(np.argmax((p + q)[starts[wide] : starts[wide + 1] - 1] > 0))
    moved = np.zeros_like(p)
    moved[b], moved[b + 1] = -1.0, 1.0
    for assumption in ("class", "score"):
        c = _completed(
            complete(p + q + moved, p, q, assumption=assumption, min_labelled=10**6)  # type: ignore[arg-type]
        )
        assert np.array_equal(c.positives, p) and np.array_equal(c.negatives, q)
    # with a remainder: the clamped group's remainder keeps its total u_g - L_g
    one_group = np.array([0])
    v = remainder(np.array([3.0, 9.0, 10.0]), np.array([4.0, 2.0, 6.0]), one_group)
    assert v is not None
    np.testing.assert_allclose(v, [0.0, 7.0 * 10 / 11, 4.0 * 10 / 11], rtol=1e-15)
    assert v.sum() == pytest.approx(10.0)
    # beyond the tolerance: refused
    too_many = np.array([10.0, 0.0]) + np.array([TOLERANCE_ROWS + 0.1, 0.0])
    assert remainder(np.array([10.0, 0.0]), too_many, one_group) is None


def test_windows_that_cannot_be_completed_say_why() -> None:
    zeros = np.zeros(3)
    u = np.array([5.0, 5.0, 5.0])
    assert complete(zeros, zeros, zeros, assumption="class") == NoCompletion(NO_SCORES)
    assert complete(u, zeros, zeros, assumption="score") == NoCompletion(NO_LABELS)
    one = np.array([1.0, 0.0, 2.0])
    assert complete(u, one, zeros, assumption="class") == NoCompletion(ONE_CLASS_LABELLED)
    # one class, every row labelled: nothing to split, the labelled counts stand
    c = _completed(complete(one, one, zeros, assumption="class"))
    assert np.array_equal(c.positives, one)
    assert complete(u, one, one, assumption="class") == NoCompletion(SAME_CLASS_SCORES)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"assumption": "none"}, "assumption"),
        ({"assumption": "class", "alpha": 1.5}, "alpha"),
        ({"assumption": "class", "level": 0.0}, "level"),
        ({"assumption": "score", "min_labelled": 0}, "min_labelled"),
        ({"assumption": "score", "min_labelled": True}, "min_labelled"),
    ],
)
def test_bad_options_are_refused(kwargs: dict[str, object], field: str) -> None:
    ones = np.ones(3)
    with pytest.raises(InvalidInput) as err:
        complete(ones, ones, ones, **kwargs)  # type: ignore[arg-type]
    assert err.value.field == field


def test_bad_histograms_are_refused() -> None:
    with pytest.raises(InvalidInput) as err:
        complete(np.ones(4), np.ones(3), np.ones(3), assumption="class")
    assert err.value.field == "unlabelled"
    with pytest.raises(InvalidInput):
        complete(np.ones(3), -np.ones(3), np.ones(3), assumption="class")


def test_bins_of_thresholds_are_the_edges_they_begin() -> None:
    assert bins_of_thresholds(EDGES, [0.5, 0.3]) == (
        int(np.flatnonzero(EDGES == 0.5)[0]),
        int(np.flatnonzero(EDGES == 0.3)[0]),
    )


def test_the_fit_test_holds_its_alpha_on_class_data() -> None:
    rng = np.random.default_rng(3)
    flags = [
        not _completed(
            complete(w.unlabelled, w.positives, w.negatives, assumption="class")
        ).fit.reliable  # type: ignore[union-attr]
        for prior, completeness in ((0.05, 0.1), (0.2, 0.3))
        for w in class_windows(rng, 150, prior=prior, completeness=completeness)
    ]
    # 300 windows at alpha 0.05: at most 0.05 + 2.6 standard errors
    assert np.mean(flags) <= 0.05 + 2.6 * np.sqrt(0.05 * 0.95 / len(flags))


def test_the_fit_test_rejects_score_data_completed_as_class() -> None:
    rng = np.random.default_rng(4)
    flags = [
        not _completed(
            complete(w.unlabelled, w.positives, w.negatives, assumption="class")
        ).fit.reliable  # type: ignore[union-attr]
        for w in score_windows(rng, 40, prior=0.05)
    ]
    assert np.mean(flags) > 0.9
