"""Every metric of a completed window, against the labelled rows and the full-label truth."""

from __future__ import annotations

import numpy as np
import pytest

from app.maturity import NOT_COMPLETABLE, completed_metrics
from app.maturity.simulation import MaturingWindow
from unit.maturity._windows import (
    EDGES,
    OPTIONS,
    THRESHOLDS,
    class_windows,
    completion_of,
    full_metrics,
    labelled_metrics,
    score_windows,
)

CLASS_CONDITIONAL = ("recall", "fpr", "specificity", "balanced_accuracy", "auc_roc")


def _same(value: float | None, expected: float | None, name: str) -> None:
    if expected is None:
        assert value is None, name
    else:
        assert value == pytest.approx(expected, rel=1e-12, abs=1e-12), name


def _mean_errors(
    windows: list[MaturingWindow], assumption: str, names: list[str]
) -> tuple[dict[str, float], dict[str, float]]:
    """Mean absolute error against the full-label values: completed, labelled subset."""
    completed: dict[str, list[float]] = {name: [] for name in names}
    subset: dict[str, list[float]] = {name: [] for name in names}
    for w in windows:
        m = completed_metrics(completion_of(w, assumption), **OPTIONS)
        lab, truth = labelled_metrics(w), full_metrics(w)
        for name in names:
            completed[name].append(abs(m[name] - truth[name]))  # type: ignore[operator]
            subset[name].append(abs(lab[name] - truth[name]))  # type: ignore[operator]
    return (
        {k: float(np.mean(v)) for k, v in completed.items()},
        {k: float(np.mean(v)) for k, v in subset.items()},
    )


@pytest.mark.parametrize("assumption", ["class", "score"])
def test_a_fully_labelled_window_keeps_its_labelled_metrics(assumption: str) -> None:
    w = next(class_windows(np.random.default_rng(6), 1, prior=0.05, completeness=1.0))
    full = MaturingWindow(w.positives + w.negatives, w.positives, w.negatives, w.full)
    m = completed_metrics(completion_of(full, assumption), **OPTIONS)
    lab = labelled_metrics(full)
    assert set(m) == set(lab) | set(NOT_COMPLETABLE)
    assert "f1@t=0.3" in m and "calibrated_auc_pr" in m
    for name, value in lab.items():
        _same(m[name], value, name)
    assert all(m[name] is None for name in NOT_COMPLETABLE)


def test_class_completion_leaves_the_class_conditional_metrics_as_labelled() -> None:
    rng = np.random.default_rng(7)
    for w in class_windows(rng, 5, prior=0.05, completeness=0.2):
        m = completed_metrics(completion_of(w, "class"), **OPTIONS)
        lab = labelled_metrics(w)
        invariant = [*CLASS_CONDITIONAL, *(k for k in lab if k.startswith("calibrated_"))]
        invariant += [f"{k}@t={THRESHOLDS[1]:g}" for k in CLASS_CONDITIONAL[:4]]
        for name in invariant:
            _same(m[name], lab[name], name)
        # and those are the labelled rows' rates, computed by hand
        p, q = w.positives, w.negatives
        above = EDGES[:-1] >= THRESHOLDS[0]
        assert m["recall"] == pytest.approx(p[above].sum() / p.sum(), rel=1e-12)
        assert m["fpr"] == pytest.approx(q[above].sum() / q.sum(), rel=1e-12)
        below_q = np.cumsum(q) - q  # negatives in lower bins
        auc = float(np.sum(p * (below_q + 0.5 * q))) / (p.sum() * q.sum())
        assert m["auc_roc"] == pytest.approx(auc, rel=1e-12)


@pytest.mark.parametrize("completeness", [0.1, 0.3, 0.5])
def test_class_completion_cuts_the_prior_dependent_errors_by_three(completeness: float) -> None:
    rng = np.random.default_rng(8)
    windows = list(class_windows(rng, 40, prior=0.05, completeness=completeness))
    names = ["prior", "precision", "f1", "mcc", "accuracy"]
    completed, subset = _mean_errors(windows, "class", names)
    for name in names:
        assert completed[name] <= subset[name] / 3, (name, completed[name], subset[name])


@pytest.mark.parametrize("prior", [0.1, 0.2])
def test_score_completion_cuts_the_errors_by_three(prior: float) -> None:
    rng = np.random.default_rng(9)
    windows = list(score_windows(rng, 40, prior=prior))
    calibrated = [k for k in labelled_metrics(windows[0]) if k.startswith("calibrated_")]
    calibrated = [k for k in calibrated if "@" not in k]
    names = ["prior", "recall", "f1", *calibrated]
    completed, subset = _mean_errors(windows, "score", [*names, "precision"])
    for name in names:
        assert completed[name] <= subset[name] / 3, (name, completed[name], subset[name])
    # precision at the threshold is unbiased in the labelled subset already: stay as close
    assert completed["precision"] <= 1.25 * subset["precision"]
