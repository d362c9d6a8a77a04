"""Speed of ``evaluate`` and of window metrics, and accuracy of histogram areas.

Prints figures and ratios against baselines measured in the same run:

1. ``evaluate`` on 1,000,000 scores with pi0 and a cost ratio (full set incl.
   OPS, after the OPS reference curves are cached) against scikit-learn's
   average_precision_score + roc_auc_score + f1_score + matthews_corrcoef +
   precision_score + recall_score on the same arrays. Target: ratio <= 0.2.
2. Metrics of one window from histograms (2 x 10,000 bins) through
   ``evaluate_counts``, OPS included. Target: < 10 ms.
3. ROC-AUC and AUC-PR from default-bin histograms against the exact
   per-example values, over calibrated binormal-logit models tempered by 0.5,
   1 and 2, priors 0.5 to 0.001. Target: max error < 1e-3.

Run: ``.venv/bin/python bench/bench_evaluate.py [--accuracy-n N]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from sklearn import metrics as skm

from app.drift.simulation import binormal_scores
from app.metrics import evaluate
from app.metrics.areas import average_precision_from_counts, roc_auc_from_counts
from app.metrics.binning import default_bin_edges, histogram_counts
from app.metrics.confusion import ConfusionCounts
from app.metrics.curves import cumulative_counts, cumulative_counts_from_histograms
from app.metrics.evaluate import evaluate_counts
from app.metrics.probability import ProbabilitySums


def best_of(func: Callable[[], object], repeat: int) -> float:
    """Smallest wall time of ``repeat`` runs, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best


def bench_raw(rng: np.random.Generator) -> None:
    n = 1_000_000
    scores, labels = binormal_scores(rng, n, 0.01, 2.0, 1.0)
    y = labels.astype(np.int64)
    pred = (scores >= 0.5).astype(np.int64)

    def ours() -> object:
        return evaluate(scores, labels, threshold=0.5, pi0=0.05, cost_ratio=0.2)

    def sklearn() -> object:
        return (
            skm.average_precision_score(y, scores),
            skm.roc_auc_score(y, scores),
            skm.f1_score(y, pred),
            skm.matthews_corrcoef(y, pred),
            skm.precision_score(y, pred),
            skm.recall_score(y, pred),
        )

    ours()  # builds and caches the OPS reference curves at this prior
    t_ours, t_sk = best_of(ours, 5), best_of(sklearn, 3)
    print(f"1. evaluate, n = {n:,}, pi0 and cost ratio, OPS included")
    print(f"   priorwatch evaluate      {1e3 * t_ours:8.1f} ms")
    print(f"   scikit-learn (6 metrics) {1e3 * t_sk:8.1f} ms")
    print(f"   ratio                    {t_ours / t_sk:8.3f}   (target <= 0.200)")


def bench_window(rng: np.random.Generator) -> None:
    scores, labels = binormal_scores(rng, 200_000, 0.01, 2.0, 1.0)
    edges = default_bin_edges((0.5,), n_bins=10_000)
    pos, neg = histogram_counts(scores, labels, edges)
    confusion = ConfusionCounts.from_predictions(scores, labels, 0.5)
    sums = ProbabilitySums.from_predictions(scores, labels)

    def window() -> object:
        curve = cumulative_counts_from_histograms(pos, neg, edges)
        return evaluate_counts(curve, confusion, sums, pi0=0.05, cost_ratio=0.2)

    def window_without_ops_baseline() -> object:
        return cumulative_counts_from_histograms(pos, neg, edges)

    window()
    t_window = best_of(window, 50)
    t_curve = best_of(window_without_ops_baseline, 50)
    print(f"2. one window from histograms, {pos.size:,} bins x 2, OPS included")
    print(f"   evaluate_counts          {1e3 * t_window:8.2f} ms   (target < 10 ms)")
    print(f"   of which curve building  {1e3 * t_curve:8.2f} ms   ratio {t_curve / t_window:.2f}")


def bench_accuracy(rng: np.random.Generator, n: int) -> None:
    edges = default_bin_edges()
    rows = []
    for prior in (0.5, 0.1, 0.01, 0.001):
        for s in (0.5, 1.0, 2.0, 3.0, 4.0):
            for temper in (0.5, 1.0, 2.0):
                scores, y = binormal_scores(rng, n, prior, s, temper)
                exact = cumulative_counts(scores, y)
                binned = cumulative_counts_from_histograms(
                    *histogram_counts(scores, y, edges), edges
                )
                err = [
                    abs(float(f(exact.tps, exact.fps)) - float(f(binned.tps, binned.fps)))
                    for f in (roc_auc_from_counts, average_precision_from_counts)
                ]
                rows.append((prior, s, temper, *err))
    print(f"3. histogram (default {edges.size - 1:,} bins) vs exact areas, n = {n:,}")
    print("   prior   max|dROC-AUC|  max|dAUC-PR|   (over s in 0.5..4, temper 0.5..2)")
    for prior in (0.5, 0.1, 0.01, 0.001):
        sel = [r for r in rows if r[0] == prior]
        print(f"   {prior:<6}  {max(r[3] for r in sel):.2e}       {max(r[4] for r in sel):.2e}")
    worst_roc = max(rows, key=lambda r: r[3])
    worst_ap = max(rows, key=lambda r: r[4])
    print(f"   worst ROC-AUC error {worst_roc[3]:.2e} at (prior, s, temper) = {worst_roc[:3]}")
    print(f"   worst AUC-PR  error {worst_ap[4]:.2e} at (prior, s, temper) = {worst_ap[:3]}")
    print("   target: both < 1e-3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accuracy-n", type=int, default=1_000_000)
    args = parser.parse_args()
    rng = np.random.default_rng(20240611)
    bench_raw(rng)
    bench_window(rng)
    bench_accuracy(rng, args.accuracy_n)


if __name__ == "__main__":
    main()
