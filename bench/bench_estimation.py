"""Label-free estimation: cost of one estimate, and its error against held-back labels.

Prints
  1. the time of one label-free estimate of a window from histograms (prior,
     interval, fit test and every metric at every threshold), against the
     time of the labelled window computation (metrics, intervals, drift,
     curves) measured in the same run; target < 5 ms;
  2. a simulation in the set-up of the estimation notes: a reference of
     240,000 rows at prior 0.10, scores sigmoid(z - 1.5) with z ~ N(1.5, 1)
     for positives and N(0, 1) for negatives, on the default bins; windows of
     10,000 unlabelled rows; threshold 0.5. For each scenario, the mean
     absolute error of the estimated precision and F1 against the window's
     held-back labels, for the mixture estimate and for the
     calibrated-probability estimate on the same rows (isotonic regression
     fitted on the reference, expected counts from the calibrated
     probabilities: mean probability above the threshold for precision), the
     error of pi_hat and of the adjusted count, and how often the fit test
     flags the window at alpha 0.01;
  3. the fit test's false-alarm rate under pure prior shifts at window /
     reference size ratios from 1/24 to 100 (alpha 0.05), next to the same
     test that takes the reference as exact.

Run: .venv/bin/python bench/bench_estimation.py [--windows 40] [--trials 400] [--seed 0]
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
from _common import per_call
from sklearn.isotonic import IsotonicRegression

from app.drift import DriftSettings, WindowHistograms
from app.drift.simulation import BinormalStream
from app.estimation import MixtureReference, estimate_prior, estimate_window
from app.estimation.fit import mixture_fit_test
from app.estimation.prior import ml_prior
from app.estimation.sampling import GroupedSampling
from app.metrics.binning import default_bin_edges
from app.metrics.labeling import f1, precision
from app.services.models.config import ModelConfig
from app.services.windows.compute import compute_window_result
from app.services.windows.sums import WindowSums

THRESHOLD = 0.5
EDGES = default_bin_edges((THRESHOLD,))
MU_POS, MU_NEG = 0.0, -1.5  # logits of sigmoid(z - 1.5), z ~ N(1.5, 1) and N(0, 1)
STABLE = BinormalStream(EDGES, mu_positive=MU_POS, mu_negative=MU_NEG)
REFERENCE_N, REFERENCE_PRIOR, WINDOW_N = 240_000, 0.10, 10_000
ALPHA = 0.01
ABOVE = EDGES[:-1] >= THRESHOLD  # bins predicted positive


def _model() -> ModelConfig:
    return ModelConfig(
        id=0,
        name="bench",
        window="1h",
        thresholds=(THRESHOLD,),
        pi0=REFERENCE_PRIOR,
        cost_ratio=0.5,
        segments=frozenset(),
        sla=(),
        drift={"reference": {"trailing_windows": 24}},
        bin_edges=EDGES,
    )


def _sums(h: WindowHistograms) -> WindowSums:
    return WindowSums.from_histograms(h.positives, h.negatives, EDGES, (THRESHOLD,))


def timing(rng: np.random.Generator) -> None:
    reference_h = STABLE.window(rng, n=REFERENCE_N, prior=REFERENCE_PRIOR)
    window_h = STABLE.window(rng, n=WINDOW_N, prior=0.05)
    unlabelled = window_h.positives + window_h.negatives
    model = _model()
    reference = MixtureReference.from_histograms(reference_h)
    estimate_window(reference, unlabelled, thresholds=(THRESHOLD,), pi0=0.1, cost_ratio=0.5)
    compute_window_result(model, _sums(window_h), _sums(reference_h))  # warm caches

    t_reference = per_call(lambda: MixtureReference.from_histograms(reference_h), 50)
    t_prior = per_call(lambda: estimate_prior(reference, unlabelled, threshold=THRESHOLD), 200)
    t_estimate = per_call(
        lambda: estimate_window(
            reference, unlabelled, thresholds=(THRESHOLD,), pi0=0.1, cost_ratio=0.5
        ),
        200,
    )
    sums, ref_sums = _sums(window_h), _sums(reference_h)
    t_window = per_call(lambda: compute_window_result(model, sums, ref_sums), 20)
    print("1. cost per window (median wall time, default 10,001 bins)")
    print(f"   reference grouping (once per reference)      {t_reference * 1e3:8.3f} ms")
    print(f"   prior, interval, fit test                    {t_prior * 1e3:8.3f} ms")
    print(
        f"   full label-free estimate (with every metric) {t_estimate * 1e3:8.3f} ms  (target < 5)"
    )
    print(f"   baseline: labelled window computation        {t_window * 1e3:8.3f} ms")
    print(f"   ratio estimate / labelled window             {t_estimate / t_window:8.3f}")


def _calibrated_estimate(iso: IsotonicRegression, unlabelled: np.ndarray) -> tuple[float, float]:
    """Expected precision and F1 from the calibrated probability of each bin's scores."""
    p = iso.predict(EDGES[:-1])
    tp = float(np.sum(unlabelled[ABOVE] * p[ABOVE]))
    fp = float(np.sum(unlabelled[ABOVE] * (1.0 - p[ABOVE])))
    fn = float(np.sum(unlabelled[~ABOVE] * p[~ABOVE]))
    return float(precision(tp, fp, fn, 0.0)), float(f1(tp, fp, fn, 0.0))


def simulation(rng: np.random.Generator, windows: int) -> None:
    reference_h = STABLE.window(rng, n=REFERENCE_N, prior=REFERENCE_PRIOR)
    reference = MixtureReference.from_histograms(reference_h)
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    lower = EDGES[:-1]
    iso.fit(
        np.concatenate((lower, lower)),
        np.concatenate((np.ones(lower.size), np.zeros(lower.size))),
        sample_weight=np.concatenate((reference_h.positives, reference_h.negatives)),
    )
    scenarios = [
        ("prior 0.02", STABLE, 0.02),
        ("prior 0.05", STABLE, 0.05),
        ("prior 0.20", STABLE, 0.20),
        ("no shift", STABLE, REFERENCE_PRIOR),
        ("negatives' mean +0.2 sd", BinormalStream(EDGES, MU_POS, MU_NEG + 0.2), REFERENCE_PRIOR),
        ("positives' mean -0.5 sd", BinormalStream(EDGES, MU_POS - 0.5, MU_NEG), REFERENCE_PRIOR),
    ]
    settings = DriftSettings(alpha=ALPHA)
    print(f"\n2. error against held-back labels ({windows} windows of {WINDOW_N:,} rows each;")
    print(f"   reference {REFERENCE_N:,} rows at prior {REFERENCE_PRIOR}, threshold {THRESHOLD})")
    print(
        f"   {'window':<25}{'precision: mixture':>19}{'calibrated':>11}"
        f"{'F1: mixture':>13}{'calibrated':>11}{'|pi_hat-pi|':>12}{'|bbse-pi|':>10}"
        f"{'fit flags':>10}"
    )
    for name, stream, prior in scenarios:
        err = np.zeros((windows, 6))
        flags = 0
        for i in range(windows):
            w = stream.window(rng, n=WINDOW_N, prior=prior)
            u = w.positives + w.negatives
            tp, fp = w.positives[ABOVE].sum(), w.negatives[ABOVE].sum()
            fn = w.n_positives - tp
            truth_p, truth_f1 = float(precision(tp, fp, fn, 0.0)), float(f1(tp, fp, fn, 0.0))
            est = estimate_window(reference, u, thresholds=(THRESHOLD,), settings=settings)
            cal_p, cal_f1 = _calibrated_estimate(iso, u)
            est_p, est_f1 = est.metrics["precision"], est.metrics["f1"]
            assert est_p is not None and est_f1 is not None and est.prior.bbse is not None
            err[i] = (
                abs(est_p - truth_p),
                abs(cal_p - truth_p),
                abs(est_f1 - truth_f1),
                abs(cal_f1 - truth_f1),
                abs(est.prior.value - w.prior),
                abs(est.prior.bbse - w.prior),
            )
            flags += est.prior.verdict == "likelihood"
        m = err.mean(axis=0)
        print(
            f"   {name:<25}{m[0]:>19.3f}{m[1]:>11.3f}{m[2]:>13.3f}{m[3]:>11.3f}"
            f"{m[4]:>12.4f}{m[5]:>10.4f}{flags:>6}/{windows}"
        )


def false_alarms(rng: np.random.Generator, trials: int) -> None:
    alpha = 0.05
    settings = DriftSettings(alpha=alpha)
    print(
        f"\n3. fit test false-alarm rate under a pure prior shift (alpha {alpha}, {trials} trials)"
    )
    print(
        f"   {'reference':>10}{'window':>10}{'ratio':>8}{'this test':>11}{'reference as exact':>20}"
    )
    for reference_n, window_n in (
        (240_000, 10_000),
        (20_000, 20_000),
        (5_000, 50_000),
        (2_000, 200_000),
    ):
        flagged = naive = 0
        for _ in range(trials):
            reference = MixtureReference.from_histograms(
                STABLE.window(rng, n=reference_n, prior=REFERENCE_PRIOR)
            )
            w = STABLE.window(rng, n=window_n, prior=0.05)
            u = w.positives + w.negatives
            est = estimate_prior(reference, u, threshold=THRESHOLD, settings=settings)
            flagged += est.verdict == "likelihood"
            counts = reference.grouped(u)
            prior = ml_prior(counts, reference.f_positive, reference.f_negative)
            sampling = GroupedSampling.at(reference, prior, float(counts.sum()))
            exact = dataclasses.replace(sampling, reference_cov=0.0 * sampling.reference_cov)
            p = mixture_fit_test(counts, exact).p_value
            naive += p is not None and p < alpha
        print(
            f"   {reference_n:>10,}{window_n:>10,}{window_n / reference_n:>8.2f}"
            f"{flagged / trials:>11.3f}{naive / trials:>20.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=40)
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    timing(rng)
    simulation(rng, args.windows)
    false_alarms(rng, args.trials)


if __name__ == "__main__":
    main()
