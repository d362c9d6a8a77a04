"""Every labeling metric against the formulas of docs/metrics.md, brute force and scikit-learn."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from sklearn import metrics as skm

from app.metrics.confusion import ConfusionCounts
from app.metrics.labeling import (
    LABELING_METRICS,
    PRIOR_DEPENDENT,
    fbeta,
    labeling_metrics,
    labeling_scores,
)

Spec = Callable[[float, float, float, float], float]


def _fb(b: float) -> Spec:
    return lambda tp, fp, fn, tn: (1 + b * b) * tp / ((1 + b * b) * tp + b * b * fn + fp)


def _ppv(tp: float, fp: float, fn: float, tn: float) -> float:
    return tp / (tp + fp)


def _npv(tp: float, fp: float, fn: float, tn: float) -> float:
    return tn / (tn + fn)


def _tpr(tp: float, fp: float, fn: float, tn: float) -> float:
    return tp / (tp + fn)


def _tnr(tp: float, fp: float, fn: float, tn: float) -> float:
    return tn / (tn + fp)


def _pi(tp: float, fp: float, fn: float, tn: float) -> float:
    return (tp + fn) / (tp + fp + fn + tn)


# docs/metrics.md, "Labeling metrics" (with the gains), in plain Python floats:
# a zero denominator raises ZeroDivisionError, which is "undefined".
SPEC: dict[str, Spec] = {
    "accuracy": lambda tp, fp, fn, tn: (tp + tn) / (tp + fp + fn + tn),
    "error_rate": lambda tp, fp, fn, tn: (fp + fn) / (tp + fp + fn + tn),
    "precision": _ppv,
    "recall": _tpr,
    "specificity": _tnr,
    "npv": _npv,
    "fpr": lambda tp, fp, fn, tn: fp / (fp + tn),
    "fnr": lambda tp, fp, fn, tn: fn / (tp + fn),
    "f1": lambda tp, fp, fn, tn: 2 * tp / (2 * tp + fp + fn),
    "f2": _fb(2.0),
    "f0_5": _fb(0.5),
    "jaccard": lambda tp, fp, fn, tn: tp / (tp + fp + fn),
    "mcc": lambda tp, fp, fn, tn: (
        (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    ),
    "cohen_kappa": lambda tp, fp, fn, tn: (
        2 * (tp * tn - fn * fp) / ((tp + fp) * (fp + tn) + (tp + fn) * (fn + tn))
    ),
    "balanced_accuracy": lambda *c: (_tpr(*c) + _tnr(*c)) / 2,
    "g_mean": lambda *c: math.sqrt(_tpr(*c) * _tnr(*c)),
    "informedness": lambda *c: _tpr(*c) + _tnr(*c) - 1,
    "markedness": lambda *c: _ppv(*c) + _npv(*c) - 1,
    "lift": lambda *c: _ppv(*c) / _pi(*c),
    "cba": lambda tp, fp, fn, tn: (tp / max(tp + fn, tp + fp) + tn / max(fp + tn, tn + fn)) / 2,
    "iam": lambda tp, fp, fn, tn: (
        (tp - max(fp, fn)) / (2 * max(tp + fn, tp + fp))
        + (tn - max(fp, fn)) / (2 * max(fp + tn, tn + fn))
    ),
    "p4": lambda tp, fp, fn, tn: 4 * tp * tn / (4 * tp * tn + (tp + tn) * (fp + fn)),
    "precision_gain": lambda *c: (_ppv(*c) - _pi(*c)) / ((1 - _pi(*c)) * _ppv(*c)),
    "recall_gain": lambda *c: (_tpr(*c) - _pi(*c)) / ((1 - _pi(*c)) * _tpr(*c)),
}


def _spec(name: str, c: ConfusionCounts) -> float | None:
    try:
        return SPEC[name](c.tp, c.fp, c.fn, c.tn)
    except ZeroDivisionError:
        return None


def _brute_counts(y: np.ndarray, pred: np.ndarray) -> ConfusionCounts:
    cells = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for yi, pi in zip(y.tolist(), pred.tolist(), strict=True):
        cells[("t" if yi == pi else "f") + ("p" if pi else "n")] += 1
    return ConfusionCounts(**{k: float(v) for k, v in cells.items()})


def test_spec_table_covers_the_registry() -> None:
    assert set(SPEC) == set(LABELING_METRICS)


def _cases() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    out = []
    for n, prior, skill in [(50, 0.5, 0.3), (400, 0.1, 0.5), (1000, 0.02, 0.8), (30, 0.7, -0.2)]:
        y = (rng.random(n) < prior).astype(int)
        y[:2] = (1, 0)
        pred = np.where(rng.random(n) < 0.5 + skill / 2, y, 1 - y)
        pred[2:6] = (1, 0, 1, 0)
        y[2:6] = (1, 0, 0, 1)  # every cell non-empty
        out.append((y, pred))
    return out


@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("name", list(LABELING_METRICS))
def test_metric_matches_spec_formula_on_brute_force_counts(case: int, name: str) -> None:
    y, pred = _cases()[case]
    counts = _brute_counts(y, pred)
    assert counts == ConfusionCounts.from_predictions(pred.astype(float), y, 0.5)
    got = labeling_metrics(counts)[name]
    want = _spec(name, counts)
    assert got is not None and want is not None
    assert got == pytest.approx(want, rel=1e-12, abs=1e-15)


SKLEARN: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "accuracy": skm.accuracy_score,
    "error_rate": lambda y, p: 1 - skm.accuracy_score(y, p),
    "precision": skm.precision_score,
    "recall": skm.recall_score,
    "specificity": lambda y, p: skm.recall_score(y, p, pos_label=0),
    "npv": lambda y, p: skm.precision_score(y, p, pos_label=0),
    "fpr": lambda y, p: 1 - skm.recall_score(y, p, pos_label=0),
    "fnr": lambda y, p: 1 - skm.recall_score(y, p),
    "f1": skm.f1_score,
    "f2": lambda y, p: skm.fbeta_score(y, p, beta=2.0),
    "f0_5": lambda y, p: skm.fbeta_score(y, p, beta=0.5),
    "jaccard": skm.jaccard_score,
    "mcc": skm.matthews_corrcoef,
    "cohen_kappa": skm.cohen_kappa_score,
    "balanced_accuracy": skm.balanced_accuracy_score,
    "informedness": lambda y, p: skm.balanced_accuracy_score(y, p, adjusted=True),
    "markedness": lambda y, p: (
        skm.precision_score(y, p) + skm.precision_score(y, p, pos_label=0) - 1
    ),
    "lift": lambda y, p: skm.precision_score(y, p) / np.mean(y),
}


@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("name", list(SKLEARN))
def test_metric_matches_sklearn(case: int, name: str) -> None:
    y, pred = _cases()[case]
    got = labeling_metrics(ConfusionCounts.from_predictions(pred.astype(float), y))[name]
    assert got == pytest.approx(SKLEARN[name](y, pred), rel=1e-12, abs=1e-15)


def test_fbeta_with_beta_one_is_f1() -> None:
    assert float(fbeta(3, 2, 1, 9, 1.0)) == pytest.approx(6 / 9)


DEGENERATE = [
    ConfusionCounts(0, 0, 0, 0),  # empty
    ConfusionCounts(5, 0, 3, 0),  # only positives
    ConfusionCounts(0, 4, 0, 6),  # only negatives
    ConfusionCounts(0, 0, 3, 6),  # nothing predicted positive
    ConfusionCounts(5, 4, 0, 0),  # everything predicted positive
    ConfusionCounts(7, 0, 0, 0),  # one cell
    ConfusionCounts(0, 0, 0, 9),  # one cell
    ConfusionCounts(0, 3, 4, 0),  # all wrong
    ConfusionCounts(2, 0, 0, 3),  # all right
]


@pytest.mark.parametrize("counts", DEGENERATE, ids=str)
def test_undefined_exactly_where_the_spec_divides_by_zero(counts: ConfusionCounts) -> None:
    scores = labeling_scores(counts)
    for name, metric in LABELING_METRICS.items():
        want = _spec(name, counts)
        got = scores[name]
        if want is None:
            assert got.value is None and got.reason == metric.undefined_when, name
        else:
            assert got.reason is None, name
            assert got.value == pytest.approx(want, rel=1e-12, abs=1e-15), name


@pytest.mark.parametrize("counts", DEGENERATE[1:], ids=str)
def test_defined_values_respect_registry_bounds(counts: ConfusionCounts) -> None:
    for name, value in labeling_metrics(counts).items():
        m = LABELING_METRICS[name]
        if value is not None:
            assert m.lower <= value <= m.upper, name


def test_prior_dependent_names_are_the_registry_flags() -> None:
    flagged = tuple(n for n, m in LABELING_METRICS.items() if m.prior_dependent)
    assert flagged == PRIOR_DEPENDENT
    assert {"precision", "f1", "mcc", "accuracy", "cohen_kappa", "lift"} <= set(PRIOR_DEPENDENT)
    assert not {"recall", "specificity", "balanced_accuracy", "informedness"} & set(PRIOR_DEPENDENT)
