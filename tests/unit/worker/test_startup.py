"""A worker's start-up (docs/worker.md): import and warm-up, in a fresh process.

The warm-up builds the prior-free OPS reference only: nodes depend on the
priors of the windows, unknown at start. scipy.stats (about 0.3 s of CPU to
import) stays unimported; the functions the worker used from it have exact
scipy.special equivalents, checked here against it.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from scipy import stats

from app.drift.simulation import binormal_bin_probabilities
from app.metrics.dbt import sample_dbt
from app.metrics.ops_scoring import CURVE_POINTS, ScoringReference, recall_grid
from app.metrics.uncertainty import JEFFREYS, rate_interval

STARTUP = (
    "import sys\n"
    "from app.metrics.ops_scoring import scoring_reference\n"
    "from app.worker.runner import warm_up\n"
    "warm_up()\n"
    "ref = scoring_reference()\n"
    "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')))\n"
    "print(sorted(ref._sorted), len(ref._alpha_sorted), len(ref._nodes))\n"
)


def _start_up() -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", STARTUP], capture_output=True, text=True, check=True
    )
    return result.stdout.splitlines()


def test_worker_start_up_leaves_scipy_stats_unimported() -> None:
    assert _start_up()[0] == "[]"


def test_worker_warm_up_builds_the_prior_free_reference_only() -> None:
    assert _start_up()[1] == f"['auc_roc', 'ks'] {CURVE_POINTS} 0"


def test_reference_warm_up_sorts_the_fprs_of_the_oprc_grid() -> None:
    ref = ScoringReference(sample_dbt(50, 3, np.random.default_rng(4)))
    ref.warm_up()
    assert sorted(ref._alpha_sorted) == recall_grid().tolist()
    assert not ref._nodes


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
