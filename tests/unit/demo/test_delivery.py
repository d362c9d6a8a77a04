"""Delayed labels of ``priorwatch simulate --delayed-labels`` (app/demo/delivery.py):
arrival days follow their laws, the stages deliver every label once, and each stage's
line is computed from the windows as documented (null-safe without completion)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

from app.demo.delivery import (
    NEGATIVE_DAILY_RATE,
    POSITIVE_DAILY_RATE,
    STAGES,
    arrival_days,
    arriving,
    stage_line,
    stage_name,
    stage_table,
)


def test_arrival_days_are_geometric_with_a_rate_per_class() -> None:
    rng = np.random.default_rng(20261127)
    labels = (rng.random(40_000) < 0.3).astype(np.int64)
    days = arrival_days(rng, labels)
    for cls, rate in ((1, POSITIVE_DAILY_RATE), (0, NEGATIVE_DAILY_RATE)):
        sample = days[labels == cls]
        assert sample.min() >= 1
        top = 12  # days 1..11 and a last cell for the rest
        observed = np.bincount(np.minimum(sample, top), minlength=top + 1)[1:]
        expected = stats.geom.pmf(np.arange(1, top), rate)
        expected = np.append(expected, stats.geom.sf(top - 1, rate)) * sample.size
        assert stats.chisquare(observed, expected).pvalue > 0.001, cls
    # the labels known after day 1 over-represent the frauds: pi r1 / (pi r1 + (1 - pi) r0)
    prior = labels.mean()
    first = labels[arriving(days, None, 1)].mean()
    biased = prior * POSITIVE_DAILY_RATE
    biased /= biased + (1 - prior) * NEGATIVE_DAILY_RATE
    assert first == pytest.approx(biased, abs=0.015)  # 3 standard errors on ~10k rows
    assert first > 1.9 * prior


def test_the_stages_deliver_every_label_exactly_once() -> None:
    days = np.array([1, 2, 3, 4, 7, 8, 30, 200])
    masks, after = [], None
    for until in STAGES:
        masks.append(arriving(days, after, until))
        after = until
    assert np.array_equal(np.sum(masks, axis=0), np.ones(days.size))
    assert [days[m].tolist() for m in masks] == [[1], [2, 3], [4, 7], [8, 30, 200]]
    assert [stage_name(s) for s in STAGES] == ["day 1", "day 3", "day 7", "all"]


def _window(n_unlabelled: int, n: int, positives: int, completed: float | None) -> dict[str, Any]:
    maturity = None if completed is None else {"prior": {"value": completed}}
    return {
        "segment": None,
        "n_unlabelled": n_unlabelled,
        "n": n,
        "positives": positives,
        "maturity": maturity,
    }


def test_a_stage_line_weighs_the_completed_priors_by_the_scored_rows() -> None:
    windows = [
        _window(1000, 200, 50, 0.05),
        _window(3000, 300, 60, 0.02),
        {**_window(500, 10, 9, 0.9), "segment": "eu"},  # a segment: not the day's total
        _window(0, 40, 4, None),  # labelled rows only: not part of the protocol's day
    ]
    line = stage_line("day 1", windows, 0.03)
    assert line.completeness == pytest.approx(500 / 4000)
    assert line.labelled_prior == pytest.approx(110 / 500)
    assert line.completed_prior == pytest.approx((0.05 * 1000 + 0.02 * 3000) / 4000)
    assert line.true_prior == 0.03


def test_a_stage_without_completion_shows_no_completed_prior() -> None:
    partly = stage_line("day 3", [_window(1000, 500, 60, 0.05), _window(1000, 0, 0, None)], 0.04)
    assert partly.completed_prior is None and partly.labelled_prior == pytest.approx(60 / 500)
    empty = stage_line("all", [], 0.04)
    assert (empty.completeness, empty.labelled_prior, empty.completed_prior) == (None,) * 3
    table = stage_table([partly, empty]).splitlines()
    assert table[0].split("  ")[0] == "labels delivered"
    assert table[2].split() == ["day", "3", "0.250", "0.1200", "-", "0.0400"]
    assert table[3].split() == ["all", "-", "-", "-", "0.0400"]
