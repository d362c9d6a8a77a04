"""Benchmark of the outperformance score (run by `make bench`).

Prints, measured in this run:

* the first build of the DBT reference (d = 8, G = 20,000) and of its
  prior-free parts;
* the per-call time of every scoring metric at priors never seen before
  (interpolation nodes around them already built, the worker's steady state),
  against the exact evaluation of all G reference curves at that prior
  from all their points (the baseline), and the cost of a prior in a region with no nodes yet;
* the error of the interpolated AUC-PR and lift-area OPS against the exact
  evaluation, next to the Monte-Carlo standard error;
* the per-call time of every labeling metric against a brute-force grid
  integration (1000 x 1000 cells) of the same area, and their difference.

No assertion: figures only. Usage: ``.venv/bin/python bench/bench_ops.py``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from typing import cast

import _common
import numpy as np

from app.metrics.confusion import ConfusionCounts
from app.metrics.dbt import (
    DEFAULT_DEPTH,
    DEFAULT_N_CURVES,
    DEFAULT_SEED,
    dbt_reference,
    monte_carlo_standard_error,
    sample_dbt,
)
from app.metrics.labeling import LABELING_METRICS
from app.metrics.ops import outperformance_score
from app.metrics.ops_scoring import LOGIT_STEP, ScoringReference

RNG = np.random.default_rng(2024)


def per_call(func: Callable[[], object], repeat: int = 20) -> float:
    """Median wall time of ``func()`` in seconds, over ``repeat`` calls."""
    return _common.per_call(func, repeat)


def fresh_priors(n: int, low: float, high: float) -> list[float]:
    """Priors with random digits, so that no two calls share one."""
    return [float(p) for p in RNG.uniform(low, high, n)]


def bench_build() -> ScoringReference:
    start = time.perf_counter()
    sample_dbt(DEFAULT_N_CURVES, DEFAULT_DEPTH, np.random.default_rng(DEFAULT_SEED))
    sample_time = time.perf_counter() - start
    start = time.perf_counter()
    ref = ScoringReference(dbt_reference())
    for area in ("auc_roc", "ks"):
        ref.sorted_values(area)
    ref.sorted_alpha_at_recall(0.5)
    prep_time = time.perf_counter() - start
    print(f"DBT sampling, d={DEFAULT_DEPTH}, G={DEFAULT_N_CURVES}: {sample_time:.3f} s")
    print(f"first build incl. sorted ROC-AUC, KS, alpha at one recall: {prep_time:.3f} s")
    return ref


def naive_point(ref: ScoringReference, prior: float, at: float, kind: str) -> np.ndarray:
    """Baseline: precision of every curve at recall or fraction ``at``, from all its points."""
    d = ref.dbt
    x = d.tpr if kind == "recall" else prior * d.tpr + (1.0 - prior) * d.alpha
    rows = np.arange(d.n_curves)
    k = np.count_nonzero(x < at, axis=1)
    w = (at - x[rows, k - 1]) / (x[rows, k] - x[rows, k - 1])
    recall = d.tpr[rows, k - 1] + w * (d.tpr[rows, k] - d.tpr[rows, k - 1])
    alpha = d.alpha[rows, k - 1] + w * (d.alpha[rows, k] - d.alpha[rows, k - 1])
    return prior * recall / (prior * recall + (1.0 - prior) * alpha)


def scoring_call(
    ref: ScoringReference, metric: str, value: float, at: float | None, priors: Iterator[float]
) -> float:
    return outperformance_score(metric, value, next(priors), at=at, reference=ref)


def labeling_call(name: str, value: float, priors: Iterator[float]) -> float:
    return outperformance_score(name, value, next(priors))


def bench_scoring(ref: ScoringReference) -> None:
    low, high = 0.01, 0.5
    start = time.perf_counter()
    for area in ("auc_pr", "auc_lift"):
        ref.interpolated_values(area, 0.3)
    cold = time.perf_counter() - start
    print(f"\ncold prior region (4 nodes each of auc_pr and auc_lift): {cold:.3f} s")
    start = time.perf_counter()
    lo, hi = np.log(low / (1 - low)), np.log(high / (1 - high))
    for s in np.arange(np.floor(lo / LOGIT_STEP) - 1, np.ceil(hi / LOGIT_STEP) + 2) * LOGIT_STEP:
        p = 1.0 / (1.0 + np.exp(-s))
        ref.interpolated_values("auc_pr", p)
        ref.interpolated_values("auc_lift", p)
    print(f"nodes for priors in [{low}, {high}] built in {time.perf_counter() - start:.2f} s")

    cases: list[tuple[str, float, float | None, Callable[[float], object]]] = [
        ("auc_roc", 0.8, None, lambda p: ref.exact_values("auc_roc", p)),
        ("ks", 0.5, None, lambda p: ref.exact_values("ks", p)),
        ("auc_pr", 0.4, None, lambda p: ref.exact_values("auc_pr", p)),
        ("auc_lift", 2.0, None, lambda p: ref.exact_values("auc_lift", p)),
        ("precision_at_recall", 0.4, 0.9, lambda p: naive_point(ref, p, 0.9, "recall")),
        ("precision_at_fraction", 0.4, 0.2, lambda p: naive_point(ref, p, 0.2, "fraction")),
    ]
    print(f"\n{'metric':<24}{'per call (new prior)':>22}{'baseline exact':>17}{'ratio':>9}")
    for metric, value, at, exact in cases:
        priors = iter(fresh_priors(200, low, high))
        call = functools.partial(scoring_call, ref, metric, value, at, priors)
        fast = per_call(call, repeat=50)
        base = per_call(functools.partial(exact, float(RNG.uniform(low, high))), repeat=3)
        print(f"{metric:<24}{fast * 1e3:>19.3f} ms{base * 1e3:>14.1f} ms{base / fast:>8.0f}x")

    print("\ninterpolated vs exact OPS (priors in [0.001, 0.999], 99 quantiles of mu each)")
    se = monte_carlo_standard_error(0.5, ref.n_curves)
    for area in ("auc_pr", "auc_lift"):
        worst_ops, worst_value = 0.0, 0.0
        for p in fresh_priors(6, 0.001, 0.999):
            exact = ref.exact_values(area, p)
            approx = ref.interpolated_values(area, p)
            worst_value = max(worst_value, float(np.max(np.abs(approx - exact))))
            ranked = np.sort(exact)
            for mu in np.quantile(exact, np.linspace(0.01, 0.99, 99)):
                ops_exact = np.searchsorted(ranked, mu, side="left") / ranked.size
                worst_ops = max(worst_ops, abs(ref.ops_area(area, float(mu), p) - ops_exact))
        print(
            f"{area:<10} max |value error| {worst_value:.1e}   max |OPS error| {worst_ops:.1e}"
            f"   (Monte-Carlo s.e. up to {se:.4f})"
        )


def grid_area(name: str, value: float, prior: float, n: int = 1000) -> float:
    """Brute force: fraction of an n x n midpoint grid of (alpha, beta) where M is worse."""
    m = LABELING_METRICS[name]
    g = (np.arange(n) + 0.5) / n
    a, b = np.meshgrid(g, g)
    c = ConfusionCounts.from_rates(prior, cast(float, a), cast(float, b))
    v = m.func(c.tp, c.fp, c.fn, c.tn)
    return float(np.mean(v < value if m.greater_is_better else v > value))


def bench_labeling() -> None:
    print(f"\n{'labeling metric':<20}{'per call':>12}{'grid 1e6':>12}{'ratio':>8}{'|diff|':>10}")
    for name, m in LABELING_METRICS.items():
        value = 0.5 if m.upper == 1.0 else 1.5 if name == "lift" else 0.2
        priors = iter(fresh_priors(200, 0.01, 0.5))
        fast = per_call(functools.partial(labeling_call, name, value, priors), repeat=50)
        prior = 0.07
        base = per_call(functools.partial(grid_area, name, value, prior), repeat=3)
        diff = abs(outperformance_score(name, value, prior) - grid_area(name, value, prior))
        print(
            f"{name:<20}{fast * 1e3:>9.3f} ms{base * 1e3:>9.1f} ms{base / fast:>7.0f}x{diff:>10.1e}"
        )


def main() -> None:
    ref = bench_build()
    bench_scoring(ref)
    bench_labeling()


if __name__ == "__main__":
    main()
