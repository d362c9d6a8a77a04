"""Drift settings of one model: significance, minimum effects, minimum counts."""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.errors import InvalidInput
from app.metrics.validation import check_probability

MIN_EXPECTED_COUNT = 5.0
"""Smallest expected cell count for which a chi-square approximation is trusted."""


@dataclass(frozen=True, slots=True)
class DriftSettings:
    """How strict the drift verdicts of one model are.

    Parameters
    ----------
    alpha : float
        False-alarm rate per window of each flag (prior, likelihood), in (0, 1).
    min_prior_effect : float
        The prior flag needs ``|pi_window - pi_reference| > min_prior_effect``
        besides ``p < alpha``. Absolute change of pi: choose it per model (e.g. a
        quarter of the reference prior); 0 flags every significant change.
    min_likelihood_effect : float
        The likelihood flag needs a class whose population stability index
        (reference deciles) exceeds this, besides ``p < alpha``. 0.01 is about
        a 0.1 standard-deviation location shift of that class's score.
    min_class_count : int
        A class with fewer examples than this in the window or in the reference
        is not tested: the parts that need it report ``insufficient_data``.
    test_bins : int
        Most bins of the chi-square homogeneity test per class (fewer when the
        counts are small, so that every bin expects at least 5 examples).

    Examples
    --------
    >>> DriftSettings(alpha=0.05).min_class_count
    30
    """

    alpha: float = 0.01
    min_prior_effect: float = 0.0
    min_likelihood_effect: float = 0.01
    min_class_count: int = 30
    test_bins: int = 20

    def __post_init__(self) -> None:
        check_probability("alpha", self.alpha)
        for name in ("min_prior_effect", "min_likelihood_effect"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise InvalidInput(name, f"is {value!r}, must be a finite number >= 0")
        for name, least in (("min_class_count", 1), ("test_bins", 2)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InvalidInput(name, f"is {value!r}, must be an integer >= {least}")
