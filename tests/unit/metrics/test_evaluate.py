"""``evaluate`` and ``evaluate_counts``: contract keys, values against scikit-learn."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn import metrics as skm

from app.errors import InvalidInput
from app.metrics import evaluate
from app.metrics.binning import default_bin_edges, histogram_counts
from app.metrics.confusion import ConfusionCounts
from app.metrics.curves import cumulative_counts, cumulative_counts_from_histograms
from app.metrics.evaluate import CURVE_METRICS, OPS_METRICS, evaluate_counts
from app.metrics.labeling import LABELING_METRICS, PRIOR_DEPENDENT
from app.metrics.probability import ProbabilitySums

BASE_KEYS = {*LABELING_METRICS, "prior", *CURVE_METRICS, "brier", "log_loss"}
CONTRACT_CURVE = {"auc_roc", "auc_pr", "auc_lift", "nauc_lift", "ks", "gini"}
CALIBRATED_KEYS = {f"calibrated_{n}" for n in PRIOR_DEPENDENT} | {"calibrated_auc_pr"}
OPS_KEYS = {
    f"ops_{n}" for n in ("f1", "mcc", "precision", "accuracy", "auc_pr", "auc_roc", "auc_lift")
}


def _data(seed: int = 0, n: int = 3000, prior: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < prior).astype(int)
    s = np.round(1 / (1 + np.exp(-(rng.normal(-2.5, 1.2, n) + 2.0 * y))), 3)
    return s, y


def test_keys_match_the_contract() -> None:
    s, y = _data()
    assert set(CURVE_METRICS) == CONTRACT_CURVE
    assert set(OPS_METRICS) == {k.removeprefix("ops_") for k in OPS_KEYS}
    assert set(evaluate(s, y)) == BASE_KEYS | OPS_KEYS
    assert set(evaluate(s, y, pi0=0.02)) == BASE_KEYS | OPS_KEYS | CALIBRATED_KEYS
    full = evaluate(s, y, pi0=0.02, cost_ratio=0.2, target_prior=0.05)
    assert set(full) == BASE_KEYS | OPS_KEYS | CALIBRATED_KEYS | {"weighted_accuracy"}
    assert all(v is None or isinstance(v, float) for v in full.values())


@pytest.mark.parametrize("threshold", [0.1, 0.5])
def test_values_agree_with_sklearn(threshold: float) -> None:
    s, y = _data(1)
    m = evaluate(s, y, threshold=threshold)
    pred = s >= threshold
    checks = {
        "accuracy": skm.accuracy_score(y, pred),
        "precision": skm.precision_score(y, pred),
        "recall": skm.recall_score(y, pred),
        "f1": skm.f1_score(y, pred),
        "mcc": skm.matthews_corrcoef(y, pred),
        "cohen_kappa": skm.cohen_kappa_score(y, pred),
        "balanced_accuracy": skm.balanced_accuracy_score(y, pred),
        "jaccard": skm.jaccard_score(y, pred),
        "auc_pr": skm.average_precision_score(y, s),
        "auc_roc": skm.roc_auc_score(y, s),
        "gini": 2 * skm.roc_auc_score(y, s) - 1,
        "brier": skm.brier_score_loss(y, s),
        "log_loss": skm.log_loss(y, s),
        "prior": y.mean(),
    }
    for name, want in checks.items():
        assert m[name] == pytest.approx(want, rel=1e-12, abs=1e-12), name


def test_ops_f1_matches_the_closed_form_of_the_spec() -> None:
    s, y = _data(2)
    m = evaluate(s, y)
    mu, pi = m["f1"], m["prior"]
    assert mu is not None and pi is not None
    if mu <= 2 * pi / (1 + pi):
        want = (1 + pi) * mu / (2 * pi * (2 - mu))
    else:
        want = (1 + pi) * mu / (2 * pi * (2 - mu)) - ((1 + pi) * mu - 2 * pi) ** 2 / (
            2 * pi * (1 - pi) * mu * (2 - mu)
        )
    assert m["ops_f1"] == pytest.approx(want, abs=1e-4)
    for key in OPS_KEYS:
        assert 0.0 <= m[key] <= 1.0  # type: ignore[operator]


def test_a_better_ranking_has_a_higher_ops_auc() -> None:
    s, y = _data(3)
    weak = np.clip(s + np.random.default_rng(0).normal(0, 0.3, s.size), 0, 1)
    good, bad = evaluate(s, y), evaluate(weak, y)
    for name in ("auc_roc", "auc_pr", "auc_lift"):
        assert good[name] > bad[name]  # type: ignore[operator]
        assert good[f"ops_{name}"] > bad[f"ops_{name}"]  # type: ignore[operator]


def test_weighted_accuracy_at_half_is_accuracy_and_target_prior_reweights() -> None:
    s, y = _data(4)
    m = evaluate(s, y, cost_ratio=0.5)
    assert m["weighted_accuracy"] == pytest.approx(m["accuracy"], rel=1e-12)
    # target prior = the prior of the data with every negative counted 3 times
    s3 = np.concatenate((s[y == 1], np.repeat(s[y == 0], 3)))
    y3 = np.concatenate((np.ones(y.sum(), int), np.zeros(3 * (y == 0).sum(), int)))
    target = evaluate(s, y, cost_ratio=0.3, target_prior=float(y3.mean()))
    assert target["weighted_accuracy"] == pytest.approx(
        evaluate(s3, y3, cost_ratio=0.3)["weighted_accuracy"], rel=1e-12
    )


def test_calibrated_auc_pr_at_the_data_prior_is_auc_pr() -> None:
    s, y = _data(5)
    m = evaluate(s, y, pi0=float(np.mean(y)))
    assert m["calibrated_auc_pr"] == pytest.approx(m["auc_pr"], rel=1e-12)
    assert m["calibrated_f1"] == pytest.approx(m["f1"], rel=1e-12)


def test_histogram_window_agrees_with_raw_scores() -> None:
    s, y = _data(6, n=50_000, prior=0.02)
    edges = default_bin_edges((0.5,))
    exact = evaluate(s, y, pi0=0.1, cost_ratio=0.2)
    curve = cumulative_counts_from_histograms(*histogram_counts(s, y, edges), edges)
    window = evaluate_counts(
        curve,
        ConfusionCounts.from_predictions(s, y, 0.5),
        ProbabilitySums.from_predictions(s, y),
        pi0=0.1,
        cost_ratio=0.2,
    )
    assert window.keys() == exact.keys()
    for name, want in exact.items():
        tol = 1e-3 if name in CURVE_METRICS or name == "calibrated_auc_pr" else 1e-12
        if name.startswith("ops_auc"):
            tol = 0.01  # OPS of an area moves with the area
        assert window[name] == pytest.approx(want, abs=tol, rel=tol), name


def test_label_only_classifier_has_no_curve_metrics() -> None:
    counts = ConfusionCounts(tp=40, fp=10, fn=20, tn=930)
    m = evaluate_counts(None, counts, None, pi0=0.1, cost_ratio=0.4)
    assert not set(CURVE_METRICS) & set(m)
    assert not {"brier", "log_loss", "calibrated_auc_pr", "ops_auc_pr", "ops_auc_roc"} & set(m)
    assert m["f1"] == pytest.approx(80 / 110)
    assert {"ops_f1", "ops_mcc", "ops_precision", "ops_accuracy", "weighted_accuracy"} <= set(m)
    assert "calibrated_f1" in m


def test_one_class_data_give_undefined_not_errors() -> None:
    m = evaluate([0.2, 0.7, 0.9], [1, 1, 1], pi0=0.1, cost_ratio=0.3, target_prior=0.2)
    assert m["prior"] == 1.0 and m["recall"] == pytest.approx(2 / 3)
    for name in ("auc_roc", "ks", "gini", "calibrated_f1", "calibrated_auc_pr", "ops_f1"):
        assert m[name] is None, name
    assert m["auc_pr"] == 1.0
    assert m["weighted_accuracy"] is None  # no target weight without both classes


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"target_prior": 0.1}, "target_prior"),
        ({"pi0": 0.0}, "pi0"),
        ({"pi0": 1.0}, "pi0"),
        ({"cost_ratio": 1.5}, "cost_ratio"),
        ({"cost_ratio": 0.5, "target_prior": 1.0}, "target_prior"),
        ({"threshold": 2.0}, "threshold"),
    ],
)
def test_bad_options_name_their_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        evaluate([0.2, 0.7], [0, 1], **kwargs)
    assert err.value.field == field


def test_curve_and_confusion_must_describe_the_same_examples() -> None:
    curve = cumulative_counts([0.2, 0.7], [0, 1])
    with pytest.raises(InvalidInput) as err:
        evaluate_counts(curve, ConfusionCounts(1, 1, 1, 1), None)
    assert err.value.field == "confusion"


def test_undefined_nauc_when_no_positives() -> None:
    m = evaluate([0.2, 0.7], [0, 0])
    assert m["auc_lift"] is None and m["nauc_lift"] is None and m["auc_pr"] is None
    assert not math.isnan(m["accuracy"])  # type: ignore[arg-type]


def test_docs_describe_every_reported_metric() -> None:
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[3] / "docs" / "metrics.md").read_text()
    s, y = _data()
    for name in evaluate(s, y, pi0=0.1, cost_ratio=0.3):
        if name.startswith("ops_"):
            assert (
                "`ops_<name>` for f1, mcc, precision, accuracy, auc_pr, auc_roc, auc_lift" in docs
            )
        elif name.startswith("calibrated_") and name != "calibrated_auc_pr":
            assert "`calibrated_<name>`" in docs
        else:
            assert f"| `{name}` |" in docs, name
