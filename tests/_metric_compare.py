"""Comparing a stored window's metrics with ``app.metrics.evaluate`` on the raw data.

Shared by the integration and end-to-end tests (tests/ is on sys.path: it holds
the root conftest.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from app.metrics.evaluate import CURVE_METRICS, OPS_METRICS

CURVE_KEYS = frozenset({*CURVE_METRICS, "calibrated_auc_pr"})
"""Curve areas: from histograms, within 1e-3 of the exact value (docs/design.md)."""
CURVE_OPS = frozenset(f"ops_{m}" for m in OPS_METRICS if m in CURVE_METRICS)
"""OPS of curve areas: the OPS of a value within 1e-3, so compared within 0.02."""


def assert_matches_evaluate(
    got: Mapping[str, Any], expected: Mapping[str, Any], *, same_names: bool = True
) -> None:
    """Exact at the threshold and for sums, 1e-3 on curve areas, 0.02 on their OPS.

    ``same_names``: the window carries exactly ``evaluate``'s names; otherwise
    it may carry more (e.g. metrics at other thresholds).
    """
    if same_names:
        assert set(got) == set(expected), set(got) ^ set(expected)
    else:
        assert set(expected) <= set(got), set(expected) - set(got)
    for name, want in expected.items():
        value = got[name]
        if want is None:
            assert value is None, name
        elif name in CURVE_KEYS:
            assert value == pytest.approx(want, abs=1e-3), name
        elif name in CURVE_OPS:
            assert value == pytest.approx(want, abs=0.02), name
        else:
            assert value == pytest.approx(want, rel=1e-9, abs=1e-12), name
