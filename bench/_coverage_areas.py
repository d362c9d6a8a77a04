"""Coverage of the calibrated AUC-PR and KS intervals, and the SLA at its target
(sections 3 and 4 of ``bench_coverage.py``; imported as ``_coverage_areas``).

3. The closed-form intervals of :mod:`app.metrics.area_intervals`, the ones the
   worker stores (``tests/unit/services/windows/test_compute.py`` checks that they are),
   on the default 10,000 bins: five score models (binormal, a weak binormal,
   unequal variances, five tied score values, and point masses at exactly 0
   and 1), 30 to 10,000 expected positives, window priors 0.01/0.1/0.5 and
   pi0 0.01/0.1/0.5 (calibrated AUC-PR) — a cell per model, positives, window
   prior (and pi0) — against the population value of the same bins. Beside
   them, "before": the library's BCa bootstrap of the same windows (the
   binormal model, 30-300 positives, the histograms coarsened to 256 bins as
   the worker's bootstrap does).
4. The SLA at its target: windows of 300 expected positives, an objective
   ``auc_pr >= v`` (read as ``calibrated_auc_pr``) and ``ks >= v`` with v the
   population value; the share of windows ``breached`` decided on the point
   (before) and by the interval rule on the stored intervals (after), through
   ``compute_window_result`` and ``evaluate_objective`` as the SLA report does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from app.drift.simulation import binormal_bin_probabilities
from app.drift.two_sample import coarsen, quantile_bin_starts
from app.metrics.area_intervals import calibrated_auc_pr_interval, ks_interval
from app.metrics.areas import average_precision_from_counts, ks_from_counts
from app.metrics.binning import default_bin_edges
from app.metrics.uncertainty import _bca_bootstrap
from app.services.models.config import ModelConfig
from app.services.windows.compute import compute_window_result
from app.services.windows.sums import WindowSums
from app.sla.objectives import Objective, evaluate_objective

Array = npt.NDArray[np.float64]
EDGES = default_bin_edges((0.5,))
POSITIVES = (30, 100, 300, 1_000, 10_000)
WINDOW_PRIORS = (0.01, 0.1, 0.5)
PI0S = (0.01, 0.1, 0.5)
FLOOR = 0.93


def score_models() -> Iterator[tuple[str, Array, Array]]:
    """(name, positives' bin probabilities, negatives') on EDGES."""

    def binormal(mu: float, sd: float = 1.0) -> Array:
        return binormal_bin_probabilities(EDGES, mu, sd)

    yield "binormal", binormal(0.0), binormal(-2.5)
    yield "weak", binormal(0.0), binormal(-1.0)
    yield "unequal sd", binormal(0.0, 2.0), binormal(-1.5)
    ties_pos, ties_neg = np.zeros(EDGES.size - 1), np.zeros(EDGES.size - 1)
    tied = np.searchsorted(EDGES, [0.1, 0.3, 0.5, 0.7, 0.9], side="right") - 1
    ties_pos[tied] = [0.1, 0.15, 0.2, 0.25, 0.3]
    ties_neg[tied] = [0.35, 0.3, 0.2, 0.1, 0.05]
    yield "5 tied scores", ties_pos, ties_neg
    exact_pos, exact_neg = 0.7 * binormal(0.5), 0.8 * binormal(-2.0)
    exact_pos[[0, -1]] += [0.05, 0.25]  # scores of exactly 0 and exactly 1
    exact_neg[[0, -1]] += [0.19, 0.01]
    yield "exact 0/1", exact_pos, exact_neg


def _truth(p_pos: Array, p_neg: Array, pi0: float | None) -> float:
    t, f = np.cumsum(p_pos[::-1]), np.cumsum(p_neg[::-1])
    if pi0 is None:
        return float(ks_from_counts(t, f))
    return float(average_precision_from_counts(pi0 * t, (1.0 - pi0) * f))


def _window(
    rng: np.random.Generator, p_pos: Array, p_neg: Array, m: int, prior: float
) -> tuple[Array, Array]:
    n = round(m / prior)
    n_pos = int(rng.binomial(n, prior))
    return rng.multinomial(n_pos, p_pos), rng.multinomial(n - n_pos, p_neg)


def _point(pos: Array, neg: Array, pi0: float | None) -> float:
    return _truth(pos / pos.sum(), neg / neg.sum(), pi0)


def _before(
    pos: Array, neg: Array, pi0: float, rng: np.random.Generator
) -> dict[str, tuple[float, float]]:
    """The library's BCa bootstrap as it was for these two metrics (Poisson resampling,
    400 resamples, coarsened to 256 bins and shifted to the fine-bin point as the
    worker's bootstrap is)."""
    starts = quantile_bin_starts(pos / pos.sum() + neg / neg.sum(), 256)
    cpos, cneg = coarsen(pos.astype(float), starts), coarsen(neg.astype(float), starts)
    got = _bca_bootstrap(cpos, cneg, ["calibrated_auc_pr", "ks"], rng, pi0, 0.95, 400, "poisson")
    out = {}
    for key, at in (("calibrated_auc_pr", pi0), ("ks", None)):
        shift = _point(pos, neg, at) - _point(cpos, cneg, at)
        out[key] = (got[key][0] + shift, got[key][1] + shift)
    return out


def area_coverage(rng: np.random.Generator, trials: int) -> None:
    print(f"\n3. calibrated AUC-PR and KS intervals (closed forms), {trials} windows per cell")
    print("   cell = coverage (share of windows with a stored interval that contain the")
    print("   population value) / share of windows storing one; '<' coverage + 2 SE < 0.93")
    rows: list[tuple[str, str, int, float, float, float, float]] = []
    before: list[tuple[str, int, float, float]] = []
    start = time.perf_counter()
    timed = 0
    for name, p_pos, p_neg in score_models():
        ks_truth = _truth(p_pos, p_neg, None)
        ap_truths = {pi0: _truth(p_pos, p_neg, pi0) for pi0 in PI0S}
        for m in POSITIVES:
            for prior in WINDOW_PRIORS:
                hits = {key: 0 for key in (None, *PI0S)}
                seen = dict.fromkeys(hits, 0)
                old_hits = {key: 0 for key in ("ks", *PI0S)}
                old_seen = dict.fromkeys(old_hits, 0)
                for _ in range(trials):
                    pos, neg = _window(rng, p_pos, p_neg, m, prior)
                    if pos.sum() == 0 or neg.sum() == 0:
                        continue
                    low, high, _ = ks_interval(pos, neg)
                    seen[None] += 1
                    hits[None] += low - 1e-12 <= ks_truth <= high + 1e-12
                    for pi0 in PI0S:
                        low, high, reason = calibrated_auc_pr_interval(pos, neg, pi0)
                        if reason is None:
                            seen[pi0] += 1
                            hits[pi0] += low - 1e-12 <= ap_truths[pi0] <= high + 1e-12
                    timed += 1
                    if name == "binormal" and m <= 300:
                        for pi0 in PI0S:
                            old = _before(pos, neg, pi0, rng)
                            low, high = old["calibrated_auc_pr"]
                            if math.isfinite(low):
                                old_seen[pi0] += 1
                                old_hits[pi0] += low <= ap_truths[pi0] <= high
                        low, high = old["ks"]
                        old_seen["ks"] += 1
                        old_hits["ks"] += low <= ks_truth <= high
                for key in hits:
                    if seen[key]:
                        cov = hits[key] / seen[key]
                        se = math.sqrt(max(cov * (1 - cov), 1e-4) / seen[key])
                        metric = "ks" if key is None else f"calibrated_auc_pr@{key}"
                        rows.append((metric, name, m, prior, cov, se, seen[key] / trials))
                for key in old_hits:
                    if old_seen[key]:
                        metric = "ks" if key == "ks" else f"calibrated_auc_pr@{key}"
                        before.append((metric, m, prior, old_hits[key] / old_seen[key]))
    elapsed = time.perf_counter() - start
    print(f"   ({timed} windows, {elapsed:.0f} s in all)")
    _print_cells(rows)
    _print_before(before, rows)
    _time_per_window(rng)


def _print_cells(rows: list[tuple[str, str, int, float, float, float, float]]) -> None:
    metrics = sorted({r[0] for r in rows}, key=lambda k: (k != "ks", k))
    cols = [(m, p) for m in POSITIVES for p in WINDOW_PRIORS]
    print("\n   metric / model" + " " * 26 + "".join(f"{f'{m}/{p}':>12}" for m, p in cols))
    low_cells = []
    for metric in metrics:
        for model in dict.fromkeys(r[1] for r in rows):
            cells = {(r[2], r[3]): r for r in rows if r[0] == metric and r[1] == model}
            text = []
            for col in cols:
                r = cells.get(col)
                if r is None or r[6] < 0.05:
                    text.append(f"{'-':>12}")
                    continue
                flag = "<" if r[4] + 2 * r[5] < FLOOR else ""
                if flag:
                    low_cells.append(f"{metric} {model} {col[0]}/{col[1]} ({r[4]:.3f})")
                share = "" if r[6] > 0.995 else f"/{r[6]:.2f}"
                text.append(f"{flag + f'{r[4]:.3f}' + share:>12}")
            print(f"   {metric + ' ' + model:<40}" + "".join(text))
    stored = [r[4] for r in rows if r[6] >= 0.05]
    print(
        f"\n   stored cells: {len(stored)}, lowest {min(stored):.3f}, median "
        f"{float(np.median(stored)):.3f}; below the floor: {'; '.join(low_cells) or 'none'}"
    )


def _print_before(
    before: list[tuple[str, int, float, float]],
    rows: list[tuple[str, str, int, float, float, float, float]],
) -> None:
    print("\n   before/after, binormal model (before: the library's BCa bootstrap)")
    print("   {:<26} {:>10} {:>8} {:>8}".format("metric", "pos/prior", "before", "after"))
    after = {(r[0], r[2], r[3]): (r[4], r[6]) for r in rows if r[1] == "binormal"}
    for metric, m, prior, cov in before:
        cov_after, share = after.get((metric, m, prior), (math.nan, 0.0))
        shown = f"{cov_after:.3f}" if share >= 0.05 else "-"
        print(f"   {metric:<26} {f'{m}/{prior}':>10} {cov:>8.3f} {shown:>8}")


def _time_per_window(rng: np.random.Generator) -> None:
    _, p_pos, p_neg = next(score_models())
    pos, neg = _window(rng, p_pos, p_neg, 1_000, 0.1)
    for label, call in (
        ("calibrated AUC-PR", lambda: calibrated_auc_pr_interval(pos, neg, 0.1)),
        ("KS", lambda: ks_interval(pos, neg)),
    ):
        start = time.perf_counter()
        for _ in range(200):
            call()
        ms = (time.perf_counter() - start) / 200 * 1e3
        print(f"   {label} interval of one window ({EDGES.size - 1} bins): {ms:.2f} ms")


def _sums(pos: Array, neg: Array) -> WindowSums:
    return WindowSums.from_histograms(pos, neg, EDGES, (0.5,))


def sla_at_target(rng: np.random.Generator, rounds: int) -> None:
    print(f"\n4. SLA at its target: {rounds} x 40 windows of 300 expected positives, the")
    print("   objective's target = the population value; share of windows breached")
    print(
        "   {:<34} {:>10} {:>14} {:>14} {:>12}".format(
            "objective", "prior/pi0", "before (point)", "after (interval)", "inconclusive"
        )
    )
    _, p_pos, p_neg = next(score_models())
    for prior, pi0 in ((0.01, 0.01), (0.05, 0.05), (0.1, 0.05)):
        model = ModelConfig(
            id=1,
            name="bench",
            window="1h",
            thresholds=(0.5,),
            pi0=pi0,
            cost_ratio=None,
            segments=frozenset(),
            sla=(),
            drift={"reference": None},
            bin_edges=EDGES,
        )
        objectives = [
            Objective("auc_pr", ">=", _truth(p_pos, p_neg, pi0)),
            Objective("ks", ">=", _truth(p_pos, p_neg, None)),
        ]
        counts = {o.metric: {"point": 0, "interval": 0, "inconclusive": 0} for o in objectives}
        windows = rounds * 40
        for _ in range(windows):
            pos, neg = _window(rng, p_pos, p_neg, 300, prior)
            result = compute_window_result(model, _sums(pos, neg), None)
            for o in objectives:
                after = evaluate_objective(o, result.metrics, result.intervals, result.reasons)
                point = evaluate_objective(
                    Objective(o.metric, o.op, o.target, "point"), result.metrics
                )
                counts[o.metric]["point"] += point.status == "breached"
                counts[o.metric]["interval"] += after.status == "breached"
                counts[o.metric]["inconclusive"] += after.status == "inconclusive"
        for o in objectives:
            c = counts[o.metric]
            print(
                "   {:<34} {:>10} {:>14.3f} {:>14.3f} {:>12.3f}".format(
                    f"{o.metric} >= {o.target:.4f}",
                    f"{prior}/{pi0}",
                    c["point"] / windows,
                    c["interval"] / windows,
                    c["inconclusive"] / windows,
                )
            )
