"""Labeling metrics of one confusion matrix (docs/metrics.md, "Labeling metrics").

Every metric is a vectorised function ``f(tp, fp, fn, tn)`` of broadcastable
float arrays that returns ``nan`` where a denominator is zero. Because each
is homogeneous of degree 0 in the counts, evaluating it on
``ConfusionCounts.from_rates(pi, alpha, beta)`` gives M(pi, alpha, beta): the
same functions serve raw metrics, metrics at a reference prior (calibrated)
and the outperformance-score integrals.

:data:`LABELING_METRICS` is the registry every other module iterates over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.metrics.confusion import ConfusionCounts
from app.metrics.undefined import Score, to_optional, to_score

Array = npt.NDArray[np.float64]
ArrayLike = float | Array
MetricFunc = Callable[[ArrayLike, ArrayLike, ArrayLike, ArrayLike], Array]


def _div(num: ArrayLike, den: ArrayLike) -> Array:
    """num/den with nan where den == 0 (the metric is undefined there).

    A zero denominator is turned into 1 before dividing (``den + zero`` leaves
    every other denominator as it is), so nothing divides by zero and no
    floating-point error state is entered: the same values in fewer numpy
    calls, for a helper called about 30 times per window.
    """
    den_a = np.asarray(den, dtype=np.float64)
    zero = den_a == 0.0
    return np.where(zero, np.nan, np.divide(num, den_a + zero))


def accuracy(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return _div(np.add(tp, tn), np.add(np.add(tp, fp), np.add(fn, tn)))


def error_rate(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return _div(np.add(fp, fn), np.add(np.add(tp, fp), np.add(fn, tn)))


def precision(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return _div(tp, np.add(tp, fp))


def recall(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return _div(tp, np.add(tp, fn))


def specificity(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return _div(tn, np.add(tn, fp))


def npv(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return _div(tn, np.add(tn, fn))


def fpr(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return _div(fp, np.add(fp, tn))


def fnr(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return _div(fn, np.add(fn, tp))


def fbeta(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike, beta: float = 1.0) -> Array:
    """(1+b^2)TP / ((1+b^2)TP + b^2 FN + FP)."""
    b2 = beta * beta
    num = np.multiply(1.0 + b2, tp)
    return _div(num, num + np.multiply(b2, fn) + np.asarray(fp, dtype=np.float64))


def f1(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return _div(np.multiply(2.0, tp), np.multiply(2.0, tp) + np.add(fp, fn))


def f2(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return fbeta(tp, fp, fn, tn, 2.0)


def f0_5(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return fbeta(tp, fp, fn, tn, 0.5)


def jaccard(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return _div(tp, np.add(np.add(tp, fp), fn))


def mcc(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    num = np.multiply(tp, tn) - np.multiply(fp, fn)
    den = np.multiply(
        np.multiply(np.add(tp, fp), np.add(tp, fn)), np.multiply(np.add(tn, fp), np.add(tn, fn))
    )
    return _div(num, np.sqrt(den))


def cohen_kappa(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    num = 2.0 * (np.multiply(tp, tn) - np.multiply(fn, fp))
    den = np.multiply(np.add(tp, fp), np.add(fp, tn)) + np.multiply(np.add(tp, fn), np.add(fn, tn))
    return _div(num, den)


def balanced_accuracy(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return 0.5 * (recall(tp, fp, fn, tn) + specificity(tp, fp, fn, tn))


def g_mean(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return np.sqrt(recall(tp, fp, fn, tn) * specificity(tp, fp, fn, tn))


def informedness(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return recall(tp, fp, fn, tn) + specificity(tp, fp, fn, tn) - 1.0


def markedness(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    return precision(tp, fp, fn, tn) + npv(tp, fp, fn, tn) - 1.0


def lift(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    """precision / pi = TP·n / ((TP+FP)·P)."""
    n = np.add(np.add(tp, fp), np.add(fn, tn))
    return _div(np.multiply(tp, n), np.multiply(np.add(tp, fp), np.add(tp, fn)))


def cba(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    """Class balance accuracy."""
    p, neg = np.add(tp, fn), np.add(fp, tn)
    return 0.5 * (
        _div(tp, np.maximum(p, np.add(tp, fp))) + _div(tn, np.maximum(neg, np.add(tn, fn)))
    )


def iam(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    """Imbalanced accuracy metric."""
    p, neg = np.add(tp, fn), np.add(fp, tn)
    worst = np.maximum(fp, fn)
    return _div(np.subtract(tp, worst), 2.0 * np.maximum(p, np.add(tp, fp))) + _div(
        np.subtract(tn, worst), 2.0 * np.maximum(neg, np.add(tn, fn))
    )


def p4(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    num = 4.0 * np.multiply(tp, tn)
    return _div(num, num + np.multiply(np.add(tp, tn), np.add(fp, fn)))


def precision_gain(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    """(prec − pi)/((1−pi)·prec) = 1 − (P·FP)/(N·TP) = 1 − FPR/TPR: prior-invariant."""
    p, neg = np.add(tp, fn), np.add(fp, tn)
    return 1.0 - _div(np.multiply(p, fp), np.multiply(neg, tp))


def recall_gain(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
    """(rec − pi)/((1−pi)·rec) = 1 − (P·FN)/(N·TP)."""
    p, neg = np.add(tp, fn), np.add(fp, tn)
    return 1.0 - _div(np.multiply(p, fn), np.multiply(neg, tp))


@dataclass(frozen=True, slots=True)
class LabelingMetric:
    """A registered labeling metric.

    ``prior_dependent`` metrics move when only the class mix moves; they get a
    ``calibrated_<name>`` form. ``lower``/``upper`` bound every defined value.
    ``undefined_when`` is the reason reported when the value is ``None``.
    """

    name: str
    func: MetricFunc
    prior_dependent: bool
    greater_is_better: bool
    lower: float
    upper: float
    undefined_when: str


def _m(
    func: MetricFunc,
    prior_dependent: bool,
    undefined_when: str,
    *,
    greater_is_better: bool = True,
    lower: float = 0.0,
    upper: float = 1.0,
) -> LabelingMetric:
    return LabelingMetric(
        func.__name__, func, prior_dependent, greater_is_better, lower, upper, undefined_when
    )


_NO_POS = "no actual positives (P = 0)"
_NO_NEG = "no actual negatives (N = 0)"
_ONE_CLASS = "only one actual class or one predicted class"

LABELING_METRICS: dict[str, LabelingMetric] = {
    m.name: m
    for m in (
        _m(accuracy, True, "empty confusion matrix"),
        _m(error_rate, True, "empty confusion matrix", greater_is_better=False),
        _m(precision, True, "no predicted positives (TP + FP = 0)"),
        _m(recall, False, _NO_POS),
        _m(specificity, False, _NO_NEG),
        _m(npv, True, "no predicted negatives (TN + FN = 0)"),
        _m(fpr, False, _NO_NEG, greater_is_better=False),
        _m(fnr, False, _NO_POS, greater_is_better=False),
        _m(f1, True, "no positives, actual or predicted (TP + FP + FN = 0)"),
        _m(f2, True, "no positives, actual or predicted (TP + FP + FN = 0)"),
        _m(f0_5, True, "no positives, actual or predicted (TP + FP + FN = 0)"),
        _m(jaccard, True, "no positives, actual or predicted (TP + FP + FN = 0)"),
        _m(mcc, True, _ONE_CLASS, lower=-1.0),
        _m(cohen_kappa, True, "all examples in one cell of the matrix", lower=-1.0),
        _m(balanced_accuracy, False, "only one actual class"),
        _m(g_mean, False, "only one actual class"),
        _m(informedness, False, "only one actual class", lower=-1.0),
        _m(markedness, True, "only one predicted class", lower=-1.0),
        _m(lift, True, "no actual or no predicted positives", upper=float("inf")),
        _m(cba, True, "empty confusion matrix"),
        _m(iam, True, "empty confusion matrix", lower=-1.0),
        _m(p4, True, "a diagonal cell is zero and so is the off-diagonal"),
        _m(precision_gain, False, "no true positives or no actual negatives", lower=float("-inf")),
        _m(recall_gain, True, "no true positives or no actual negatives", lower=float("-inf")),
    )
}
"""Every labeling metric, by its public name (docs/metrics.md, "Labeling metrics")."""

PRIOR_DEPENDENT: tuple[str, ...] = tuple(
    name for name, m in LABELING_METRICS.items() if m.prior_dependent
)
"""Names whose value moves with the class prior: each has a ``calibrated_`` form."""

CALIBRATED_PREFIX = "calibrated_"
"""``calibrated_<name>``: a metric (or curve area) at the reference prior pi0."""


def labeling_scores(counts: ConfusionCounts) -> dict[str, Score]:
    """Every registered labeling metric of ``counts``, each with its reason if undefined."""
    return {
        name: to_score(float(m.func(counts.tp, counts.fp, counts.fn, counts.tn)), m.undefined_when)
        for name, m in LABELING_METRICS.items()
    }


def labeling_metrics(counts: ConfusionCounts) -> dict[str, float | None]:
    """Every registered labeling metric of ``counts`` (``None`` where undefined).

    >>> labeling_metrics(ConfusionCounts(tp=8, fp=2, fn=2, tn=88))["f1"]
    0.8
    """
    return labeling_metrics_of([counts], LABELING_METRICS)[0]


def labeling_metrics_of(
    matrices: Sequence[ConfusionCounts], names: Iterable[str]
) -> list[dict[str, float | None]]:
    """The metrics ``names`` of each matrix (``None`` where undefined), each metric's
    function evaluated once on all of them (the same values as one matrix at a time)."""
    cells = [
        np.array(cell, dtype=np.float64)
        for cell in zip(*((c.tp, c.fp, c.fn, c.tn) for c in matrices), strict=True)
    ]
    columns = {name: LABELING_METRICS[name].func(*cells).tolist() for name in names}
    return [
        {name: to_optional(values[i]) for name, values in columns.items()}
        for i in range(len(matrices))
    ]
