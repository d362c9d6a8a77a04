"""Benchmark of intervals and expected weighted accuracy (run by `make bench`).

Prints, measured in this run:

* credible intervals of every metric a window reports (prior-invariant and
  calibrated, 4,000 posterior draws shared by all) against one call per
  metric with its own draws (the baseline);
* bootstrap intervals of ROC-AUC and AUC-PR from two
  10,000-bin histograms (B = 1,000, vectorised (B, K) resamples) against a
  loop that rebuilds one curve per resample with
  ``cumulative_counts_from_histograms`` (the baseline, timed on 100 resamples
  and scaled);
* the OPS interval of a credible interval (two OPS evaluations);
* expected weighted accuracy (exact integral) against a Monte-Carlo estimate
  with 10^6 weight draws (the baseline), with their difference.

No assertion: figures only. Usage: ``.venv/bin/python bench/bench_uncertainty.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import _common
import numpy as np

from app.metrics.binning import default_bin_edges, histogram_counts
from app.metrics.confusion import ConfusionCounts
from app.metrics.cost import expected_weighted_accuracy
from app.metrics.curves import (
    average_precision_from_counts,
    cumulative_counts_from_histograms,
    roc_auc_from_counts,
)
from app.metrics.uncertainty import (
    bootstrap_intervals,
    credible_interval,
    credible_intervals,
    ops_interval,
)

RNG = np.random.default_rng(2024)
WINDOW_METRICS = [
    "recall",
    "specificity",
    "balanced_accuracy",
    "informedness",
    "g_mean",
    "precision",
    "f1",
    "mcc",
    "accuracy",
    "cohen_kappa",
    "npv",
    "markedness",
]


def per_call(func: Callable[[], object], repeat: int = 7) -> float:
    """Median wall time of ``func()`` in seconds, over ``repeat`` calls."""
    return _common.per_call(func, repeat)


def bench_credible() -> None:
    counts = ConfusionCounts(tp=420.0, fp=300.0, fn=80.0, tn=9200.0)
    shared = per_call(
        lambda: credible_intervals(counts, WINDOW_METRICS, pi0=0.2, rng=np.random.default_rng(0))
    )
    separate = per_call(
        lambda: [
            credible_interval(counts, m, pi0=0.2, rng=np.random.default_rng(0))
            for m in WINDOW_METRICS
        ]
    )
    print(f"credible intervals, {len(WINDOW_METRICS)} metrics, 4000 draws:")
    print(f"  shared draws     {shared * 1e3:8.2f} ms")
    print(f"  one call each    {separate * 1e3:8.2f} ms   (baseline)")
    print(f"  ratio            {shared / separate:8.3f}")
    ci = credible_interval(counts, "f1", rng=np.random.default_rng(0))
    ops = per_call(lambda: ops_interval("f1", ci, counts.prior))
    print(f"  OPS interval of f1 (2 OPS calls) {ops * 1e3:.2f} ms")


def bench_bootstrap() -> None:
    edges = default_bin_edges()
    n = 100_000
    labels = (RNG.random(n) < 0.05).astype(int)
    scores = 1.0 / (1.0 + np.exp(-RNG.normal(np.where(labels == 1, 1.5, -1.0), 1.5)))
    pos, neg = histogram_counts(scores, labels, edges)
    non_empty = int(np.count_nonzero(pos + neg))

    def vectorised() -> object:
        return bootstrap_intervals(
            pos,
            neg,
            ["auc_roc", "auc_pr"],  # calibrated AUC-PR has a closed form: not resampled
            pi0=0.5,
            rng=np.random.default_rng(0),
            n_resamples=1000,
        )

    def loop(b: int = 100) -> object:
        gen = np.random.default_rng(0)
        out = []
        for _ in range(b):
            rp = gen.multinomial(int(pos.sum()), pos / pos.sum())
            rn = gen.multinomial(int(neg.sum()), neg / neg.sum())
            c = cumulative_counts_from_histograms(rp, rn, edges)
            out.append(
                (
                    roc_auc_from_counts(c.tps, c.fps),
                    average_precision_from_counts(c.tps, c.fps),
                )
            )
        return out

    fast = per_call(vectorised, repeat=3)
    slow = per_call(loop, repeat=3) * 10.0
    print(f"bootstrap, n = {n}, {non_empty} non-empty of {edges.size - 1} bins, B = 1000,")
    print("  ROC-AUC + AUC-PR:")
    print(f"  vectorised (B, K)  {fast * 1e3:8.1f} ms")
    print(f"  loop per resample  {slow * 1e3:8.1f} ms   (baseline, 100 resamples x 10)")
    print(f"  ratio              {fast / slow:8.3f}")


def bench_ewa() -> None:
    cases = [
        ((420, 300, 80, 9200), 2.0, 5.0),
        ((5, 20, 5, 99_970), 0.3, 0.2),
        ((8, 2, 2, 88), 900.0, 100.0),
    ]
    print("expected weighted accuracy (exact) vs Monte-Carlo (10^6 draws):")
    for counts, a, b in cases:
        exact = expected_weighted_accuracy(*counts, a, b)
        t_exact = per_call(lambda c=counts, a=a, b=b: expected_weighted_accuracy(*c, a, b))
        tp, fp, fn, tn = counts

        def monte_carlo(
            tp: float = tp,
            fp: float = fp,
            fn: float = fn,
            tn: float = tn,
            a: float = a,
            b: float = b,
        ) -> float:
            w = np.random.default_rng(1).beta(a, b, 1_000_000)
            return float(np.mean((w * tp + (1 - w) * tn) / (w * (tp + fn) + (1 - w) * (fp + tn))))

        t_mc = per_call(monte_carlo, repeat=3)
        print(
            f"  counts {counts}, Beta({a}, {b}): exact {t_exact * 1e3:6.2f} ms, "
            f"MC {t_mc * 1e3:7.1f} ms (baseline), ratio {t_exact / t_mc:6.3f}, "
            f"|exact - MC| {abs(exact - monte_carlo()):.1e}"
        )


if __name__ == "__main__":
    bench_credible()
    bench_bootstrap()
    bench_ewa()
