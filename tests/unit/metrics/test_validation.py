"""The boundary checks of app.metrics: every rejection names its field."""

from __future__ import annotations

import numpy as np
import pytest

from app.errors import InvalidInput
from app.metrics.validation import (
    check_count,
    check_probability,
    check_scores_labels,
)


@pytest.mark.parametrize(
    ("scores", "labels", "field", "reason"),
    [
        ([[0.1, 0.2]], [1, 0], "scores", "one-dimensional"),
        ([0.1, 0.2], [[1, 0]], "labels", "one-dimensional"),
        ([], [], "scores", "empty"),
        ([0.1, 0.2], [1], "labels", "length 1"),
        ([0.1, np.nan], [1, 0], "scores", "element 1 is not finite"),
        ([0.1, 1.5], [1, 0], "scores", r"outside \[0, 1\]"),
        ([0.1, 0.2], [1, 2], "labels", "must be 0 or 1"),
        ([0.1, 0.2, 0.3], np.array([0, 1, -1]), "labels", "element 2 is -1;"),
        ([0.1, 0.2], np.array([1, 7], dtype=np.uint8), "labels", "element 1 is 7;"),
        ([0.1, 0.2], [0.0, 0.5], "labels", "element 1 is 0.5;"),
        ([0.1, -np.inf], [1, 0], "scores", "element 1 is not finite"),
        ([0.5, -0.25, 2.0], [1, 0, 1], "scores", r"element 1 is -0.25, outside"),
        ([0.1, 0.2], ["a", "b"], "labels", "numbers 0 or 1"),
    ],
)
def test_bad_scores_and_labels_name_the_field(
    scores: object, labels: object, field: str, reason: str
) -> None:
    with pytest.raises(InvalidInput, match=reason) as info:
        check_scores_labels(scores, labels)
    assert info.value.field == field


def test_scores_and_labels_are_normalised() -> None:
    s, y = check_scores_labels([0, 1, 0.5], [True, False, True])
    assert s.dtype == np.float64 and y.dtype == np.bool_
    s, y = check_scores_labels([0.2, 0.4], [1.0, 0.0])
    assert y.tolist() == [True, False]
    for integers in (np.array([1, 0, 1]), np.array([1, 0, 1], dtype=np.uint8)):
        s, y = check_scores_labels([0.0, -0.0, 1.0], integers)
        assert y.dtype == np.bool_ and y.tolist() == [True, False, True]


@pytest.mark.parametrize("value", ["abc", None, float("nan"), 0.0, 1.0, -0.1])
def test_probability_in_the_open_interval(value: object) -> None:
    with pytest.raises(InvalidInput) as info:
        check_probability("pi0", value)  # type: ignore[arg-type]
    assert info.value.field == "pi0"


def test_probability_in_the_closed_interval() -> None:
    assert check_probability("threshold", 0.0, open_interval=False) == 0.0
    assert check_probability("threshold", "1", open_interval=False) == 1.0  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"\[0, 1\]"):
        check_probability("threshold", 1.5, open_interval=False)


@pytest.mark.parametrize(("value", "reason"), [("x", "number"), (np.inf, "finite"), (-1, ">= 0")])
def test_counts_are_finite_and_non_negative(value: object, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason) as info:
        check_count("tp", value)
    assert info.value.field == "tp"
    assert check_count("tp", [0, 2.5]).tolist() == [0.0, 2.5]
