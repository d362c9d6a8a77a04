"""A worker's start-up (docs/worker.md): the warm-up, and the scipy.special
functions that keep scipy.stats (about 0.3 s of CPU to import) out of it, checked
here against scipy.stats. The start-up in a fresh process is checked in
tests/deploy/test_worker_startup.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import stats

from app.drift.simulation import binormal_bin_probabilities
from app.metrics.dbt import sample_dbt
from app.metrics.ops_scoring import ScoringReference, recall_grid
from app.metrics.uncertainty import JEFFREYS, rate_interval


def test_reference_warm_up_builds_what_a_summary_reads() -> None:
    """The sorted ROC-AUC values; the detail's OPRC tables and KS wait for their first use."""
    ref = ScoringReference(sample_dbt(50, 3, np.random.default_rng(4)))
    ref.warm_up()
    assert sorted(ref._sorted) == ["auc_roc"]
    assert not ref._alpha_sorted and ref._tpr_shifted is None and not ref._nodes
    ref.ops_precision_at_recall(0.5, 0.1, float(recall_grid()[3]))
    assert len(ref._alpha_sorted) == 1


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


def test_warm_up_with_a_node_directory_keeps_the_nodes_there(tmp_path: Path) -> None:
    from app.metrics.ops_scoring import scoring_reference
    from app.worker.runner import warm_up

    reference = scoring_reference()
    try:
        warm_up(str(tmp_path))
        reference.ops_area("auc_lift", 1.5, 0.00071)  # a prior no other test uses
        assert len(list(tmp_path.glob("*-auc_lift-*.npy"))) == 4
    finally:
        reference.store_nodes_in(None)
