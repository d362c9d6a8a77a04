"""The completion of a partially labelled window: protocol, both assumptions, the fit test."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.drift.simulation import BinormalStream
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
from app.maturity.simulation import class_rates, deliver_labels
from app.metrics.binning import default_bin_edges
from unit.maturity._windows import EDGES, THRESHOLD_BINS, class_windows, score_windows


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


# complete() on the seeded windows of _golden_windows, computed before its speed-up
# (issue 22): (completeness, prior value, lower, upper, fit p-value or -1, sum of h1, h1 and h0
# weighted by a ramp over the bins, number and sum of the group starts)
GOLDEN = {
    "100-class-0.2-class": (
        0.2031,
        0.04942014333219941,
        0.04609883302472192,
        0.0527414536396769,
        0.41359279956944434,
        988.4028666439881,
        622.7092578283384,
        10259.4415713653,
        12,
        636,
    ),
    "100-class-0.2-score": (
        0.2031,
        0.07415656912258967,
        0.0699215832179193,
        0.07839155502726003,
        -1.0,
        1483.1313824517933,
        917.5752048464765,
        9967.711923866394,
        21,
        1170,
    ),
    "100-class-1.0-class": (
        0.999950002499875,
        0.05034748302617975,
        0.05034748262586871,
        0.05035893748463301,
        0.7527674280558798,
        1007.0000080066213,
        633.3762426597143,
        10252.074402455677,
        12,
        618,
    ),
    "100-class-1.0-score": (
        0.999950002499875,
        0.050347604077286015,
        0.050342583743171146,
        0.050352624411400884,
        -1.0,
        1007.0024291497975,
        633.3775844790957,
        10252.087762055558,
        23,
        1287,
    ),
    "100-score-0.2-class": (
        0.1048,
        0.04019176830576707,
        0.03845,
        0.046431304121868446,
        3.485986389512853e-101,
        803.8353661153412,
        512.7349612855353,
        10764.587296242571,
        15,
        839,
    ),
    "100-score-0.2-score": (
        0.1048,
        0.055413663174260365,
        0.047563790008784634,
        0.0632635363397361,
        -1.0,
        1108.2732634852073,
        692.730910150823,
        10199.526515591751,
        20,
        1130,
    ),
    "100-score-1.0-class": (
        0.30245,
        0.045271400467932155,
        0.04515,
        0.04706926496628294,
        5.566615531286521e-57,
        905.4280093586431,
        574.5307693563084,
        10418.056612741846,
        13,
        697,
    ),
    "100-score-1.0-score": (
        0.30245,
        0.051043189478666255,
        0.04885591269554256,
        0.05323046626178995,
        -1.0,
        1020.8637895733251,
        641.7823933998072,
        10251.494834322966,
        22,
        1239,
    ),
    "10000-class-0.2-class": (
        0.1968,
        0.048276396527029794,
        0.04470365977415654,
        0.05184913327990305,
        0.782125275440825,
        965.5279305405959,
        604.9850639260444,
        10459.439622478643,
        20,
        106458,
    ),
    "10000-class-0.2-score": (
        0.1968,
        0.07587327976371455,
        0.06985834116899306,
        0.08188821835843604,
        -1.0,
        1517.465595274291,
        932.2950872658032,
        10135.652717953673,
        179,
        999696,
    ),
    "10000-class-1.0-class": (
        1.0,
        0.0492,
        0.0492,
        0.0492,
        -1.0,
        984.0,
        614.6014398560144,
        10454.25387461254,
        20,
        105028,
    ),
    "10000-class-1.0-score": (
        0.999950002499875,
        0.04919754012299385,
        0.04918353816403576,
        0.049211542081951935,
        -1.0,
        984.0,
        614.6014398560144,
        10454.803219678033,
        729,
        4034349,
    ),
    "10000-score-0.2-class": (
        0.1024,
        0.04049258538511315,
        0.03805,
        0.046235396679362765,
        5.690728239297548e-98,
        809.851707702263,
        511.39171096363907,
        10878.206854589716,
        20,
        112332,
    ),
    "10000-score-0.2-score": (
        0.1024,
        0.05016753999623565,
        0.03947178896125579,
        0.0608632910312155,
        -1.0,
        1003.350799924713,
        626.192947137622,
        10447.903843183347,
        97,
        566570,
    ),
    "10000-score-1.0-class": (
        0.29565,
        0.041078106044233,
        0.0409,
        0.042688117084262234,
        1.8690887070366912e-62,
        821.5621208846601,
        517.6511861962965,
        10621.456396495689,
        20,
        107125,
    ),
    "10000-score-1.0-score": (
        0.29565,
        0.04576144779418205,
        0.04190476507130509,
        0.04961813051705901,
        -1.0,
        915.228955883641,
        571.9358990879357,
        10498.279379384217,
        265,
        1490654,
    ),
}


def _golden_windows() -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]]:
    """On 100 and 10,000 bins, ``class`` and ``score`` data at completeness 20% and
    (nearly) 100%, each with one labelled negative moved to the next bin (a clamp)."""
    thresholds = (0.5, 0.3)
    for n_bins in (100, 10_000):
        edges = default_bin_edges(thresholds, n_bins=n_bins)
        stream = BinormalStream(edges, mu_positive=1.0, mu_negative=-2.0)
        threshold_bins = bins_of_thresholds(edges, thresholds)
        rng = np.random.default_rng(2026)
        for data in ("class", "score"):
            for completeness in (0.2, 1.0):
                full = stream.window(rng, n=20_000, prior=0.05)
                if data == "class":
                    w = deliver_labels(rng, full, *class_rates(0.05, completeness))
                else:
                    speed = completeness / 0.2
                    rates = np.where(edges[:-1] >= 0.5, min(1.0, 0.9 * speed), 0.05 * speed)
                    w = deliver_labels(rng, full, rates, rates)
                q = w.negatives.copy()
                j = int(np.flatnonzero(q)[len(np.flatnonzero(q)) // 2])
                q[j] -= 1
                q[j + 1] += 1
                name = f"{n_bins}-{data}-{completeness}"
                yield name, w.unlabelled, w.positives, q, threshold_bins


def test_completions_equal_those_before_the_speed_up() -> None:
    """complete() was made faster (issue 22): the same completions, to 1e-12."""
    for name, u, p, q, threshold_bins in _golden_windows():
        for assumption in ("class", "score"):
            c = _completed(
                complete(u, p, q, assumption=assumption, threshold_bins=threshold_bins)  # type: ignore[arg-type]
            )
            ramp = np.linspace(0.0, 1.0, u.shape[0])
            got = (
                c.completeness,
                c.prior.value,
                c.prior.lower,
                c.prior.upper,
                -1.0 if c.fit is None else c.fit.p_value,
                float(c.positives.sum()),
                float(c.positives @ ramp),
                float(c.negatives @ ramp),
                len(c.group_starts),
                sum(c.group_starts),
            )
            expected = GOLDEN[f"{name}-{assumption}"]
            assert got == pytest.approx(expected, rel=1e-12, abs=1e-12), (name, assumption)
