"""Metrics at a reference prior against closed forms and resampled data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn import metrics as skm

from app.errors import InvalidInput
from app.metrics.calibrated import (
    calibrated_average_precision,
    calibrated_metrics,
    class_balanced_metrics,
)
from app.metrics.confusion import ConfusionCounts
from app.metrics.curves import cumulative_counts
from app.metrics.labeling import PRIOR_DEPENDENT, labeling_metrics

COUNTS = ConfusionCounts(tp=30, fp=10, fn=20, tn=140)  # pi = 0.25


def test_keys_are_calibrated_and_balanced_forms_of_every_prior_dependent_metric() -> None:
    assert list(calibrated_metrics(COUNTS, 0.1)) == [f"calibrated_{n}" for n in PRIOR_DEPENDENT]
    assert list(class_balanced_metrics(COUNTS)) == [f"balanced_{n}" for n in PRIOR_DEPENDENT]


def test_at_the_data_prior_calibrated_equals_raw() -> None:
    raw = labeling_metrics(COUNTS)
    cal = calibrated_metrics(COUNTS, COUNTS.prior)
    for name in PRIOR_DEPENDENT:
        assert cal[f"calibrated_{name}"] == pytest.approx(raw[name], rel=1e-12), name


@pytest.mark.parametrize("pi0", [0.5, 0.1, 0.01])
def test_calibrated_precision_f1_accuracy_and_recall_gain_closed_forms(pi0: float) -> None:
    c, pi = COUNTS, COUNTS.prior
    m = calibrated_metrics(c, pi0)
    ratio = pi * (1 - pi0) / (pi0 * (1 - pi))  # Siblini et al.: TP / (TP + c·FP)
    prec = c.tp / (c.tp + ratio * c.fp)
    tpr, tnr = c.tp / c.positives, c.tn / c.negatives
    assert m["calibrated_precision"] == pytest.approx(prec, rel=1e-12)
    assert m["calibrated_f1"] == pytest.approx(2 * prec * tpr / (prec + tpr), rel=1e-12)
    assert m["calibrated_accuracy"] == pytest.approx(pi0 * tpr + (1 - pi0) * tnr, rel=1e-12)
    assert m["calibrated_recall_gain"] == pytest.approx((tpr - pi0) / ((1 - pi0) * tpr), rel=1e-12)
    assert m["calibrated_lift"] == pytest.approx(prec / pi0, rel=1e-12)


@pytest.mark.parametrize("pi0", [0.5, 0.05, 0.001])
def test_calibrated_mcc_matches_the_count_derived_parametrisation(pi0: float) -> None:
    a, b = COUNTS.alpha, COUNTS.beta
    num = math.sqrt(pi0 * (1 - pi0)) * (1 - a - b)
    den = math.sqrt((pi0 * (1 - b) + (1 - pi0) * a) * ((1 - pi0) * (1 - a) + pi0 * b))
    assert calibrated_metrics(COUNTS, pi0)["calibrated_mcc"] == pytest.approx(num / den, rel=1e-12)


def test_calibrated_metrics_equal_raw_metrics_of_resampled_counts() -> None:
    # negatives x3: the same alpha and beta, prior 50/500 = 0.1, integer counts
    resampled = ConfusionCounts(tp=30, fp=30, fn=20, tn=420)
    raw = labeling_metrics(resampled)
    cal = calibrated_metrics(COUNTS, 0.1)
    for name in PRIOR_DEPENDENT:
        assert cal[f"calibrated_{name}"] == pytest.approx(raw[name], rel=1e-12), name


def test_class_balanced_measures() -> None:
    bal = class_balanced_metrics(COUNTS)
    tpr, fpr = COUNTS.tp / COUNTS.positives, COUNTS.fp / COUNTS.negatives
    assert bal["balanced_accuracy"] == pytest.approx(
        labeling_metrics(COUNTS)["balanced_accuracy"], rel=1e-12
    )
    assert bal["balanced_precision"] == pytest.approx(tpr / (tpr + fpr), rel=1e-12)
    assert bal["balanced_error_rate"] == pytest.approx(1 - bal["balanced_accuracy"], rel=1e-12)


def test_one_class_data_have_no_calibrated_metrics() -> None:
    only_pos = ConfusionCounts(tp=5, fp=0, fn=2, tn=0)
    assert all(v is None for v in calibrated_metrics(only_pos, 0.3).values())


def _data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (rng.random(800) < 0.2).astype(int)
    s = np.round(1 / (1 + np.exp(-(rng.normal(size=800) + 1.2 * y))), 2)
    return s, y


@pytest.mark.parametrize("k", [1, 3, 10])
def test_calibrated_auc_pr_is_the_average_precision_of_resampled_data(k: int) -> None:
    s, y = _data(k)
    curve = cumulative_counts(s, y)
    s_k = np.concatenate((s[y == 1], np.repeat(s[y == 0], k)))
    y_k = np.concatenate((np.ones(int(curve.positives)), np.zeros(k * int(curve.negatives))))
    pi_k = curve.positives / (curve.positives + k * curve.negatives)
    want = skm.average_precision_score(y_k, s_k)
    assert calibrated_average_precision(curve, pi_k) == pytest.approx(want, rel=1e-12)


def test_calibrated_auc_pr_undefined_and_validated() -> None:
    assert math.isnan(calibrated_average_precision(cumulative_counts([0.3, 0.6], [1, 1]), 0.5))
    with pytest.raises(InvalidInput) as err:
        calibrated_average_precision(cumulative_counts([0.3, 0.6], [0, 1]), 1.0)
    assert err.value.field == "pi0"
    with pytest.raises(InvalidInput) as err:
        calibrated_metrics(COUNTS, -0.1)
    assert err.value.field == "pi0"
