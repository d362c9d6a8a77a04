"""bench_coverage.py's label-free rows and ops_auc_pr at tiny priors (imported as a module).

* :func:`prior_coverage`: coverage of the label-free prior's 95% interval at
  50 to 1,000 reference positives, now and with the estimator before
  (a uniform pseudo-count of 0.5 per group, no mapping back to the raw
  frequencies, no errors-in-variables correction), and the mean relative
  error of pi_hat;
* :func:`ops_auc_pr_coverage`: coverage of the stored ``ops_auc_pr`` interval
  of a weak classifier (AUC 0.76) at priors 0.001 to 0.01, with the gate
  (``MIN_OPS_AUC_PR_POSITIVES_X_PRIOR``) and without it (before);
* :func:`specification_power`: the flag rate of the label-free verdict
  (``likelihood``) at alpha 0.01 under pure prior shifts (its level) and
  under shifts of a class's scores (its power): before (the fit test alone
  at alpha), the fit test and the specification test each at alpha / 2,
  and both (the verdict now).
"""

from __future__ import annotations

import dataclasses
import math
from unittest import mock

import numpy as np

from app.drift import DriftSettings
from app.drift.histograms import WindowHistograms
from app.drift.simulation import BinormalStream
from app.estimation import MixtureReference, estimate_prior
from app.estimation.prior import ml_prior, profile_interval
from app.estimation.sampling import GroupedSampling
from app.metrics.binning import default_bin_edges
from app.services.models.config import ModelConfig
from app.services.windows import compute as window_compute
from app.services.windows.compute import compute_window_result
from app.services.windows.sums import WindowSums

EDGES = default_bin_edges((0.5,))
CLASSIFIERS = {"strong (AUC 0.96)": -2.5, "medium (AUC 0.86)": -1.5, "weak (AUC 0.76)": -1.0}
"""Negatives' mean logit (positives' 0, both sd 1)."""
REFERENCE_POSITIVES = (50, 100, 200, 500, 1_000)
FLOOR = 0.93


def _uniform_pseudo_count(ref: MixtureReference, u: np.ndarray) -> tuple[float, float, float]:
    """pi_hat and its interval as computed before: 0.5 added to every group of each class."""
    g = ref.n_groups
    f1 = (ref.positives + 0.5) / (ref.positives.sum() + 0.5 * g)
    f0 = (ref.negatives + 0.5) / (ref.negatives.sum() + 0.5 * g)
    old = dataclasses.replace(ref, f_positive=f1, f_negative=f0)
    counts = ref.grouped(u)
    prior = ml_prior(counts, f1, f0)
    s = GroupedSampling.at(old, prior, float(counts.sum()))
    scale = s.window_variance / (s.window_variance + s.reference_variance)
    return (prior, *profile_interval(counts, f1, f0, prior, level=0.95, scale=scale))


def prior_coverage(rng: np.random.Generator, trials: int) -> None:
    print(f"\n3. label-free prior: coverage of the 95% interval, {trials} windows per cell")
    print("   reference: R1 positives at prior 0.01 or 0.1; window 10,000 unlabelled rows at")
    print("   half or twice the reference's prior; '<' marks coverage + 2 SE < 0.93")
    print(
        "   {:<19} {:>5} {:>12} {:>11} {:>9} {:>11} {:>9}".format(
            "classifier", "R1", "prior", "before", "bias", "now", "bias"
        )
    )
    worst = {"before": 1.0, "now": 1.0}
    for name, mu in CLASSIFIERS.items():
        stream = BinormalStream(EDGES, mu_positive=0.0, mu_negative=mu)
        for ref_prior in (0.01, 0.1):
            for r1 in REFERENCE_POSITIVES:
                for factor in (0.5, 2.0):
                    pi = ref_prior * factor
                    hits, errors = np.zeros(2), np.zeros(2)
                    for _ in range(trials):
                        ref = MixtureReference.from_histograms(
                            stream.window(rng, n=round(r1 / ref_prior), prior=ref_prior)
                        )
                        w = stream.window(rng, n=10_000, prior=pi)
                        u = w.positives + w.negatives
                        est = estimate_prior(ref, u, threshold=0.5)
                        for i, (value, low, high) in enumerate(
                            (_uniform_pseudo_count(ref, u), (est.value, est.lower, est.upper))
                        ):
                            hits[i] += low <= pi <= high
                            errors[i] += value / pi - 1.0
                    cells = []
                    for key, hit, error in zip(("before", "now"), hits, errors, strict=True):
                        cov = hit / trials
                        worst[key] = min(worst[key], cov)
                        low = cov + 2 * math.sqrt(cov * (1 - cov) / trials) < FLOOR
                        mark = ("<" if low else "") + f"{cov:.3f}"
                        cells.append(f"{mark:>11} {error / trials:>+9.3f}")
                    print(f"   {name:<19} {r1:>5} {f'{ref_prior}->{pi:g}':>12} " + " ".join(cells))
    print(f"   lowest: before {worst['before']:.3f}, now {worst['now']:.3f}")


def ops_auc_pr_coverage(rng: np.random.Generator, trials: int) -> None:
    stream = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-1.0)
    model = ModelConfig(
        id=1,
        name="bench",
        window="1h",
        thresholds=(0.5,),
        pi0=0.05,
        cost_ratio=None,
        segments=frozenset(),
        sla=(),
        drift={"reference": None, "min_class_count": 10},
        bin_edges=EDGES,
    )
    print(f"\n4. ops_auc_pr at tiny priors, weak classifier (AUC 0.76), {trials} windows per cell")
    print("   coverage of the stored interval; 'before' without the gate; stored = share of")
    print("   windows with an interval now")
    print(
        "   {:>7} {:>9} {:>10} {:>9} {:>10} {:>8} {:>8}".format(
            "prior", "positives", "rows", "P x prior", "AUC-PR bias", "before", "now"
        )
    )
    for prior, positives in (
        (0.001, 100),
        (0.001, 1_000),
        (0.001, 3_000),
        (0.001, 6_000),
        (0.002, 3_000),
        (0.005, 100),
        (0.005, 300),
        (0.005, 1_000),
        (0.01, 100),
        (0.01, 600),
    ):
        pop = WindowHistograms(
            np.round(1e10 * prior * stream.p_positive),
            np.round(1e10 * (1 - prior) * stream.p_negative),
            EDGES,
        )
        truth = compute_window_result(model, _sums(pop), None).metrics
        n = round(positives / prior)
        hits, seen, bias = np.zeros(2), np.zeros(2), 0.0
        for _ in range(trials):
            sums = _sums(stream.window(rng, n=n, prior=prior))
            with mock.patch.object(window_compute, "MIN_OPS_AUC_PR_POSITIVES_X_PRIOR", 0.0):
                before = compute_window_result(model, sums, None, rng=rng)
            metric, interval = before.metrics["auc_pr"], before.intervals.get("ops_auc_pr")
            assert metric is not None
            bias += metric / truth["auc_pr"] - 1.0
            if interval is None or interval["lower"] is None:
                continue
            gate = sums.positives**2 / sums.n >= window_compute.MIN_OPS_AUC_PR_POSITIVES_X_PRIOR
            covered = interval["lower"] <= truth["ops_auc_pr"] <= interval["upper"]
            seen += (1, gate)
            hits += (covered, covered and gate)
        cov = [f"{h / s:.3f}" if s else "-" for h, s in zip(hits, seen, strict=True)]
        print(
            f"   {prior:>7} {positives:>9,} {n:>10,} {positives * prior:>9.1f} "
            f"{bias / trials:>+10.3f} {cov[0]:>8} {cov[1]:>8} (stored {seen[1] / trials:.2f})"
        )


def _sums(hist: WindowHistograms) -> WindowSums:
    return WindowSums.from_histograms(hist.positives, hist.negatives, EDGES, (0.5,))


def specification_power(rng: np.random.Generator, trials: int, level_trials: int) -> None:
    alpha = 0.01
    settings = DriftSettings(alpha=alpha)
    bench = BinormalStream(EDGES, 0.0, -1.5)  # bench_estimation's classifier
    demo = BinormalStream(EDGES, 0.5, -3.5, 1.2, 1.2)  # app/demo/scenario.py's
    cases = [
        ("level", "prior 0.1 -> 0.01", bench, bench, 240_000, 0.1, 10_000, 0.01),
        ("level", "prior 0.1 -> 0.1, N = 10 R", bench, bench, 5_000, 0.1, 50_000, 0.1),
        ("level", "prior 0.1 -> 0.2, N = R", bench, bench, 20_000, 0.1, 20_000, 0.2),
        ("level", "prior 0.01 -> 0.001", bench, bench, 100_000, 0.01, 10_000, 0.001),
        ("level", "demo: fraud wave x4", demo, demo, 160_000, 0.01, 20_000, 0.04),
        ("power", "negatives +0.05 sd", bench, BinormalStream(EDGES, 0.0, -1.45), 240_000, 0.1,
         10_000, 0.01),
        ("power", "negatives +0.1 sd", bench, BinormalStream(EDGES, 0.0, -1.4), 240_000, 0.1,
         10_000, 0.01),
        ("power", "positives -0.5 sd", bench, BinormalStream(EDGES, -0.5, -1.5), 240_000, 0.1,
         10_000, 0.1),
        ("power", "demo: degradation", demo, BinormalStream(EDGES, -1.5, -3.5, 1.2, 1.2),
         160_000, 0.01, 20_000, 0.01),
    ]  # fmt: skip
    print(f"\n5. label-free verdict 'likelihood' at alpha {alpha}: level (pure prior shifts,")
    print(f"   {level_trials} windows) and power ({trials} windows); before = the fit test alone")
    print(
        "   {:<6} {:<28} {:>10} {:>10} {:>10} {:>10}".format(
            "", "window", "before", "fit a/2", "spec a/2", "now"
        )
    )
    for kind, name, ref_stream, stream, n_ref, ref_prior, n_win, prior in cases:
        runs = level_trials if kind == "level" else trials
        counts = np.zeros(4)
        for _ in range(runs):
            ref = MixtureReference.from_histograms(ref_stream.window(rng, n=n_ref, prior=ref_prior))
            w = stream.window(rng, n=n_win, prior=prior)
            est = estimate_prior(ref, w.positives + w.negatives, threshold=0.5, settings=settings)
            fit, spec = est.fit.p_value, est.specification.p_value
            counts += (
                fit is not None and fit < alpha,
                fit is not None and fit < alpha / 2,
                spec is not None and spec < alpha / 2,
                est.verdict == "likelihood",
            )
        print(f"   {kind:<6} {name:<28} " + " ".join(f"{c / runs:>10.3f}" for c in counts))
