"""Label maturity: cost of a completion, its error and its intervals' coverage per regime.

Prints
  1. the cost per window of the summary tier (:func:`app.maturity.complete`, the
     service's whole completion step, and the summary tier with and without it)
     and of the detail tier (:func:`app.maturity.completion_intervals`, 200 draws),
     on 102 bins and on the default 10,002 bins; target < 1 ms for ``complete``;
  2. the choice of k (labelled rows per group under ``score``): the completed
     errors for k = 5 .. 100, for a label rate that steps at the threshold and
     for one that rises smoothly with the score;
  3. per regime (assumption, prior 0.01-0.2, completeness 10/20/50/90%), on
     windows of 20,000 rows: the mean absolute error against the full-label
     values of the completed metrics beside the labelled subset's, the prior
     interval's coverage, the 95% metric intervals' coverage (the lowest two
     over the metrics listed, and their metrics), and the fit test's
     flag rate (``class`` data: its false alarms at alpha 0.05; ``score`` data
     completed as ``class``: its power);
  4. the floor of the 1/3 bound under ``class``: the completed errors of the
     prior-dependent metrics beside the labelled subset's third and beside the
     errors of an oracle that knows the full-label prior (the labelled
     class-conditionals at the true remainder share): where the oracle misses
     the bound too, the miss is the labelled class-conditionals' sampling
     noise, which no estimate of the prior removes.

``class`` data: positives labelled 3.5 times as fast as negatives (the
positives' rate capped at 1). ``score`` data: rows at or above the threshold
labelled 18 times as fast as the rest (90% and 5% at completeness ~17%).

Run: .venv/bin/python bench/bench_maturity.py [--quick] [--windows 1000] [--seed 0]
[--cost | --floor | --data class|score]
(--quick: 100 windows per regime; the full run takes about half an hour;
--cost: part 1 only; --floor: part 4 only; --data class|score: part 3 on that data only.)
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np
from _common import per_call
from scipy import optimize

from app.drift.simulation import BinormalStream
from app.maturity import Completion, bins_of_thresholds, complete, completion_intervals
from app.maturity.completion import class_histograms
from app.maturity.metrics import row_metrics
from app.maturity.simulation import MaturingWindow, class_rates, deliver_labels
from app.metrics.binning import default_bin_edges
from app.services.models.config import ModelConfig
from app.services.windows.compute import Tier, compute_window_result
from app.services.windows.maturity import completed_sums, maturity_document, window_completion
from app.services.windows.sums import WindowSums

THRESHOLDS = (0.5,)
PI0, COST_RATIO = 0.1, 0.5
N_ROWS = 20_000
SCORE_SPEED = 18.0  # rows at or above the threshold are labelled this many times as fast
HEADLINE = ("prior", "precision", "recall", "f1", "mcc", "accuracy", "calibrated_f1", "auc_roc")
COVERED = (*HEADLINE[1:], "calibrated_precision", "calibrated_auc_pr", "ks")


class Setup:
    """Bins, the classifier and the options of one bin layout."""

    def __init__(self, n_bins: int) -> None:
        self.edges = default_bin_edges(THRESHOLDS, n_bins=n_bins)
        self.stream = BinormalStream(self.edges, mu_positive=1.0, mu_negative=-2.0)
        self.threshold_bins = bins_of_thresholds(self.edges, THRESHOLDS)
        self.above = self.edges[:-1] >= THRESHOLDS[0]
        self.options = {
            "edges": self.edges,
            "thresholds": THRESHOLDS,
            "pi0": PI0,
            "cost_ratio": COST_RATIO,
        }

    def score_rates(self, prior: float, completeness: float) -> np.ndarray:
        """Per-bin label rates of ``score`` data reaching ``completeness`` on average."""
        mix = prior * self.stream.p_positive + (1.0 - prior) * self.stream.p_negative

        def rates(low: float) -> np.ndarray:
            return np.where(self.above, min(1.0, SCORE_SPEED * low), low)

        def gap(low: float) -> float:
            return float(np.dot(mix, rates(low))) - completeness

        return rates(float(optimize.brentq(gap, 0.0, 1.0)))

    def window(
        self, rng: np.random.Generator, data: str, prior: float, completeness: float
    ) -> MaturingWindow:
        full = self.stream.window(rng, n=N_ROWS, prior=prior)
        if data == "class":
            return deliver_labels(rng, full, *class_rates(prior, completeness))
        rates = self.score_rates(prior, completeness)
        return deliver_labels(rng, full, rates, rates)

    def complete(self, w: MaturingWindow, assumption: str, **options: object) -> Completion:
        c = complete(
            w.unlabelled,
            w.positives,
            w.negatives,
            assumption=assumption,  # type: ignore[arg-type]
            threshold_bins=self.threshold_bins,
            **options,  # type: ignore[arg-type]
        )
        assert isinstance(c, Completion), c
        return c


def stored_window(setup: Setup, w: MaturingWindow) -> WindowSums:
    """``w`` as the service stores it (whole counts)."""
    stored = WindowSums.from_histograms(w.positives, w.negatives, setup.edges, THRESHOLDS)
    return replace(stored, unlabelled=w.unlabelled.astype(np.int64))


def model_of(setup: Setup, assumption: str) -> ModelConfig:
    return ModelConfig(
        id=1,
        name="bench",
        window="1h",
        thresholds=THRESHOLDS,
        pi0=PI0,
        cost_ratio=COST_RATIO,
        segments=frozenset(),
        sla=(),
        drift={"reference": {"trailing_windows": 1}, "alpha": 0.05},
        bin_edges=setup.edges,
        label_missingness=assumption,
    )


def costs(rng: np.random.Generator) -> None:
    print(
        "1. cost per window (median wall time, ms; windows of 20,000 rows, completeness 20%)\n"
        "   complete: app.maturity.complete (target < 1 ms); step: the summary tier's\n"
        "   completion in the service (window_completion, its document with every completed\n"
        "   metric through the registry, and the rounded completed window the drift tests read);\n"
        "   summary: the whole summary tier (compute_window_result, no reference) with the\n"
        "   completion, and with label_missingness none; detail: completion_intervals, 200 draws",
        flush=True,
    )
    for n_bins in (100, 10_000):
        setup = Setup(n_bins)
        for assumption in ("class", "score"):
            w = setup.window(rng, assumption, 0.05, 0.2)
            c = setup.complete(w, assumption)
            summary = per_call(lambda: setup.complete(w, assumption), 300)  # noqa: B023
            model, sums = model_of(setup, assumption), stored_window(setup, w)

            def step() -> None:
                done = window_completion(model, (sums,))  # noqa: B023
                assert isinstance(done, Completion)
                maturity_document(model, done, lambda name: "undefined")  # noqa: B023
                completed_sums(model, sums, done)  # noqa: B023

            served = per_call(step, 100)
            tiers = [
                per_call(
                    lambda m=m: compute_window_result(m, sums, None, tier=Tier.SUMMARY),  # noqa: B023
                    50,
                )
                for m in (model, model_of(setup, "none"))
            ]
            args = (w.unlabelled, w.positives, w.negatives, c)
            completion_intervals(*args, rng=rng, **setup.options)  # warm the OPS reference
            detail = per_call(
                lambda: completion_intervals(*args, rng=rng, **setup.options),  # noqa: B023
                5,
            )
            print(
                f"   {setup.edges.size - 1:>6} bins, {assumption:<5}  complete {summary * 1e3:6.3f}"
                f"   step {served * 1e3:6.3f}   summary {tiers[0] * 1e3:6.2f} (none "
                f"{tiers[1] * 1e3:6.2f})   detail {detail * 1e3:7.1f}",
                flush=True,
            )


def k_choice(rng: np.random.Generator, windows: int) -> None:
    setup = Setup(100)
    middle = (setup.edges[:-1] + setup.edges[1:]) / 2.0
    policies = {
        "step (90% / 5%)": np.where(setup.above, 0.9, 0.05),
        "smooth 0.02 + 0.9 s^2": 0.02 + 0.9 * middle**2,
    }
    names = ("prior", "recall", "f1", "auc_roc", "calibrated_auc_pr")
    print(f"\n2. choice of k under score ({windows} windows per line): mean |completed - full|")
    print(f"   {'label rate':<23}{'prior':>6}{'k':>5}" + "".join(f"{n:>19}" for n in names))
    for label, rates in policies.items():
        for prior in (0.01, 0.05, 0.2):
            fulls = [setup.stream.window(rng, n=N_ROWS, prior=prior) for _ in range(windows)]
            ws = [deliver_labels(rng, f, rates, rates) for f in fulls]
            truth = row_metrics(
                np.array([f.positives for f in fulls]),
                np.array([f.negatives for f in fulls]),
                **setup.options,
            )
            for k in (5, 10, 20, 50, 100):
                cs = [setup.complete(w, "score", min_labelled=k) for w in ws]
                m = row_metrics(
                    np.array([c.positives for c in cs]),
                    np.array([c.negatives for c in cs]),
                    **setup.options,
                )
                row = "".join(f"{np.nanmean(np.abs(m[n] - truth[n])):>19.4f}" for n in names)
                print(f"   {label:<23}{prior:>6}{k:>5}{row}", flush=True)


def _regime(
    setup: Setup,
    rng: np.random.Generator,
    assumption: str,
    prior: float,
    completeness: float,
    windows: int,
) -> None:
    ws = [setup.window(rng, assumption, prior, completeness) for _ in range(windows)]
    cs = [setup.complete(w, assumption) for w in ws]
    flags = 0
    for w, c in zip(ws, cs, strict=True):
        as_class = c if assumption == "class" else setup.complete(w, "class")
        flags += as_class.fit is not None and not as_class.fit.reliable

    def metrics(pairs: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
        h1, h0 = np.array([p for p, _ in pairs]), np.array([q for _, q in pairs])
        return row_metrics(h1, h0, **setup.options)

    completed = metrics([(c.positives, c.negatives) for c in cs])
    subset = metrics([(w.positives, w.negatives) for w in ws])
    truth = metrics([(w.full.positives, w.full.negatives) for w in ws])
    hits, given = dict.fromkeys(COVERED, 0), dict.fromkeys(COVERED, 0)
    for i, (w, c) in enumerate(zip(ws, cs, strict=True)):
        intervals = completion_intervals(
            w.unlabelled, w.positives, w.negatives, c, rng=rng, **setup.options
        )
        for n in COVERED:
            iv = intervals[n]
            if iv is not None and np.isfinite(truth[n][i]):
                given[n] += 1
                hits[n] += iv[0] <= truth[n][i] <= iv[1]
    prior_hits = sum(
        c.prior.lower <= t <= c.prior.upper for c, t in zip(cs, truth["prior"], strict=True)
    )
    seen = float(np.mean([c.completeness for c in cs]))

    def mae(values: np.ndarray, n: str) -> float:
        return float(np.nanmean(np.abs(values - truth[n])))

    errors = "".join(f"{mae(completed[n], n):>8.4f}/{mae(subset[n], n):<7.4f}" for n in HEADLINE)
    cover = {n: hits[n] / given[n] for n in COVERED if given[n]}
    worst, second = sorted(cover, key=lambda n: cover[n])[:2]
    missing = sum(given[n] < windows for n in COVERED)
    print(
        f"   {assumption:<6}{prior:>5}{completeness:>6.0%}{seen:>6.0%}{errors}"
        f"{prior_hits / windows:>7.3f}{cover[worst]:>7.3f} {worst:<20}"
        f"{cover[second]:>7.3f} {second:<20}"
        f"{flags / windows:>6.3f}{missing:>5}",
        flush=True,
    )


def regimes(rng: np.random.Generator, windows: int, assumptions: tuple[str, ...]) -> None:
    setup = Setup(100)
    print(f"\n3. per regime ({windows} windows of {N_ROWS:,} rows each; 102 bins, threshold 0.5)")
    print("   errors: mean |completed - full| / mean |labelled subset - full|")
    head = "".join(f"{n:>16}" for n in HEADLINE)
    print(
        f"   {'data':<6}{'prior':>5}{'target':>6}{'seen':>6}{head}"
        f"{'prior':>7}{'metric':>7} {'(lowest)':<20}{'metric':>7} {'(next)':<20}"
        f"{'fit':>6}{'null':>5}"
    )
    print(
        f"   {'':<23}{'':>{16 * len(HEADLINE)}}{'cover':>7}{'cover':>7} {'':<20}{'cover':>7} "
        f"{'':<20}{'flags':>6}"
    )
    for assumption in assumptions:
        for prior in (0.01, 0.05, 0.2):
            for completeness in (0.1, 0.2, 0.5, 0.9):
                _regime(setup, rng, assumption, prior, completeness, windows)


def floor(rng: np.random.Generator, windows: int) -> None:
    setup = Setup(100)
    names = ("precision", "f1", "mcc", "accuracy")
    print(f"\n4. the 1/3 bound under class ({windows} windows per line): mean |error| of the")
    print("   completed value / a third of the labelled subset's / the true-prior oracle's")
    print(f"   {'prior':>5}{'target':>7}" + "".join(f"{n:>27}" for n in names))
    for prior in (0.01, 0.05, 0.2):
        for completeness in (0.1, 0.2, 0.5):
            ws = [setup.window(rng, "class", prior, completeness) for _ in range(windows)]
            cs = [setup.complete(w, "class") for w in ws]
            rest = [w.unlabelled.sum() - w.positives.sum() - w.negatives.sum() for w in ws]
            oracle = [
                class_histograms(
                    w.positives, w.negatives, (w.full.positives.sum() - w.positives.sum()) / v, v
                )
                for w, v in zip(ws, rest, strict=True)
            ]

            def metrics(pairs: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
                h1, h0 = np.array([p for p, _ in pairs]), np.array([q for _, q in pairs])
                return row_metrics(h1, h0, **setup.options)

            truth = metrics([(w.full.positives, w.full.negatives) for w in ws])
            found = [
                metrics([(c.positives, c.negatives) for c in cs]),
                metrics([(w.positives, w.negatives) for w in ws]),
                metrics(oracle),
            ]
            errors = [{n: float(np.nanmean(np.abs(m[n] - truth[n]))) for n in names} for m in found]
            row = "".join(
                f"{errors[0][n]:>11.4f}/{errors[1][n] / 3:.4f}/{errors[2][n]:.4f}" for n in names
            )
            print(f"   {prior:>5}{completeness:>7.0%}{row}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 windows per regime")
    parser.add_argument("--windows", type=int, default=1000, help="windows per regime")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cost", action="store_true", help="part 1 (the cost) only")
    parser.add_argument("--floor", action="store_true", help="part 4 only")
    parser.add_argument(
        "--data", choices=("class", "score"), help="part 3 only, on this data (both: all parts)"
    )
    args = parser.parse_args()
    windows = 100 if args.quick else args.windows
    rng = np.random.default_rng(args.seed)
    if args.data is not None:
        regimes(rng, windows, (args.data,))
        return
    if args.cost:
        costs(rng)
        return
    if not args.floor:
        costs(rng)
        k_choice(rng, 30 if args.quick else 200)
        regimes(rng, windows, ("class", "score"))
    floor(rng, windows)


if __name__ == "__main__":
    main()
