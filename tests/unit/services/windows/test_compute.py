"""compute_window_result: window metrics from sums, checked against independent
computations (evaluate on the raw scores, drift_verdict called directly, exact sums)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from builders import model_config, sums_of

from app.drift.histograms import WindowHistograms
from app.drift.settings import DriftSettings
from app.drift.simulation import shifted_logit_scores
from app.drift.verdict import drift_verdict
from app.metrics.area_intervals import FEW_NEGATIVES, calibrated_auc_pr_interval, ks_interval
from app.metrics.areas import roc_auc_from_counts
from app.metrics.binning import default_bin_edges
from app.metrics.confusion import ConfusionCounts
from app.metrics.evaluate import CURVE_METRICS, evaluate, threshold_suffix
from app.services.models.config import ModelConfig
from app.services.windows.compute import (
    INSUFFICIENT,
    MIN_OPS_AUC_PR_POSITIVES_X_PRIOR,
    TINY_PRIOR_AUC_PR,
    Tier,
    compute_window_result,
)
from app.services.windows.reference import baseline_period, dependent_windows
from app.services.windows.shape import MAX_CURVE_POINTS, downsample_indices
from app.services.windows.sums import WindowSums, sums_seed
from app.sla.objectives import has_interval
from app.statuses import DriftStatus, DriftVerdict

THRESHOLDS = (0.5, 0.3)
EDGES = default_bin_edges(THRESHOLDS, n_bins=2_000)


def make_model(**changes: Any) -> ModelConfig:
    fields: dict[str, Any] = {
        "name": "fraud",
        "pi0": 0.05,
        "cost_ratio": 0.7,
        "drift": {"reference": None, "min_class_count": 30},
        "bin_edges": EDGES,
    }
    thresholds = changes.pop("thresholds", THRESHOLDS)
    return model_config(thresholds, **{**fields, **changes})


def sample(
    rng: np.random.Generator, n: int, prior: float, shift: float = 0.0
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    return shifted_logit_scores(rng, n, prior, separation=1.8 - shift, offset=-1.0)


def label_only(c: ConfusionCounts, n_thresholds: int = 2) -> WindowSums:
    """A window fed only by confusion-matrix batches (no scores)."""
    empty = ConfusionCounts(0.0, 0.0, 0.0, 0.0)
    return WindowSums(
        n=int(c.n),
        positives=int(c.positives),
        hist_positives=None,
        hist_negatives=None,
        confusion=(c,) + (empty,) * (n_thresholds - 1),
        sums=None,
    )


@pytest.fixture(scope="module")
def data() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    return sample(np.random.default_rng(11), 20_000, 0.1)


def test_metrics_match_evaluate_on_the_raw_scores(
    data: tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]],
) -> None:
    scores, labels = data
    model = make_model()
    result = compute_window_result(model, sums_of(scores, labels, model), None)
    exact = evaluate(scores, labels, threshold=0.5, pi0=model.pi0, cost_ratio=model.cost_ratio)
    assert set(exact) <= set(result.metrics)
    curve_keys = {*CURVE_METRICS, "calibrated_auc_pr", "ops_auc_pr", "ops_auc_roc", "ops_auc_lift"}
    for name, value in exact.items():
        got = result.metrics[name]
        assert (got is None) == (value is None), name
        if value is None or got is None:
            continue
        if name in curve_keys:  # from 2,000 bins instead of 20,000 scores
            assert got == pytest.approx(value, abs=5e-3), name
        else:  # at the configured threshold: the exact confusion matrix
            assert got == pytest.approx(value, rel=1e-12, abs=1e-12), name


def test_secondary_threshold_metrics_are_suffixed_and_exact(
    data: tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]],
) -> None:
    scores, labels = data
    model = make_model()
    result = compute_window_result(model, sums_of(scores, labels, model), None)
    at_03 = evaluate(scores, labels, threshold=0.3, pi0=model.pi0, cost_ratio=model.cost_ratio)
    suffix = threshold_suffix(0.3)
    assert suffix == "@t=0.3"
    for name in ("f1", "precision", "recall", "calibrated_f1", "mcc", "weighted_accuracy"):
        assert result.metrics[name + suffix] == pytest.approx(at_03[name], rel=1e-12)
    for name in (*CURVE_METRICS, "prior", "brier", "log_loss"):
        assert name + suffix not in result.metrics  # threshold-free: reported once


def test_recompute_is_bit_identical_and_json_ready(
    data: tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]],
) -> None:
    scores, labels = data
    model = make_model()
    window = sums_of(scores, labels, model)
    first = compute_window_result(model, window, None)
    again = compute_window_result(model, sums_of(scores, labels, model), None)
    dump = json.dumps(first.__dict__, sort_keys=True, allow_nan=False)
    assert dump == json.dumps(again.__dict__, sort_keys=True, allow_nan=False)
    assert sums_seed(window) == sums_seed(sums_of(scores, labels, model))


def test_merged_windows_equal_the_window_of_all_their_data(
    data: tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]],
) -> None:
    scores, labels = data
    model = make_model()
    parts = [sums_of(scores[i::4], labels[i::4], model) for i in range(4)]
    merged = WindowSums.merge(parts)
    assert merged is not None
    whole = sums_of(scores, labels, model)
    assert merged.n == whole.n and merged.positives == whole.positives
    assert merged.hist_positives is not None and whole.hist_positives is not None
    assert np.array_equal(merged.hist_positives, whole.hist_positives)
    assert merged.confusion == whole.confusion
    got = compute_window_result(model, merged, None).metrics
    want = compute_window_result(model, whole, None).metrics
    assert got.keys() == want.keys()
    for name in got:
        assert got[name] == pytest.approx(want[name], rel=1e-9, abs=1e-12), name
    assert WindowSums.merge([]) is None


def test_scarce_class_gives_insufficient_data_not_numbers() -> None:
    rng = np.random.default_rng(12)
    scores, labels = sample(rng, 3_000, 0.004)  # about 12 positives
    model = make_model()
    window = sums_of(scores, labels, model)
    assert 0 < window.positives < 30
    result = compute_window_result(model, window, None)
    m, why = result.metrics, result.reasons
    for name in (
        "f1",
        "precision",
        "recall",
        "calibrated_f1",
        "auc_pr",
        "auc_roc",
        "ops_f1",
        "mcc",
        "balanced_accuracy",
        "weighted_accuracy",
        "f1@t=0.3",
    ):
        assert m[name] is None and why[name] == INSUFFICIENT, name
    for name in ("prior", "accuracy", "specificity", "fpr", "brier", "log_loss"):
        assert m[name] is not None and name not in why, name
    assert m["prior"] == pytest.approx(window.positives / window.n)


def test_undefined_metrics_carry_the_registry_reason() -> None:
    # 40 positives, 60 negatives, nothing predicted positive at 0.5: precision undefined.
    c = ConfusionCounts(tp=0.0, fp=0.0, fn=40.0, tn=60.0)
    result = compute_window_result(make_model(), label_only(c), None)
    assert result.metrics["precision"] is None
    assert result.reasons["precision"] == "no predicted positives (TP + FP = 0)"
    assert result.metrics["recall"] == 0.0


def test_label_only_window_has_labeling_metrics_and_no_curves() -> None:
    c = ConfusionCounts(tp=80.0, fp=40.0, fn=20.0, tn=860.0)
    result = compute_window_result(make_model(), label_only(c), None)
    assert result.curves is None
    assert result.metrics["f1"] == pytest.approx(160 / 220)
    assert not any(name in result.metrics for name in CURVE_METRICS)
    assert "f1@t=0.3" not in result.metrics  # no data at the other threshold


def test_mixed_window_uses_every_example_at_the_primary_threshold(
    data: tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]],
) -> None:
    scores, labels = data
    model = make_model()
    with_scores = sums_of(scores, labels, model)
    c = ConfusionCounts(tp=50.0, fp=30.0, fn=10.0, tn=910.0)
    mixed = with_scores + label_only(c)
    result = compute_window_result(model, mixed, None)
    total = with_scores.confusion[0] + c
    assert result.metrics["f1"] == pytest.approx(
        2 * total.tp / (2 * total.tp + total.fp + total.fn)
    )
    alone = compute_window_result(model, with_scores, None)
    assert result.metrics["auc_roc"] == alone.metrics["auc_roc"]  # curves: scored rows only


def test_curves_are_downsampled_and_calibrated_at_pi0(
    data: tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]],
) -> None:
    scores, labels = data
    model = make_model()
    result = compute_window_result(model, sums_of(scores, labels, model), None)
    curves = result.curves
    assert curves is not None
    assert set(curves) == {"roc", "pr", "calibrated_pr", "oprc"}
    for name in ("roc", "pr", "calibrated_pr"):
        lengths = {len(v) for k, v in curves[name].items() if k != "prior"}
        assert len(lengths) == 1 and 2 <= lengths.pop() <= MAX_CURVE_POINTS
    assert curves["calibrated_pr"]["prior"] == model.pi0
    roc = curves["roc"]
    assert roc["fpr"][0] == 0.0 and roc["tpr"][-1] == 1.0
    fpr, tpr = np.array(roc["fpr"]), np.array(roc["tpr"])
    area = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))
    assert area == pytest.approx(result.metrics["auc_roc"], abs=2e-3)
    assert len(curves["oprc"]["recall"]) == len(curves["oprc"]["ops"]) == 20
    assert all(o is None or 0.0 <= o <= 1.0 for o in curves["oprc"]["ops"])


def test_downsample_keeps_ends_order_and_shape() -> None:
    x = np.linspace(0.0, 1.0, 5_000) ** 3
    y = np.sqrt(np.linspace(0.0, 1.0, 5_000))
    keep = downsample_indices(x, y, 100)
    assert keep[0] == 0 and keep[-1] == 4_999 and keep.size <= 100
    assert np.all(np.diff(keep) > 0)
    full = float(roc_auc_from_counts(y * 100, x * 100))
    thin = float(roc_auc_from_counts(y[keep] * 100, x[keep] * 100))
    assert thin == pytest.approx(full, abs=2e-3)
    small = np.arange(5.0)
    assert downsample_indices(small, small, 100).tolist() == [0, 1, 2, 3, 4]


# --- drift ------------------------------------------------------------------

REFERENCE = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"}


def test_drift_without_reference_is_null() -> None:
    c = ConfusionCounts(tp=80.0, fp=40.0, fn=20.0, tn=860.0)
    drift = compute_window_result(make_model(), label_only(c), None).drift
    assert (drift["verdict"], drift["status"]) == ("none", DriftStatus.NO_REFERENCE)


def test_drift_inside_the_reference_period_is_reference() -> None:
    model = make_model(drift={"reference": REFERENCE})
    c = ConfusionCounts(tp=80.0, fp=40.0, fn=20.0, tn=860.0)
    result = compute_window_result(model, label_only(c), label_only(c), in_baseline_period=True)
    assert result.drift["verdict"] == DriftVerdict.REFERENCE


def test_drift_equals_the_verdict_on_the_histograms() -> None:
    rng = np.random.default_rng(13)
    model = make_model(drift={"reference": REFERENCE, "alpha": 0.01, "min_class_count": 30})
    reference = sums_of(*sample(rng, 50_000, 0.1), model)
    window = sums_of(*sample(rng, 10_000, 0.02), model)  # pure prior shift
    drift = compute_window_result(model, window, reference).drift
    assert reference.hist_positives is not None and reference.hist_negatives is not None
    assert window.hist_positives is not None and window.hist_negatives is not None
    expected = drift_verdict(
        WindowHistograms(reference.hist_positives, reference.hist_negatives, model.bin_edges),
        WindowHistograms(window.hist_positives, window.hist_negatives, model.bin_edges),
        threshold=0.5,
        settings=DriftSettings(alpha=0.01, min_class_count=30),
    ).to_dict()
    assert drift == expected
    assert drift["verdict"] == "prior"
    parts = drift["attribution"]["auc_pr"]
    assert parts["prior"] + parts["likelihood"] == pytest.approx(parts["total"])


def test_drift_of_label_only_windows_uses_the_threshold_matrices() -> None:
    model = make_model(drift={"reference": REFERENCE})
    reference = label_only(ConfusionCounts(tp=800.0, fp=400.0, fn=200.0, tn=8600.0))
    same_rates = label_only(ConfusionCounts(tp=80.0, fp=40.0, fn=20.0, tn=860.0))
    worse = label_only(ConfusionCounts(tp=40.0, fp=200.0, fn=60.0, tn=700.0))
    calm = compute_window_result(model, same_rates, reference).drift
    assert calm["verdict"] == "none" and calm["resolution"] == "threshold"
    assert "auc_pr" not in calm["attribution"]
    assert compute_window_result(model, worse, reference).drift["verdict"] == "likelihood"


def test_drift_with_an_empty_reference_period_is_insufficient() -> None:
    model = make_model(drift={"reference": REFERENCE})
    c = ConfusionCounts(tp=80.0, fp=40.0, fn=20.0, tn=860.0)
    drift = compute_window_result(model, label_only(c), None).drift
    assert (drift["verdict"], drift["status"]) == ("none", INSUFFICIENT)


# --- reference periods and dependents ----------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_fixed_reference_period_contains_the_windows_starting_in_it() -> None:
    model = make_model(
        drift={"reference": {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T05:30:00Z"}}
    )
    inside = [baseline_period(model, T0 + k * HOUR) for k in range(7)]
    assert all(p is not None for p in inside)
    assert [p.contains_window for p in inside if p is not None] == [True] * 6 + [False]
    period = inside[6]
    assert period is not None and (period.start, period.end) == (T0, T0 + 5.5 * HOUR)
    day = baseline_period(model, T0, T0 + 24 * HOUR)  # a merged day is not inside
    assert day is not None and not day.contains_window
    assert baseline_period(make_model(), T0) is None


def test_trailing_reference_is_the_windows_before() -> None:
    model = make_model(drift={"reference": {"trailing_windows": 3}})
    period = baseline_period(model, T0)
    assert period is not None
    assert (period.start, period.end, period.contains_window) == (T0 - 3 * HOUR, T0, False)
    dependents = dependent_windows(model, T0)
    assert dependents is not None
    assert (dependents.start_from, dependents.start_to) == (T0 + HOUR, T0 + 4 * HOUR)


def test_dependents_of_a_fixed_reference_window_are_all_the_others() -> None:
    model = make_model(drift={"reference": REFERENCE})
    inside = dependent_windows(model, T0 + 2 * HOUR)
    assert inside is not None and inside.exclude == (T0, T0 + 24 * HOUR)
    assert dependent_windows(model, T0 + 30 * HOUR) is None
    assert dependent_windows(make_model(), T0) is None


def test_empty_window_is_refused() -> None:
    with pytest.raises(ValueError, match="no examples"):
        compute_window_result(make_model(), label_only(ConfusionCounts(0, 0, 0, 0)), None)


def test_merge_refuses_different_thresholds() -> None:
    c = ConfusionCounts(tp=1.0, fp=1.0, fn=1.0, tn=1.0)
    with pytest.raises(ValueError, match="thresholds"):
        _ = label_only(c, 1) + label_only(c, 2)
    assert math.isfinite(float(c.n))


# --- intervals ------------------------------------------------------------------

PRIOR_INVARIANT = (
    "recall",
    "specificity",
    "balanced_accuracy",
    "calibrated_f1",
    "calibrated_precision",
    "calibrated_mcc",
    "auc_roc",
    "ops_f1",
    "ops_mcc",
    "ops_auc_pr",
    "ops_auc_roc",
)


def test_intervals_cover_the_prior_invariant_metrics_and_contain_them(
    data: tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]],
) -> None:
    scores, labels = data
    model = make_model()
    result = compute_window_result(model, sums_of(scores, labels, model), None)
    for name in PRIOR_INVARIANT:
        interval = result.intervals[name]
        low, high, value = interval["lower"], interval["upper"], result.metrics[name]
        assert low is not None and high is not None and value is not None, name
        assert low <= value <= high, name
        assert interval["level"] == 0.95
    for name in ("f1", "precision", "accuracy", "prior", "f1@t=0.3"):
        assert name not in result.intervals  # moves with the prior: no interval
    for name in ("calibrated_auc_pr", "ks"):  # closed forms, around the stored point
        interval = result.intervals[name]
        assert interval["lower"] < result.metrics[name] < interval["upper"], name
    # the SLA report's list of metrics with intervals is what the worker stores
    stored = {k for k, v in result.intervals.items() if v["lower"] is not None}
    assert stored == {k for k, v in result.metrics.items() if v is not None and has_interval(k)}


def test_calibrated_auc_pr_and_ks_intervals_are_the_librarys() -> None:
    """The worker stores the closed forms of the fine histograms; with too few negatives
    for pi0 the calibrated AUC-PR interval is null with the library's reason."""
    model = make_model(pi0=0.3)
    for n, prior, stored in ((4_000, 0.2, True), (4_000, 0.7, False)):
        scores, labels = sample(np.random.default_rng(5), n, prior)
        window = sums_of(scores, labels, model)
        result = compute_window_result(model, window, None)
        pos, neg = window.hist_positives, window.hist_negatives
        ap = calibrated_auc_pr_interval(pos, neg, 0.3)
        assert result.intervals["calibrated_auc_pr"] == {
            "lower": ap.low if stored else None,
            "upper": ap.high if stored else None,
            "level": 0.95,
            **({} if stored else {"reason": FEW_NEGATIVES}),
        }
        ks = ks_interval(pos, neg)
        assert (result.intervals["ks"]["lower"], result.intervals["ks"]["upper"]) == ks[:2]


def test_ops_auc_pr_has_no_interval_at_a_tiny_prior() -> None:
    """Fewer than 6 / prior positives (P^2 / n < 6): null with the reason; from 6 on: stored."""
    model = make_model()
    rng = np.random.default_rng(23)
    scores, labels = sample(rng, 40_000, 0.003)  # about 120 positives: P^2 / n ~ 0.36
    tiny = compute_window_result(model, sums_of(scores, labels, model), None).intervals
    assert labels.sum() ** 2 / labels.size < MIN_OPS_AUC_PR_POSITIVES_X_PRIOR
    assert tiny["ops_auc_pr"] == {
        "lower": None,
        "upper": None,
        "level": 0.95,
        "reason": TINY_PRIOR_AUC_PR,
    }
    assert tiny["ops_auc_roc"]["lower"] is not None  # the other areas keep theirs
    scores, labels = sample(rng, 2_000, 0.08)  # about 160 positives: P^2 / n ~ 13
    assert labels.sum() ** 2 / labels.size >= MIN_OPS_AUC_PR_POSITIVES_X_PRIOR
    enough = compute_window_result(model, sums_of(scores, labels, model), None).intervals
    assert enough["ops_auc_pr"]["lower"] is not None and "reason" not in enough["ops_auc_pr"]


def test_a_window_without_positives_has_specificity_and_fpr_intervals() -> None:
    model = make_model()
    scores, labels = sample(np.random.default_rng(19), 500, 0.0)
    result = compute_window_result(model, sums_of(scores, labels, model), None)
    for name in ("specificity", "fpr"):
        interval, value = result.intervals[name], result.metrics[name]
        assert value is not None
        assert interval["lower"] <= value <= interval["upper"], name
    assert "recall" not in result.intervals and result.metrics["recall"] is None


def test_area_intervals_need_a_hundred_examples_of_each_class() -> None:
    model = make_model()
    scores, labels = sample(np.random.default_rng(20), 1_000, 0.05)  # ~50 positives
    result = compute_window_result(model, sums_of(scores, labels, model), None)
    assert result.metrics["auc_roc"] is not None
    interval = result.intervals["auc_roc"]
    assert interval["lower"] is None and "fewer than 100" in interval["reason"]


def test_intervals_narrow_with_more_data() -> None:
    model = make_model()
    rng = np.random.default_rng(14)
    small = compute_window_result(model, sums_of(*sample(rng, 2_000, 0.2), model), None)
    large = compute_window_result(model, sums_of(*sample(rng, 50_000, 0.2), model), None)

    def width(result: Any, name: str) -> float:
        return float(result.intervals[name]["upper"] - result.intervals[name]["lower"])

    for name in ("recall", "calibrated_f1", "auc_roc", "ops_f1", "ops_auc_roc"):
        assert width(large, name) < width(small, name) / 2, name


def test_scarce_windows_get_no_intervals_for_masked_metrics() -> None:
    model = make_model()
    window = sums_of(*sample(np.random.default_rng(15), 3_000, 0.004), model)
    result = compute_window_result(model, window, None)
    assert "recall" not in result.intervals and "auc_roc" not in result.intervals
    assert set(result.intervals) <= {k for k, v in result.metrics.items() if v is not None}


@pytest.mark.slow
def test_auc_interval_from_coarse_bins_has_nominal_coverage() -> None:
    """Seeded simulation: 60 windows of a known population; the 95% interval of
    ROC-AUC (bootstrap on 256 coarse bins, shifted to the fine value) covers the
    population value in at least 51 (P(fewer) < 0.3% at the nominal rate)."""
    edges = default_bin_edges((0.5,), n_bins=500)
    model = make_model(thresholds=(0.5,), bin_edges=edges)
    rng = np.random.default_rng(16)
    population = sums_of(*sample(rng, 2_000_000, 0.2), model)
    truth = compute_window_result(model, population, None).metrics["auc_roc"]
    assert truth is not None
    covered = 0
    for _ in range(60):
        result = compute_window_result(model, sums_of(*sample(rng, 1_500, 0.2), model), None)
        low, high = result.intervals["auc_roc"]["lower"], result.intervals["auc_roc"]["upper"]
        assert low is not None and high is not None
        covered += low <= truth <= high
    assert covered >= 51, covered


def test_merging_windows_past_int64_is_refused_not_wrapped() -> None:
    """Two windows of 2^62 examples each: their histograms' int64 sums would wrap around."""
    from app.services.windows.limits import INT64_MAX, CountOverflow

    half = 2**62
    full = WindowSums(
        n=half,
        positives=half,
        hist_positives=np.array([half, 0], dtype=np.int64),
        hist_negatives=np.array([0, 0], dtype=np.int64),
        confusion=(ConfusionCounts(float(half), 0.0, 0.0, 0.0),),
        sums=None,
    )
    fits = WindowSums.merge([full, label_only(ConfusionCounts(0.0, 0.0, 0.0, 2.0**61), 1)])
    assert fits is not None and fits.n == half + 2**61 <= INT64_MAX
    with pytest.raises(CountOverflow, match="more than 2\\^63 - 1"):
        WindowSums.merge([full, full])


def test_the_labeling_ops_of_a_window_are_the_closed_forms_within_the_old_integration() -> None:
    """Issue 23: ops_mcc, ops_precision and ops_accuracy (at every threshold) come from the
    closed forms; the diagonal integration that computed them before agrees within its
    error, so a stored document moves by at most that, and every other key is as before."""
    from app.metrics.labeling import LABELING_METRICS
    from app.metrics.ops_closed import CLOSED_FORMS
    from app.metrics.ops_labeling import worse_areas

    rng = np.random.default_rng(23)
    model = model_config((0.3, 0.5, 0.7), n_bins=1000, pi0=0.1)
    for prior in (0.02, 0.1, 0.4):
        scores, labels = shifted_logit_scores(rng, 3000, prior, separation=1.5, offset=-2.0)
        window = sums_of(scores, labels, model)
        summary = compute_window_result(model, window, None, tier=Tier.SUMMARY)
        metrics, data_prior = summary.metrics, window.positives / window.n
        for name in CLOSED_FORMS:
            for suffix in ("", *(threshold_suffix(t) for t in model.thresholds[1:])):
                value, ops = metrics[name + suffix], metrics[f"ops_{name}{suffix}"]
                assert value is not None and ops is not None
                assert ops == CLOSED_FORMS[name](value, data_prior)
                old = worse_areas(LABELING_METRICS[name], [value], [data_prior])[0]
                assert abs(ops - old) < 5e-5
