"""Drift verdicts on simulated streams: false-alarm rates, power, cost per window.

Scores are sigmoid(logit) with logit ~ Normal(0, 1) for positives and
Normal(-2.5, 1) for negatives, binned on the default 10,000 logit-uniform bins.
Every trial draws a fresh reference (5 windows pooled) and a fresh window.

Prints
  1. false-alarm rates of each flag under the other kind of shift, next to the
     baseline a per-class design avoids: a chi-square test on pooled scores;
  2. power of the likelihood flag for location shifts of one class's logit
     (in standard deviations), by window size and prior, at the default
     settings (alpha 0.01, PSI > 0.01) and with no minimum effect;
  3. the cost of one verdict against the cost of one AUC-PR from the same
     histograms (the worker computes that anyway), measured in the same run.

Run: .venv/bin/python bench/bench_drift_power.py [--trials 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from app.drift import DriftSettings, WindowHistograms, drift_verdict
from app.drift.simulation import BinormalStream
from app.drift.two_sample import chi_square_homogeneity, coarsen, quantile_bin_starts
from app.metrics.binning import default_bin_edges
from app.metrics.curves import average_precision_from_counts, cumulative_counts_from_histograms

EDGES = default_bin_edges((0.5,))
MU_POS, MU_NEG = 0.0, -2.5
STABLE = BinormalStream(EDGES, mu_positive=MU_POS, mu_negative=MU_NEG)
DEFAULT = DriftSettings()
NO_MIN_EFFECT = DriftSettings(min_prior_effect=0.0, min_likelihood_effect=0.0)
REFERENCE_WINDOWS = 5


def _pooled_score_p(reference: WindowHistograms, window: WindowHistograms) -> float:
    pooled_r = reference.positives + reference.negatives
    pooled_w = window.positives + window.negatives
    starts = quantile_bin_starts(pooled_r, DEFAULT.test_bins)
    return chi_square_homogeneity(coarsen(pooled_r, starts), coarsen(pooled_w, starts))[2]


def _pairs(
    rng: np.random.Generator,
    trials: int,
    window_stream: BinormalStream,
    n: int,
    prior_ref: float,
    prior_win: float,
) -> list[tuple[WindowHistograms, WindowHistograms]]:
    return [
        (
            STABLE.window(rng, n=REFERENCE_WINDOWS * n, prior=prior_ref),
            window_stream.window(rng, n=n, prior=prior_win),
        )
        for _ in range(trials)
    ]


def false_alarms(rng: np.random.Generator, trials: int) -> None:
    print(f"\n1. false-alarm rates, alpha = {DEFAULT.alpha}, {trials} trials each")
    print("   (binomial standard error at the nominal rate:", end=" ")
    print(f"{np.sqrt(DEFAULT.alpha * (1 - DEFAULT.alpha) / trials):.4f})")
    header = "   {:<44} {:>9} {:>11} {:>14}"
    print(header.format("scenario (window rows)", "prior", "likelihood", "pooled-score"))
    cases = [
        ("pure prior shift pi 0.10 -> 0.02 (10,000)", STABLE, 10_000, 0.10, 0.02),
        ("pure prior shift pi 0.10 -> 0.02 (100,000)", STABLE, 100_000, 0.10, 0.02),
        ("pure prior shift pi 0.02 -> 0.05 (2,000)", STABLE, 2_000, 0.02, 0.05),
        (
            "pure likelihood shift 0.2 sd, pi 0.10 (10,000)",
            BinormalStream(EDGES, MU_POS - 0.2, MU_NEG),
            10_000,
            0.10,
            0.10,
        ),
        ("no shift, pi 0.02 (10,000)", STABLE, 10_000, 0.02, 0.02),
    ]
    for name, stream, n, pr, pw in cases:
        prior = likelihood = pooled = 0
        for reference, window in _pairs(rng, trials, stream, n, pr, pw):
            r = drift_verdict(reference, window, threshold=0.5, settings=NO_MIN_EFFECT)
            prior += r.prior.flag is True
            likelihood += r.likelihood.flag is True
            pooled += _pooled_score_p(reference, window) < DEFAULT.alpha
        print(
            header.format(
                name,
                f"{prior / trials:.3f}",
                f"{likelihood / trials:.3f}",
                f"{pooled / trials:.3f}",
            )
        )
    print("   (a flag's rate is a false alarm when its kind of shift is absent; pooled-score is")
    print("    the baseline chi-square on pooled scores, which confuses prior and likelihood)")


def power(rng: np.random.Generator, trials: int) -> None:
    print(
        f"\n2. likelihood-flag power, {trials} trials each; cells: default settings / no min effect"
    )
    sizes = (1_000, 10_000, 100_000)
    print(
        "   {:<34} {:>6}".format("shift (logit sd)", "prior")
        + "".join(f" {f'n={n:,}':>15}" for n in sizes)
    )
    shifts = [("positives", d) for d in (0.1, 0.2, 0.3, 0.5)] + [("negatives", 0.1)]
    for cls, d in shifts:
        stream = (
            BinormalStream(EDGES, MU_POS - d, MU_NEG)
            if cls == "positives"
            else BinormalStream(EDGES, MU_POS, MU_NEG + d)
        )
        for prior in (0.10, 0.02):
            cells = []
            for n in sizes:
                flagged = np.zeros(2)
                for reference, window in _pairs(rng, trials, stream, n, prior, prior):
                    r = drift_verdict(reference, window, threshold=0.5, settings=NO_MIN_EFFECT)
                    if r.likelihood.flag:
                        flagged[1] += 1
                        effect = r.likelihood.effect
                        flagged[0] += effect is not None and effect > DEFAULT.min_likelihood_effect
                cells.append(f"{flagged[0] / trials:.2f} / {flagged[1] / trials:.2f}")
            label = f"{cls} {'down' if cls == 'positives' else 'up'} {d}"
            print(f"   {label:<34} {prior:>6}" + "".join(f" {c:>15}" for c in cells))


def cost(rng: np.random.Generator) -> None:
    reference, window = _pairs(rng, 1, STABLE, 10_000, 0.10, 0.05)[0]
    repeats = 200

    def per_call(fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        return (time.perf_counter() - start) / repeats

    def auc_pr() -> float:
        c = cumulative_counts_from_histograms(window.positives, window.negatives, EDGES)
        return float(average_precision_from_counts(c.tps, c.fps))

    baseline = per_call(auc_pr)
    verdict = per_call(lambda: drift_verdict(reference, window, threshold=0.5))
    print(
        f"\n3. cost on {EDGES.size - 1:,} bins: one verdict {verdict * 1e3:.2f} ms; "
        f"one AUC-PR from histograms {baseline * 1e3:.3f} ms; ratio {verdict / baseline:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(
        f"drift power bench: binormal logit N({MU_POS},1) vs N({MU_NEG},1), "
        f"reference = {REFERENCE_WINDOWS} windows"
    )
    false_alarms(rng, args.trials)
    power(rng, args.trials)
    cost(rng)


if __name__ == "__main__":
    main()
