"""Brent's root finder against scipy.optimize.brentq: the same float, bit for bit."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import optimize

from app.metrics.area_intervals import dkw_sum_quantile, dkw_sum_sf
from app.metrics.roots import brentq


def _problems(seed: int, count: int) -> list[tuple[float, float, float, float, float]]:
    """(cubic coefficients c0..c2, bracket end a, b) with a sign change in [a, b]."""
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        c0, c1, c2 = rng.normal(size=3) * rng.choice([1e-3, 1.0, 1e3], size=3)
        a, b = sorted(rng.uniform(-5.0, 5.0, size=2))
        f = _cubic(c0, c1, c2)
        if f(a) * f(b) < 0.0:
            found.append((c0, c1, c2, a, b))
    return found


def _cubic(c0: float, c1: float, c2: float) -> Callable[[float], float]:
    return lambda x: ((x + c2) * x + c1) * x + c0


@pytest.mark.parametrize("xtol", [2e-12, 1e-6, 1e-1])
def test_brentq_returns_scipys_root_bit_for_bit(xtol: float) -> None:
    for c0, c1, c2, a, b in _problems(seed=23, count=400):
        f = _cubic(c0, c1, c2)
        expected = optimize.brentq(f, a, b, xtol=xtol)
        assert brentq(f, a, b, xtol=xtol) == expected


def test_brentq_matches_scipy_on_functions_with_flat_and_steep_parts() -> None:
    rng = np.random.default_rng(7)
    for shift, scale in rng.uniform([-3.0, 0.01], [3.0, 50.0], size=(300, 2)):

        def f(x: float, shift: float = shift, scale: float = scale) -> float:
            return math.tanh(scale * (x - shift)) + 1e-3 * (x - shift)

        assert brentq(f, -10.0, 10.0) == optimize.brentq(f, -10.0, 10.0)


def test_the_dkw_quantile_is_scipys_root() -> None:
    for prob in (0.9, 0.975, 0.995):
        for n_pos, n_neg in ((3, 5), (100, 400), (2_000, 18_000)):
            tail = 1.0 - prob
            u, v = 1.0 / math.sqrt(n_pos), 1.0 / math.sqrt(n_neg)
            upper = (u + v) * math.sqrt(math.log(2.0 / tail) / 2.0)
            expected = optimize.brentq(
                lambda d, a=n_pos, b=n_neg, t=tail: dkw_sum_sf(d, a, b) - t,
                0.0,
                upper,
                xtol=1e-12,
            )
            assert dkw_sum_quantile(prob, n_pos, n_neg) == expected


def test_brentq_refuses_what_scipy_refuses() -> None:
    with pytest.raises(ValueError, match="different signs"):
        brentq(lambda x: x * x + 1.0, -1.0, 1.0)
    with pytest.raises(ValueError, match="xtol"):
        brentq(lambda x: x, -1.0, 1.0, xtol=0.0)
    with pytest.raises(ValueError, match="rtol"):
        brentq(lambda x: x, -1.0, 1.0, rtol=1e-17)
    with pytest.raises(RuntimeError, match="converge"):
        brentq(lambda x: x - 0.3, -1.0, 1.0, maxiter=2)
    assert brentq(lambda x: x, 0.0, 1.0) == 0.0
    with pytest.raises(ValueError, match="maxiter"):
        brentq(lambda x: x, -1.0, 1.0, maxiter=-1)


def test_a_root_at_either_end_is_returned_as_scipy_returns_it() -> None:
    for a, b in ((0.0, 1.0), (-1.0, 0.0)):
        assert brentq(lambda x: x, a, b) == optimize.brentq(lambda x: x, a, b) == 0.0
