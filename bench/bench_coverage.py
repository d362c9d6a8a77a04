"""Do the stated 95% intervals cover, and does the drift test hold alpha? (seeded)

Windows are drawn from the binormal sampler of ``app.drift.simulation``
(logit ~ Normal(0, 1) for positives, Normal(-2.5, 1) for negatives, default
10,000 bins, primary threshold 0.5: TPR 0.5, FPR 0.0062). Each window's
label count is binomial, as in a real window, and its intervals are the ones
the worker stores (``compute_window_result``, pi0 = 0.05), plus the library's
raw precision/F1/MCC intervals (prior drawn with the rates). The truth is
the same computation on the population (10^10 examples in the bins'
exact proportions).

Prints
  1. coverage of every stored interval per regime (expected examples of the
     rarer class 30/100/300 x prior 0.005/0.01/0.1/0.5), with its Monte-Carlo
     standard error, the share of windows where an interval was stored and
     the regimes below 0.93 (docs/intervals.md states the rule);
  2. false-alarm rate of the likelihood flag (alpha 0.01, no minimum effect)
     for window/reference size ratios 0.1 to 100, without and with a pure
     prior shift, next to the chi-square part cut at the pooled quantiles
     (the rule) and at the reference's own quantiles (before), with the
     Monte-Carlo standard error at the nominal level;
  3-5. the label-free prior's interval at 50-1,000 reference positives,
     ops_auc_pr at tiny priors, and the label-free verdict's level and power
     with the specification test (``_coverage_label_free``).

  6. coverage of the calibrated AUC-PR and KS intervals (closed forms) over
     five score models, 30-10,000 positives, priors and pi0 0.01-0.5, with
     the library's former bootstrap beside them (bench/_coverage_areas.py);
  7. the SLA at its target: share of windows breached on the point and by
     the interval rule, objectives on auc_pr and ks.

Run: .venv/bin/python bench/bench_coverage.py [--quick]
[--only coverage|drift|prior|ops_auc_pr|specification|areas|sla]
[--trials 400] [--alarms 1000] [--seed 0] (about 10 minutes with the defaults on
this shared machine, 3 with --quick).
"""

from __future__ import annotations

import argparse
import math
import time

import _coverage_label_free as label_free
import numpy as np
from _coverage_areas import area_coverage, sla_at_target

from app.drift import DriftSettings
from app.drift.histograms import WindowHistograms
from app.drift.likelihood import _test_bins, likelihood_shift_test
from app.drift.simulation import BinormalStream
from app.drift.two_sample import chi_square_homogeneity, coarsen, quantile_bin_starts
from app.metrics.binning import default_bin_edges
from app.metrics.uncertainty import credible_intervals
from app.services.models.config import ModelConfig
from app.services.windows.compute import compute_window_result
from app.services.windows.sums import WindowSums

EDGES = default_bin_edges((0.5,))
STREAM = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-2.5)
PI0 = 0.05
MODEL = ModelConfig(
    id=1,
    name="bench",
    window="1h",
    thresholds=(0.5,),
    pi0=PI0,
    cost_ratio=None,
    segments=frozenset(),
    sla=(),
    drift={"reference": None, "min_class_count": 10},
    bin_edges=EDGES,
)
RAW = ("precision", "f1", "mcc")
"""Library intervals of raw metrics (not stored by the worker)."""
CLASS_COUNTS = (30, 100, 300)
PRIORS = (0.005, 0.01, 0.1, 0.5)
POPULATION = 10**10
LEVEL, FLOOR = 0.95, 0.93


def _sums(hist: WindowHistograms) -> WindowSums:
    return WindowSums.from_histograms(hist.positives, hist.negatives, EDGES, (0.5,))


def _population(prior: float) -> dict[str, float]:
    pos = np.round(POPULATION * prior * STREAM.p_positive)
    neg = np.round(POPULATION * (1 - prior) * STREAM.p_negative)
    sums = _sums(WindowHistograms(pos, neg, EDGES))
    metrics = compute_window_result(MODEL, sums, None, rng=np.random.default_rng(0)).metrics
    return {k: float(v) for k, v in metrics.items() if v is not None}


def coverage(rng: np.random.Generator, trials: int) -> None:
    print(f"\n1. coverage of the {LEVEL:.0%} intervals, {trials} windows per regime")
    print("   regime = expected examples of the rarer class / prior; cell = share of the")
    print("   windows with an interval that cover the population value; '<' marks")
    print(f"   coverage + 2 Monte-Carlo SE < {FLOOR}; '-' no interval stored in any window.")
    regimes = [(m, prior) for m in CLASS_COUNTS for prior in PRIORS]
    table: dict[str, dict[tuple[int, float], tuple[float, float, float]]] = {}
    for m, prior in regimes:
        n = round(m / min(prior, 1 - prior))
        truth = _population(prior)
        hits: dict[str, int] = {}
        seen: dict[str, int] = {}
        start = time.perf_counter()
        for _ in range(trials):
            sums = _sums(STREAM.window(rng, n=n, prior=prior))
            result = compute_window_result(MODEL, sums, None, rng=rng)
            bounds = {
                k: (v["lower"], v["upper"])
                for k, v in result.intervals.items()
                if v["lower"] is not None and v["upper"] is not None
            }
            if sums.positives and sums.negatives:
                raw = credible_intervals(sums.confusion[0], RAW, rng=rng, n_samples=2_000)
                bounds.update({f"raw {k}": v for k, v in raw.items() if not math.isnan(v[0])})
            for key, (low, high) in bounds.items():
                value = truth[key.removeprefix("raw ")]
                seen[key] = seen.get(key, 0) + 1
                hits[key] = hits.get(key, 0) + (low - 1e-12 <= value <= high + 1e-12)
        for key, count in seen.items():
            cov = hits[key] / count
            se = math.sqrt(max(cov * (1 - cov), 1e-4) / count)
            table.setdefault(key, {})[(m, prior)] = (cov, se, count / trials)
        ms = (time.perf_counter() - start) / trials * 1e3
        print(f"   regime {m}/{prior}: {n} rows per window, {ms:.0f} ms per window")
    print("\n   {:<24}".format("metric") + "".join(f"{f'{m}/{p}':>10}" for m, p in regimes))
    failures = []
    for key in sorted(table):
        cells = []
        for regime in regimes:
            if regime not in table[key]:
                cells.append(f"{'-':>10}")
                continue
            cov, se, _ = table[key][regime]
            low = cov + 2 * se < FLOOR
            if low:
                failures.append(f"{key} at {regime[0]}/{regime[1]} ({cov:.3f})")
            cells.append(f"{('<' if low else '') + f'{cov:.3f}':>10}")
        print(f"   {key:<24}" + "".join(cells))
    partial = {key: {r: v[2] for r, v in row.items() if v[2] < 0.995} for key, row in table.items()}
    print("\n   windows with an interval, where not all:")
    for key, shares in sorted(partial.items()):
        if shares:
            print(f"   {key:<24}" + ", ".join(f"{m}/{p}: {s:.2f}" for (m, p), s in shares.items()))
    print("\n   below the floor:", "; ".join(failures) if failures else "none")


def false_alarms(rng: np.random.Generator, trials: int) -> None:
    settings = DriftSettings(alpha=0.01, min_likelihood_effect=0.0)
    se = math.sqrt(settings.alpha * (1 - settings.alpha) / trials)
    print(f"\n2. likelihood false alarms at alpha {settings.alpha}, {trials} trials each")
    print(f"   (Monte-Carlo SE at the nominal rate {se:.4f}; per class for chi-square columns)")
    print(
        "   {:<10} {:>9} {:>9} {:>11} {:>11} {:>15} {:>17}".format(
            "prior", "ref rows", "window", "w/r ratio", "flag", "chi2 pooled", "chi2 ref-cut"
        )
    )
    for prior_ref, prior_win, n_ref in (
        (0.1, 0.1, 1_000),  # ~100 reference positives
        (0.1, 0.3, 1_000),
        (0.1, 0.1, 10_000),
        (0.005, 0.005, 10_000),  # ~50 reference positives
        (0.005, 0.02, 10_000),
        (0.005, 0.005, 100_000),
    ):
        for ratio in (0.1, 1.0, 10.0, 100.0):
            n_win = round(n_ref * ratio)
            flags = pooled = own = classes = 0
            for _ in range(trials):
                ref = STREAM.window(rng, n=n_ref, prior=prior_ref)
                win = STREAM.window(rng, n=n_win, prior=prior_win)
                flags += likelihood_shift_test(ref, win, settings).flag is True
                for r, w in ((ref.positives, win.positives), (ref.negatives, win.negatives)):
                    if min(r.sum(), w.sum()) < settings.min_class_count:
                        continue
                    k = _test_bins(float(r.sum()), float(w.sum()), settings)
                    classes += 1
                    for cuts, counter in ((r + w, "pooled"), (r, "own")):
                        starts = quantile_bin_starts(cuts, k)
                        p = chi_square_homogeneity(coarsen(r, starts), coarsen(w, starts))[2]
                        if p < settings.alpha:
                            if counter == "pooled":
                                pooled += 1
                            else:
                                own += 1
            print(
                "   {:<10} {:>9} {:>9} {:>11} {:>11.4f} {:>15.4f} {:>17.4f}".format(
                    f"{prior_ref}->{prior_win}",
                    n_ref,
                    n_win,
                    ratio,
                    flags / trials,
                    pooled / max(classes, 1),
                    own / max(classes, 1),
                )
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=400, help="windows per coverage regime")
    parser.add_argument("--alarms", type=int, default=1_000, help="trials per drift case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="100 windows, 300 drift trials")
    parser.add_argument(
        "--only",
        choices=("coverage", "drift", "prior", "ops_auc_pr", "specification", "areas", "sla"),
        help="run one part",
    )
    args = parser.parse_args()
    trials, alarms = (100, 300) if args.quick else (args.trials, args.alarms)
    rng = np.random.default_rng(args.seed)
    if args.only in (None, "coverage"):
        coverage(rng, trials)
    if args.only in (None, "drift"):
        false_alarms(rng, alarms)
    if args.only in (None, "prior"):
        label_free.prior_coverage(rng, trials)
    if args.only in (None, "ops_auc_pr"):
        label_free.ops_auc_pr_coverage(rng, trials)
    if args.only in (None, "specification"):
        label_free.specification_power(rng, trials, alarms)
    if args.only in (None, "areas"):
        area_coverage(rng, trials)
    if args.only in (None, "sla"):
        sla_at_target(rng, rounds=2 if args.quick else 10)


if __name__ == "__main__":
    main()
