"""A worker's start-up (import and warm-up) does not import scipy.stats (docs/worker.md).

scipy.stats costs about 0.3 s of CPU to import; the functions the worker
used from it have exact scipy.special equivalents, checked here against it.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from scipy import stats

from app.drift.simulation import binormal_bin_probabilities
from app.metrics.uncertainty import JEFFREYS, rate_interval

STARTUP = (
    "import sys\n"
    "from app.worker.runner import warm_up\n"
    "warm_up()\n"
    "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')))\n"
)


def test_worker_start_up_leaves_scipy_stats_unimported() -> None:
    result = subprocess.run(
        [sys.executable, "-c", STARTUP], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_rate_interval_ends_are_the_beta_quantiles() -> None:
    level = 0.95
    tails = [(1.0 - level) / 2.0, (1.0 + level) / 2.0]
    for x, n in [(5, 30), (17, 40), (123, 10_000), (2_500, 7_000)]:
        a, b = x + JEFFREYS, n - x + JEFFREYS
        assert rate_interval(x, n, level) == tuple(float(v) for v in stats.beta.ppf(tails, a, b))


def test_binormal_bin_probabilities_match_the_normal_cdf() -> None:
    edges = np.linspace(0.0, 1.0, 101)
    with np.errstate(divide="ignore"):
        z = np.log(edges) - np.log1p(-edges)
    cdf = stats.norm.cdf(z, loc=-0.7, scale=1.3)
    expected = np.diff(cdf) / np.diff(cdf).sum()
    assert np.array_equal(binormal_bin_probabilities(edges, -0.7, 1.3), expected)
