"""A window's full result from its sums: metrics, intervals, drift verdict, curves.

Pure with respect to the database: :func:`compute_window_result` takes a
model's settings (:class:`~app.services.models.config.ModelConfig`) and plain
sums (:class:`~app.services.windows.sums.WindowSums`) and returns a
:class:`WindowResult`. The worker (:mod:`app.services.refresh.groups`) calls
it for stored windows; the read side calls it for merged windows
(re-windowing: ``WindowSums.merge`` of the stored windows, then this function).

Naming of the stored metrics (docs/worker.md):

* the keys of :func:`app.metrics.evaluate.evaluate_counts` at the model's
  primary threshold, pi0 and cost ratio, unprefixed (``f1``,
  ``calibrated_f1``, ``ops_f1``, ``auc_pr``, ``weighted_accuracy``, ...);
* for every other configured threshold t, the threshold-dependent keys again
  with the suffix ``@t=<t>`` (``f1@t=0.3``, ``calibrated_f1@t=0.3``, ...);
  curve areas and probability metrics do not depend on t and appear once.

A metric that needs a class with fewer than ``min_class_count`` examples in
the window is ``None`` with reason ``"insufficient_data"``; a metric whose
formula is undefined is ``None`` with the registry's reason.

Tiers: the summary (metrics, reasons, drift verdict, label-free estimate)
is computed on every refresh; the detail (curves and every interval: the
labeling metrics' credible intervals at pi0, the ``ops_*`` and curve-area
intervals) only when the worker decides so (app/services/refresh/tiers.py).
A full result is the summary plus the detail, from one code path.

Determinism: the result is a function of the sums alone. The random draws of
the intervals use generators seeded from a hash of the sums
(:func:`~app.services.windows.sums.sums_seed`: the credible intervals at pi0
with the seed alone, the other intervals with the seed and
:data:`DETAIL_STREAM`), so the same aggregate gives bit-identical results in
any process, whichever tier is computed, and a recomputation changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from app.drift.histograms import WindowHistograms
from app.drift.settings import DriftSettings
from app.drift.two_sample import coarsen, quantile_bin_starts
from app.drift.verdict import drift_verdict
from app.maturity import Completion
from app.metrics.area_intervals import calibrated_auc_pr_interval, ks_interval
from app.metrics.binning import Counts
from app.metrics.confusion import ConfusionCounts
from app.metrics.curves import CurveCounts, cumulative_counts_from_histograms, pr_curve, roc_curve
from app.metrics.evaluate import (
    OPS_METRICS,
    curve_metrics,
    evaluate_at_thresholds,
    evaluate_counts,
)
from app.metrics.labeling import LABELING_METRICS
from app.metrics.ops_scoring import oprc_curve
from app.metrics.uncertainty import (
    INTERVAL_LEVEL,
    bootstrap_intervals,
    credible_intervals,
    ops_interval,
    rate_interval,
)
from app.services.models.config import ModelConfig
from app.services.windows.estimate import (
    ERROR_REASON_KEY,
    error_withheld,
    guarded_estimate_document,
)
from app.services.windows.maturity import (
    MATURITY_STREAM,
    completed_sums,
    maturity_document,
    maturity_intervals,
    merged_maturity_intervals,
    window_completion,
)
from app.services.windows.shape import curve_points, interval_doc, json_floats
from app.services.windows.sums import WindowSums, sums_seed
from app.statuses import DriftStatus, DriftVerdict

Array = npt.NDArray[np.float64]

INSUFFICIENT = DriftStatus.INSUFFICIENT_DATA
"""Reason of a metric that needs a class with fewer than ``min_class_count`` examples."""

ANY_CLASS_METRICS = frozenset({"prior", "accuracy", "error_rate", "brier", "log_loss"})
"""Metrics that stay meaningful with few examples of either class."""
POSITIVES_ONLY_METRICS = frozenset({"recall", "fnr"})
"""Metrics computed from the actual positives alone."""
NEGATIVES_ONLY_METRICS = frozenset({"specificity", "fpr"})
"""Metrics computed from the actual negatives alone."""


# --- the output ----------------------------------------------------------


class Tier(StrEnum):
    """How much of a window's result one computation holds (module docstring)."""

    SUMMARY = "summary"
    """Metrics, reasons, drift verdict and label-free estimate: every refresh."""
    FULL = "full"
    """The summary plus the detail (curves and every interval)."""


@dataclass(frozen=True)
class WindowResult:
    """Everything stored for one window (JSON-ready: floats, None, str, lists, dicts).

    Attributes
    ----------
    metrics : dict of str to float or None
        Flat mapping, names as in ``evaluate`` (module docstring for
        non-primary thresholds).
    reasons : dict of str to str
        For every metric that is None: ``"insufficient_data"`` or why its
        formula is undefined; under ``"estimate"``, why the label-free
        estimate is None when computing it failed; and under ``"estimate.error"``
        (:data:`~app.services.windows.estimate.ERROR_REASON_KEY`) why the
        estimate's ``error`` is null although the window holds labelled rows.
    intervals : dict of str to dict
        ``{"lower", "upper", "level"}`` credible intervals of the
        prior-invariant metrics (calibrated_*, recall, specificity,
        balanced_accuracy, ops_*), where computable.
    drift : dict
        ``{"verdict", "prior", "likelihood", "attribution"}`` (the contract's
        shape) with a ``"status"``; verdict ``"reference"`` inside the
        reference period, and ``"none"`` with ``"status": "no_reference"`` or
        ``"insufficient_data"`` when nothing could be tested.
    curves : dict or None
        ``{"roc", "pr", "calibrated_pr", "oprc"}`` point lists, at most
        :data:`MAX_CURVE_POINTS` each (None for a label-only window). OPRC is
        OPS(precision | recall = u) at the window's prior on a 20-point grid.
    estimate : dict or None
        The label-free estimate from the window's unlabelled rows
        (:func:`app.services.windows.estimate.estimate_document`), its ``error``
        against the completed metrics (``error_against: "completed"``) or, in a
        window at least 95% labelled, the labelled ones (``"labelled"``).
    maturity : dict or None
        The completed window of a partially labelled window
        (:func:`app.services.windows.maturity.maturity_document`); where it is
        None, ``reasons["maturity"]`` says why (as ``reasons["estimate"]`` does
        for a null estimate).

    A window with unlabelled rows only has no metrics, intervals or curves,
    and the drift verdict "none" with status "insufficient_data".

    The result comes in two tiers (:class:`Tier`, :func:`compute_window_result`):
    the summary (metrics, reasons, drift, estimate) and the detail (curves and
    every interval), most of the cost.
    """

    metrics: dict[str, float | None]
    reasons: dict[str, str]
    intervals: dict[str, dict[str, float | None]]
    drift: dict[str, Any]
    curves: dict[str, Any] | None = field(default=None)
    estimate: dict[str, Any] | None = field(default=None)
    tier: Tier = field(default=Tier.FULL)
    """:attr:`Tier.SUMMARY`: ``curves`` is None and ``intervals`` empty."""
    maturity: dict[str, Any] | None = field(default=None)


def compute_window_result(
    model: ModelConfig,
    window: WindowSums,
    reference: WindowSums | None,
    *,
    in_baseline_period: bool = False,
    rng: np.random.Generator | None = None,
    tier: Tier = Tier.FULL,
    parts: Sequence[WindowSums] = (),
) -> WindowResult:
    """Compute a window's metrics, intervals, drift verdict and curves from its sums.

    Parameters
    ----------
    model : ModelConfig
        Thresholds, pi0, cost ratio, bin edges and drift settings.
    window : WindowSums
        The window (or the merge of several windows).
    reference : WindowSums or None
        The sum of the reference period's windows of the same segment
        (:func:`app.services.windows.reference.baseline_period`); None when the model has no
        reference or the period holds no data yet (and for a window inside the
        period). It is also the reference of the label-free estimate.
    in_baseline_period : bool
        The window belongs to the reference period: its verdict is "reference".
    rng : numpy Generator, optional
        Source of every interval's draws. By default two generators seeded
        from the sums (:func:`~app.services.windows.sums.sums_seed`; module
        docstring), which makes the result deterministic.
    tier : Tier
        :attr:`Tier.SUMMARY`: the summary alone. The full result is that
        summary plus the detail (curves and intervals).
    parts : sequence of WindowSums
        A merged window's stored windows (their sum is ``window``): each is
        completed on its own and the completions summed (docs/maturity.md).
        Empty for a stored window.

    Returns
    -------
    WindowResult
    """
    if window.n <= 0 and window.n_unlabelled <= 0:
        raise ValueError("the window holds no examples")
    completion = window_completion(model, parts or (window,))
    if window.n <= 0:
        no_labels = {
            "verdict": DriftVerdict.NONE,
            "status": DriftStatus.INSUFFICIENT_DATA,
            "detail": "the window has no labelled rows",
        }
        reasons: dict[str, str] = {"maturity": str(completion)}
        estimate = _estimate(model, window, reference, in_baseline_period, None, reasons)
        return WindowResult({}, reasons, {}, no_labels, None, estimate, tier)
    curve = _curve(model, window)
    metrics = _metrics(model, window, curve)
    reasons = _mask_insufficient(metrics, window, model.drift_settings().min_class_count)
    maturity = None
    if isinstance(completion, Completion):
        maturity = maturity_document(model, completion, _undefined_reason)
        whole = completed_sums(model, window, completion)
    else:
        reasons["maturity"] = completion
        whole = window
    drift = _drift(model, window, reference, in_baseline_period, whole)
    estimate = _estimate_with_error(
        model, window, reference, in_baseline_period, metrics, maturity, completion, reasons
    )
    summary = WindowResult(metrics, reasons, {}, drift, None, estimate, Tier.SUMMARY, maturity)
    if tier is Tier.SUMMARY:
        return summary
    curves, intervals = _detail(model, window, curve, metrics, rng)
    if maturity is not None and isinstance(completion, Completion):
        maturity = _with_intervals(model, window, completion, maturity, rng, parts)
    return replace(summary, intervals=intervals, curves=curves, tier=Tier.FULL, maturity=maturity)


def _with_intervals(
    model: ModelConfig,
    window: WindowSums,
    completion: Completion,
    maturity: dict[str, Any],
    rng: np.random.Generator | None,
    parts: Sequence[WindowSums],
) -> dict[str, Any]:
    """The maturity document with the detail tier's intervals of its completed metrics
    (a bootstrap seeded from the sums); a merged window's draw each stored window on its
    own (``parts``), or, where they cannot, it has its prior's alone and says why."""
    generator = rng or np.random.default_rng([sums_seed(window), MATURITY_STREAM])
    if len(parts) <= 1:
        drawn = maturity_intervals(model, window, completion, maturity["metrics"], generator)
        return {**maturity, "intervals": drawn}
    merged = merged_maturity_intervals(model, parts, completion, maturity["metrics"], generator)
    if isinstance(merged, str):
        prior = {k: maturity["prior"][k] for k in ("lower", "upper", "level")}
        reasons = {**maturity["reasons"], "intervals": merged}
        return {**maturity, "intervals": {"prior": prior}, "reasons": reasons}
    return {**maturity, "intervals": merged}


def _estimate_with_error(
    model: ModelConfig,
    window: WindowSums,
    reference: WindowSums | None,
    in_baseline_period: bool,
    metrics: dict[str, float | None],
    maturity: dict[str, Any] | None,
    completion: Completion | str,
    reasons: dict[str, str],
) -> dict[str, Any] | None:
    """The label-free estimate of a window with labelled rows, its ``error`` against the
    completed metrics, or the labelled ones of a mature window, else null with why."""
    not_completed = None if maturity is not None else str(completion)
    withheld = error_withheld(window.n, window.n_unlabelled, not_completed)
    against = "labelled" if maturity is None else "completed"
    compared = None if withheld else metrics if maturity is None else maturity["metrics"]
    estimate = _estimate(model, window, reference, in_baseline_period, compared, reasons)
    if estimate is not None and withheld is not None:
        reasons[ERROR_REASON_KEY] = withheld
    elif estimate is not None:
        estimate["error_against"] = against
    return estimate


def _estimate(
    model: ModelConfig,
    window: WindowSums,
    reference: WindowSums | None,
    in_baseline_period: bool,
    labelled: Mapping[str, float | None] | None,
    reasons: dict[str, str],
) -> dict[str, Any] | None:
    """The label-free estimate; where the window has unlabelled rows but no estimate,
    None and why in ``reasons["estimate"]``."""
    estimate, why = guarded_estimate_document(
        model,
        window.unlabelled,
        _histograms(reference),
        labelled,
        no_reference=_baseline_gap(model, reference, in_baseline_period),
    )
    if why is None and estimate is None:
        why = NO_UNLABELLED
    if why is not None:
        reasons["estimate"] = why
    return estimate


NO_UNLABELLED = "the window holds no unlabelled rows: nothing to estimate"
"""``reasons["estimate"]`` of a window of labelled rows only."""


def _baseline_gap(
    model: ModelConfig, reference: WindowSums | None, in_baseline_period: bool
) -> str | None:
    """Why the window has no drift reference to compare with, or None when it has one."""
    if not model.drift.get("reference"):
        return "no drift reference is configured for this model"
    if in_baseline_period:
        return "the window belongs to the drift reference period"
    if reference is None:
        return "the reference period holds no data yet"
    return None


DETAIL_STREAM = 1
"""Appended to the sums' seed for the generator of the ``ops_*`` and curve-area intervals
(the credible intervals at pi0 draw from the seed alone, as before tiers existed)."""


def _generators(
    window: WindowSums, rng: np.random.Generator | None
) -> tuple[np.random.Generator, np.random.Generator]:
    """The generators of the credible intervals at pi0 and of the other intervals
    (``rng`` for both, if given)."""
    if rng is not None:
        return rng, rng
    seed = sums_seed(window)
    return np.random.default_rng(seed), np.random.default_rng([seed, DETAIL_STREAM])


def _detail(
    model: ModelConfig,
    window: WindowSums,
    curve: CurveCounts | None,
    metrics: Mapping[str, float | None],
    rng: np.random.Generator | None,
) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """The detail tier: curves and intervals (the labeling metrics' at pi0, the
    ``ops_*`` and the curve areas')."""
    labeling_rng, other_rng = _generators(window, rng)
    curves = None if curve is None else _curves(model, curve)
    intervals = _labeling_intervals(model, window, metrics, labeling_rng)
    intervals.update(_ops_intervals(window, metrics, other_rng))
    intervals.update(_area_intervals(model, window, metrics, other_rng))
    return curves, intervals


def _histograms(window: WindowSums | None) -> tuple[Counts, Counts] | None:
    if window is None or window.hist_positives is None or window.hist_negatives is None:
        return None
    return window.hist_positives, window.hist_negatives


def _curve(model: ModelConfig, window: WindowSums) -> CurveCounts | None:
    if window.hist_positives is None or window.hist_negatives is None:
        return None
    if int(window.hist_positives.sum()) + int(window.hist_negatives.sum()) == 0:
        return None
    return cumulative_counts_from_histograms(
        window.hist_positives, window.hist_negatives, model.bin_edges
    )


def _metrics(
    model: ModelConfig, window: WindowSums, curve: CurveCounts | None
) -> dict[str, float | None]:
    options = {"pi0": model.pi0, "cost_ratio": model.cost_ratio}
    primary = window.confusion[0]
    if curve is None or math.isclose(curve.n, primary.n, rel_tol=1e-12):
        out = evaluate_counts(curve, primary, window.sums, **options)
    else:
        # Mixed window: the labeling metrics cover every example (confusion[0]),
        # the curve metrics the examples that came with scores or histograms.
        out = evaluate_counts(None, primary, window.sums, **options)
        labeling_keys = set(out)
        with_curve = evaluate_counts(
            curve, curve.confusion_at(model.primary_threshold), None, **options
        )
        out.update({k: v for k, v in with_curve.items() if k not in labeling_keys})
    out.update(evaluate_at_thresholds(model.thresholds[1:], window.confusion[1:], **options))
    return out


def _classes_needed(name: str) -> tuple[bool, bool]:
    """(needs positives, needs negatives) for metric ``name`` (threshold suffix ignored)."""
    base = name.split("@", 1)[0]
    if base in ANY_CLASS_METRICS:
        return False, False
    if base in POSITIVES_ONLY_METRICS:
        return True, False
    if base in NEGATIVES_ONLY_METRICS:
        return False, True
    return True, True


def _mask_insufficient(
    metrics: dict[str, float | None], window: WindowSums, min_class_count: int
) -> dict[str, str]:
    """Set metrics that need a scarce class to None; return the reason of every None."""
    few_pos = window.positives < min_class_count
    few_neg = window.negatives < min_class_count
    reasons: dict[str, str] = {}
    for name, value in metrics.items():
        if few_pos or few_neg:  # what each metric needs is looked up only then
            need_pos, need_neg = _classes_needed(name)
            if (need_pos and few_pos) or (need_neg and few_neg):
                metrics[name] = None
                reasons[name] = INSUFFICIENT
                continue
        if value is None:
            reasons[name] = _undefined_reason(name)
    return reasons


def _undefined_reason(name: str) -> str:
    base = name.split("@", 1)[0]
    for prefix in ("calibrated_", "ops_", ""):
        if base.startswith(prefix) and base[len(prefix) :] in LABELING_METRICS:
            return LABELING_METRICS[base[len(prefix) :]].undefined_when
    return "undefined for this window's counts (one class only)"


def _labeling_intervals(
    model: ModelConfig,
    window: WindowSums,
    metrics: Mapping[str, float | None],
    rng: np.random.Generator,
) -> dict[str, dict[str, Any]]:
    """Credible intervals of the labeling metrics at the primary threshold (detail tier).

    Brodersen et al., Jeffreys rule with the boundary modification: the
    prior-free ones (recall, specificity, balanced_accuracy, ...; specificity
    and fpr also in a window without positives) and every
    ``calibrated_<name>`` from one posterior of (alpha, beta) at pi0. Only
    metrics with a value get an interval; none at the other thresholds
    (docs/worker.md, "Intervals").
    """
    primary = window.confusion[0]
    out: dict[str, dict[str, Any]] = {}
    if primary.n == 0:
        return out
    wanted = {
        name: (f"calibrated_{name}" if LABELING_METRICS[name].prior_dependent else name)
        for name in LABELING_METRICS
    }
    at_pi0 = credible_intervals(primary, list(wanted), rng=rng, pi0=model.pi0, level=INTERVAL_LEVEL)
    for name, key in wanted.items():
        if metrics.get(key) is not None:
            out[key] = interval_doc(*at_pi0[name])
    return out


def _ops_intervals(
    window: WindowSums, metrics: Mapping[str, float | None], rng: np.random.Generator
) -> dict[str, dict[str, Any]]:
    """``ops_<labeling>`` intervals (detail tier): OPS of the raw metric's interval
    ends (the prior drawn with the rates) over the window prior's interval."""
    primary = window.confusion[0]
    out: dict[str, dict[str, Any]] = {}
    ops_labeling = [m for m in OPS_METRICS if m in LABELING_METRICS and metrics.get(f"ops_{m}")]
    if primary.n == 0 or not ops_labeling:
        return out
    raw = credible_intervals(primary, ops_labeling, rng=rng, level=INTERVAL_LEVEL)
    prior = rate_interval(primary.positives, primary.n, INTERVAL_LEVEL)
    for name in ops_labeling:
        out[f"ops_{name}"] = interval_doc(*ops_interval(name, raw[name], prior))
    return out


BOOTSTRAP_BINS = 256
"""Bins of the histograms resampled for the curve-area intervals."""
BOOTSTRAP_RESAMPLES = 400
"""Bootstrap resamples per window."""
MIN_AREA_CLASS_COUNT = 100
"""Fewest examples of each class for a curve-area interval (docs/intervals.md)."""
MIN_OPS_AUC_PR_POSITIVES_X_PRIOR = 6.0
"""Fewest positives times the window's prior (P^2 / n) for an ``ops_auc_pr`` interval.

At tiny priors the window's AUC-PR is biased upward by its few top-ranked
positives (+40% at 100 positives and prior 0.001 with AUC 0.76) and the
bootstrap does not remove it; measured coverage (bench/bench_coverage.py)
reaches 0.93 from P x prior = 6 on (6,000 positives at prior 0.001, 1,000 at
0.005), and was 0.88-0.91 below it (docs/intervals.md)."""
TINY_PRIOR_AUC_PR = (
    f"fewer than {MIN_OPS_AUC_PR_POSITIVES_X_PRIOR:g} / prior positives: AUC-PR is biased "
    "upward at tiny priors (docs/intervals.md)"
)
"""Reason of a null ``ops_auc_pr`` interval under :data:`MIN_OPS_AUC_PR_POSITIVES_X_PRIOR`."""


def _closed_form_intervals(
    model: ModelConfig, pos: Array, neg: Array, metrics: Mapping[str, float | None]
) -> dict[str, dict[str, Any]]:
    """``calibrated_auc_pr`` and ``ks`` intervals of the fine histograms, not resampled
    (:mod:`app.metrics.area_intervals`); null with the library's reason where it has none."""
    out: dict[str, dict[str, Any]] = {}
    if metrics.get("calibrated_auc_pr") is not None:
        auc_pr = calibrated_auc_pr_interval(pos, neg, model.pi0, INTERVAL_LEVEL)
        out["calibrated_auc_pr"] = interval_doc(*auc_pr)
    if metrics.get("ks") is not None:
        out["ks"] = interval_doc(*ks_interval(pos, neg, INTERVAL_LEVEL))
    return out


def _area_intervals(
    model: ModelConfig,
    window: WindowSums,
    metrics: Mapping[str, float | None],
    rng: np.random.Generator,
) -> dict[str, dict[str, Any]]:
    """Curve-area intervals (detail tier): auc_roc, gini, and the areas behind
    ops_auc_*: a BCa Poisson bootstrap of the histograms (class totals vary),
    coarsened to at most :data:`BOOTSTRAP_BINS` bins at the quantiles of the two
    classes (resampling 10,000 fine bins costs 100 times more for the same
    interval) and shifted by the point estimate's discretisation error so that
    the interval is centred on the fine-bin value; null with a reason where a
    class is scarce. ``calibrated_auc_pr`` and ``ks`` are not resampled
    (:func:`_closed_form_intervals`)."""
    if window.hist_positives is None or window.hist_negatives is None:
        return {}
    pos = window.hist_positives.astype(np.float64)
    neg = window.hist_negatives.astype(np.float64)
    if not (pos.sum() > 0 and neg.sum() > 0):
        return {}
    out = _closed_form_intervals(model, pos, neg, metrics)
    if min(pos.sum(), neg.sum()) < MIN_AREA_CLASS_COUNT:
        few = f"fewer than {MIN_AREA_CLASS_COUNT} examples of a class (docs/intervals.md)"
        for key in ("auc_roc", "gini", "ops_auc_pr", "ops_auc_roc", "ops_auc_lift"):
            if metrics.get(key) is not None:
                out[key] = interval_doc(math.nan, math.nan, few)
        return out
    starts = quantile_bin_starts(pos / pos.sum() + neg / neg.sum(), BOOTSTRAP_BINS)
    cpos, cneg = coarsen(pos, starts), coarsen(neg, starts)
    coarse = cumulative_counts_from_histograms(cpos, cneg, np.append(model.bin_edges[starts], 1.0))
    coarse_metrics = curve_metrics(coarse)
    raw = bootstrap_intervals(
        cpos,
        cneg,
        ["auc_roc", "gini", "auc_pr", "auc_lift"],
        rng=rng,
        level=INTERVAL_LEVEL,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="poisson",
    )

    def shifted(key: str, interval: tuple[float, float]) -> tuple[float, float]:
        fine, rough = metrics.get(key), coarse_metrics.get(key)
        if fine is None or rough is None:
            return math.nan, math.nan
        return interval[0] + fine - rough, interval[1] + fine - rough

    for key in ("auc_roc", "gini"):
        if metrics.get(key) is not None:
            out[key] = interval_doc(*shifted(key, raw[key]))
    prior = rate_interval(window.positives, window.n, INTERVAL_LEVEL)
    for area in ("auc_pr", "auc_roc", "auc_lift"):
        if metrics.get(f"ops_{area}") is not None and metrics.get(area) is not None:
            out[f"ops_{area}"] = interval_doc(*ops_interval(area, shifted(area, raw[area]), prior))
    if "ops_auc_pr" in out and window.positives**2 / window.n < MIN_OPS_AUC_PR_POSITIVES_X_PRIOR:
        out["ops_auc_pr"] = interval_doc(math.nan, math.nan, TINY_PRIOR_AUC_PR)
    return out


# --- drift -----------------------------------------------------------------


def _drift(
    model: ModelConfig,
    window: WindowSums,
    reference: WindowSums | None,
    in_baseline_period: bool,
    whole: WindowSums,
) -> dict[str, Any]:
    """The drift verdict. ``whole`` is the window completed (:func:`completed_sums`) or
    ``window`` itself: the prior test reads its prior; the likelihood test reads the
    labelled rows under ``class`` (they hold the class-conditional distributions), the
    completed histograms under ``score`` (docs/drift.md)."""
    # why nothing was tested, under the API's key "detail"
    untested = _baseline_gap(model, reference, in_baseline_period)
    if not model.drift.get("reference"):
        status = DriftStatus.NO_REFERENCE
        return {"verdict": DriftVerdict.NONE, "status": status, "detail": untested}
    if in_baseline_period:
        return {"verdict": DriftVerdict.REFERENCE}
    if reference is None:
        status = DriftStatus.INSUFFICIENT_DATA
        return {"verdict": DriftVerdict.NONE, "status": status, "detail": untested}
    settings = model.drift_settings()
    likely = whole if model.label_missingness == "score" else window
    ref_counts, win_counts, whole_counts = (
        _histograms(reference),
        _histograms(likely),
        _histograms(whole),
    )
    full = window.has_full_histograms and reference.has_full_histograms
    if full and ref_counts is not None and win_counts is not None and whole_counts is not None:
        ref_h = WindowHistograms.of_counts(*ref_counts, model.bin_edges)
        win_h = WindowHistograms.of_counts(*win_counts, model.bin_edges)
        whole_h = WindowHistograms.of_counts(*whole_counts, model.bin_edges)
        return drift_verdict(
            ref_h, win_h, threshold=model.primary_threshold, settings=settings, whole=whole_h
        ).to_dict()
    return _drift_at_threshold(model, window, reference, settings)


def _drift_at_threshold(
    model: ModelConfig, window: WindowSums, reference: WindowSums, settings: DriftSettings
) -> dict[str, Any]:
    """Drift from the matrices at the primary threshold (windows without full histograms).

    Each class's "histogram" has two bins, below and at/above the threshold,
    so the likelihood test compares TPR and FPR; AUC-PR is not attributed.
    """
    t = model.primary_threshold
    edges = np.array([0.0, t, 1.0])

    def two_bins(c: ConfusionCounts) -> WindowHistograms:
        return WindowHistograms([c.fn, c.tp], [c.tn, c.fp], edges)

    doc = drift_verdict(
        two_bins(reference.confusion[0]),
        two_bins(window.confusion[0]),
        threshold=t,
        settings=settings,
    ).to_dict()
    doc["attribution"].pop("auc_pr", None)
    doc["resolution"] = "threshold"
    return doc


# --- curves -----------------------------------------------------------------


def _curves(model: ModelConfig, curve: CurveCounts) -> dict[str, Any]:
    fpr, tpr, roc_t = roc_curve(curve)
    recall, precision, pr_t = pr_curve(curve)
    c_recall, c_precision, _ = pr_curve(curve, model.pi0)
    oprc_recall, oprc_ops = oprc_curve(curve)
    return {
        "oprc": {"recall": json_floats(oprc_recall), "ops": json_floats(oprc_ops)},
        "roc": curve_points({"fpr": fpr, "tpr": tpr, "threshold": roc_t}, ("fpr", "tpr")),
        "pr": curve_points(
            {"recall": recall, "precision": precision, "threshold": pr_t}, ("recall", "precision")
        ),
        "calibrated_pr": {
            "prior": model.pi0,
            **curve_points(
                {"recall": c_recall, "precision": c_precision, "threshold": pr_t},
                ("recall", "precision"),
            ),
        },
    }
