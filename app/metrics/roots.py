"""Brent's root finder, step for step as ``scipy.optimize.brentq`` computes it.

Every refresh with a detail finds a root (the KS interval's DKW quantile,
:mod:`app.metrics.area_intervals`), and the label-free prior finds others
(:mod:`app.estimation.prior`). ``scipy.optimize`` costs 0.27-0.4 s of CPU to
import on the shared 2-core machine (it loads its linear programming,
global optimisers and least squares with it), in every worker process, for
these few lines. :func:`brentq` takes the same steps in the same floating-point
operations, so it returns the same float, bit for bit, as scipy's (checked
against it in tests/unit/metrics/test_roots.py on seeded random problems).

The method (Brent 1973, in the variant of scipy's C code): the root stays
bracketed between the current estimate and a "block" point of the opposite
sign. Each step tries an inverse quadratic extrapolation through the last
three points (a secant when only two are distinct) and keeps it when it is
short enough (under half the step before last and under 1.5 times the
bisection step, less the tolerance); otherwise it bisects. A step never
moves less than the tolerance ``(xtol + rtol |x|) / 2``, and the search
stops when half the bracket is under it or the function is zero.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

XTOL = 2e-12
"""scipy's default absolute tolerance."""
RTOL = 4.0 * sys.float_info.epsilon
"""scipy's default (and smallest allowed) relative tolerance."""
MAXITER = 100
"""scipy's default iteration limit."""


def brentq(
    f: Callable[[float], float],
    a: float,
    b: float,
    *,
    xtol: float = XTOL,
    rtol: float = RTOL,
    maxiter: int = MAXITER,
) -> float:
    """A root of ``f`` in [a, b], where ``f(a)`` and ``f(b)`` differ in sign.

    The value ``scipy.optimize.brentq(f, a, b, xtol=xtol, rtol=rtol,
    maxiter=maxiter)`` returns.

    Raises
    ------
    ValueError
        ``xtol`` not positive, ``rtol`` below :data:`RTOL`, ``maxiter`` negative,
        or ``f(a)`` and ``f(b)`` of the same sign.
    RuntimeError
        No convergence in ``maxiter`` iterations.

    Examples
    --------
    >>> root = brentq(lambda x: x * x - 2.0, 0.0, 2.0)
    >>> abs(root - math.sqrt(2.0)) < 1e-11
    True
    """
    if xtol <= 0.0:
        raise ValueError(f"xtol too small ({xtol:g} <= 0)")
    if rtol < RTOL:
        raise ValueError(f"rtol too small ({rtol:g} < {RTOL:g})")
    if maxiter < 0:
        raise ValueError("maxiter must be non-negative")
    xpre, xcur = float(a), float(b)
    fpre, fcur = float(f(xpre)), float(f(xcur))
    if fpre == 0.0:
        return xpre
    if fcur == 0.0:
        return xcur
    if math.copysign(1.0, fpre) == math.copysign(1.0, fcur):
        raise ValueError("f(a) and f(b) must have different signs")
    xblk = fblk = spre = scur = 0.0
    for _ in range(maxiter):
        if fpre != 0.0 and fcur != 0.0 and math.copysign(1.0, fpre) != math.copysign(1.0, fcur):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2.0
        sbis = (xblk - xcur) / 2.0
        if fcur == 0.0 or abs(sbis) < delta:
            return xcur
        spre, scur = _step(xpre, xcur, xblk, fpre, fcur, fblk, spre, scur, sbis, delta)
        xpre, fpre = xcur, fcur
        if abs(scur) > delta:
            xcur += scur
        else:
            xcur += delta if sbis > 0.0 else -delta
        fcur = float(f(xcur))
    raise RuntimeError(f"failed to converge after {maxiter} iterations, value is {xcur!r}")


def _step(
    xpre: float,
    xcur: float,
    xblk: float,
    fpre: float,
    fcur: float,
    fblk: float,
    spre: float,
    scur: float,
    sbis: float,
    delta: float,
) -> tuple[float, float]:
    """The next (previous step, step): interpolated when short enough, else bisection."""
    if abs(spre) > delta and abs(fcur) < abs(fpre):
        if xpre == xblk:
            stry = -fcur * (xcur - xpre) / (fcur - fpre)
        else:
            dpre = (fpre - fcur) / (xpre - xcur)
            dblk = (fblk - fcur) / (xblk - xcur)
            stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
        if 2.0 * abs(stry) < min(abs(spre), 3.0 * abs(sbis) - delta):
            return scur, stry
    return sbis, sbis
