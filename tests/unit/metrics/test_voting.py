"""The voting comparison (app/metrics/voting.py) against scikit-learn and by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, matthews_corrcoef, roc_auc_score

from app.errors import InvalidInput
from app.metrics.voting import VOTING_METRICS, vote, vote_from_metrics


def _sklearn_vote(a: np.ndarray, b: np.ndarray, y: np.ndarray, threshold: float) -> int:
    pa, pb = a >= threshold, b >= threshold
    pairs = [
        (roc_auc_score(y, a), roc_auc_score(y, b)),
        (matthews_corrcoef(y, pa), matthews_corrcoef(y, pb)),
        (accuracy_score(y, pa), accuracy_score(y, pb)),
    ]
    # differences within 1e-12 are float noise of equal values: ties
    return sum(0 if abs(x - z) <= 1e-12 else int(np.sign(x - z)) for x, z in pairs)


@st.composite
def shared_traffic(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    n = draw(st.integers(min_value=6, max_value=60))
    seed = draw(st.integers(min_value=0, max_value=2**32 - 1))
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    y[:2] = [True, False]  # both classes present
    # scores on a coarse grid so that ties (and equal metrics) happen
    a = np.round(np.clip(rng.normal(np.where(y, 0.6, 0.4), 0.25), 0, 1), 1)
    b = np.round(np.clip(rng.normal(np.where(y, 0.6, 0.4), 0.25), 0, 1), 1)
    threshold = draw(st.sampled_from([0.3, 0.5, 0.7]))
    return a, b, y.astype(int), threshold


def _mcc_defined(scores: np.ndarray, threshold: float) -> bool:
    pred = scores >= threshold
    return bool(pred.any() and not pred.all())


@given(shared_traffic())
@settings(max_examples=60, deadline=None)
@pytest.mark.slow
def test_vote_matches_sklearn_metrics(
    data: tuple[np.ndarray, np.ndarray, np.ndarray, float],
) -> None:
    a, b, y, t = data
    if not (_mcc_defined(a, t) and _mcc_defined(b, t)):
        return  # sklearn reports 0 for an undefined MCC; covered below
    assert vote(a, b, y, threshold=t) == _sklearn_vote(a, b, y, t)


@given(shared_traffic())
@settings(max_examples=60, deadline=None)
def test_vote_is_antisymmetric_and_zero_against_itself(
    data: tuple[np.ndarray, np.ndarray, np.ndarray, float],
) -> None:
    a, b, y, t = data
    v = vote(a, b, y, threshold=t)
    assert -3 <= v <= 3
    assert vote(b, a, y, threshold=t) == -v
    assert vote(a, a, y, threshold=t) == 0


def test_hand_computed_vote() -> None:
    # a separates perfectly; b: AUC 3/4, MCC 0, accuracy 1/2 at t = 0.5
    assert vote([0.9, 0.8, 0.3, 0.1], [0.9, 0.2, 0.6, 0.1], [1, 1, 0, 0]) == 3


def test_same_decisions_different_ranking_only_auc_votes() -> None:
    # identical predictions at 0.5, so MCC and accuracy tie; a ranks better
    y = [1, 1, 1, 0, 0, 0]
    a = [0.9, 0.8, 0.4, 0.45, 0.2, 0.1]
    b = [0.9, 0.8, 0.1, 0.45, 0.3, 0.2]
    assert vote(a, b, y) == 1
    assert vote(b, a, y) == -1


def test_threshold_changes_the_decision_votes() -> None:
    y = [1, 1, 0, 0]
    a = [0.9, 0.6, 0.55, 0.1]  # AUC 1; at 0.5 one false positive, at 0.58 perfect
    b = [0.9, 0.45, 0.4, 0.1]  # AUC 1; at 0.5 one false negative, at 0.58 too
    assert vote(a, b, y, threshold=0.5) == 0  # mirror errors: MCC and accuracy tie
    assert vote(a, b, y, threshold=0.58) == 2


def test_undefined_mcc_casts_no_vote() -> None:
    y = [1, 1, 0, 0, 0]
    a = [0.9, 0.7, 0.6, 0.2, 0.1]  # AUC 1, one false positive
    b = [0.4, 0.3, 0.2, 0.1, 0.05]  # AUC 1, predicts nothing positive: MCC undefined
    # AUC ties, MCC abstains, accuracy: a 4/5 vs b 3/5
    assert vote(a, b, y) == 1


def test_vote_from_metrics_handles_undefined_values() -> None:
    a = {"auc_roc": 0.9, "mcc": None, "accuracy": 0.8, "f1": 0.1}
    b = {"auc_roc": 0.8, "mcc": 0.4, "accuracy": float("nan")}
    assert vote_from_metrics(a, b) == 1
    assert vote_from_metrics(b, a) == -1


@pytest.mark.parametrize("side", ["metrics_a", "metrics_b"])
def test_vote_from_metrics_requires_all_voting_metrics(side: str) -> None:
    full = dict.fromkeys(VOTING_METRICS, 0.5)
    partial = {"auc_roc": 0.5, "accuracy": 0.5}
    args = (partial, full) if side == "metrics_a" else (full, partial)
    with pytest.raises(InvalidInput, match="mcc") as err:
        vote_from_metrics(*args)
    assert err.value.field == side


@pytest.mark.parametrize(
    ("a", "b", "labels", "field"),
    [
        ([0.2, 1.3], [0.2, 0.3], [0, 1], "scores_a"),
        ([0.2, 0.3], [0.2, float("nan")], [0, 1], "scores_b"),
        ([0.2, 0.3], [0.2, 0.3, 0.4], [0, 1], "labels"),
        ([0.2, 0.3], [0.2, 0.3], [0, 2], "labels"),
    ],
)
def test_vote_rejects_bad_input(
    a: list[float], b: list[float], labels: list[int], field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        vote(a, b, labels)
    assert err.value.field == field


def test_vote_rejects_bad_threshold_and_tolerance() -> None:
    with pytest.raises(InvalidInput) as err:
        vote([0.2, 0.3], [0.2, 0.3], [0, 1], threshold=1.5)
    assert err.value.field == "threshold"
    for bad in (-1e-3, float("nan"), "x"):
        with pytest.raises(InvalidInput) as err:
            vote([0.2, 0.3], [0.2, 0.3], [0, 1], tolerance=bad)  # type: ignore[arg-type]
        assert err.value.field == "tolerance"


def test_tolerance_turns_small_differences_into_ties() -> None:
    a = {"auc_roc": 0.9, "mcc": 0.5 + 1e-13, "accuracy": 0.8}
    b = {"auc_roc": 0.9 + 1e-16, "mcc": 0.5, "accuracy": 0.79}
    assert vote_from_metrics(a, b) == 1
    assert vote_from_metrics(a, b, tolerance=0.0) == 1 + 1 - 1
    assert vote_from_metrics(a, b, tolerance=0.05) == 0
