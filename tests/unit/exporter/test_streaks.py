"""Streak counting and the outcomes of one stored window (pure, no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.db.models import ALL_SEGMENTS
from app.exporter import names
from app.exporter.reads import ModelRow
from app.exporter.streaks import (
    GroupStreaks,
    Outcomes,
    StoredKey,
    streak,
    streak_series,
    window_outcomes,
)
from app.sla.objectives import Objective, evaluate_objective

START = datetime(2026, 11, 26, tzinfo=UTC)
RECALL = Objective("recall", ">=", 0.6)
BRIER = Objective("brier", "<=", 0.1, id="brier-cap")


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([], 0),
        ([False, True, True], 0),  # the newest window is not flagged
        ([True, True, False, True], 2),
        ([None, True, None, None, True, False, True], 2),  # untested windows skipped
        ([None, None], 0),
        ([True] * 24, 24),
    ],
)
def test_streak_counts_raised_outcomes_until_the_first_that_is_not(
    outcomes: list[bool | None], expected: int
) -> None:
    assert streak(outcomes) == expected


def test_sla_outcomes_follow_the_sla_report_status() -> None:
    """Breached is the status of app.services.read.sla_report.evaluate_objective; insufficient data
    (an undefined value) is untested; the drift flags are passed through."""
    intervals = {
        "recall": {"lower": 0.2, "upper": 0.4},
        "brier": {"lower": None, "upper": None},
    }
    objectives = (RECALL, BRIER)
    both = window_outcomes(objectives, (True, None), {"recall": 0.3, "brier": 0.05}, intervals)
    assert both == Outcomes((True, None), (True, False))
    scarce = window_outcomes(objectives, (False, False), {"recall": None, "brier": 0.2}, intervals)
    assert scarce.breached == (None, True)
    # an inconclusive window (the interval straddles the target) is tested, not breached
    straddles = {**intervals, "recall": {"lower": 0.5, "upper": 0.7}}
    unsure = window_outcomes((RECALL,), (), {"recall": 0.55}, straddles)
    assert evaluate_objective(RECALL, {"recall": 0.55}, straddles).status == "inconclusive"
    assert unsure.breached == (False,)
    for objective in objectives:
        for metrics in ({"recall": 0.3, "brier": 0.05}, {"recall": None, "brier": 0.2}):
            status = evaluate_objective(objective, metrics, intervals).status
            breached = window_outcomes((objective,), (), metrics, intervals).breached[0]
            assert breached == {"breached": True, "insufficient_data": None}.get(status, False)


def test_series_per_exposed_segment_with_objective_labels() -> None:
    model = ModelRow(1, "fraud", "1h", frozenset({"eu"}), (RECALL, BRIER), 0, 0)
    rows = {
        ALL_SEGMENTS: [((True, True), (True, None)), ((False, True), (True, False))],
        "eu": [((None, True), (False, True))],
        "gone": [((True, True), (True, True))],  # no longer registered: not exposed
    }
    groups = {}
    for segment, stored in rows.items():
        keys: list[StoredKey] = [
            (1, segment, START - timedelta(hours=age), START) for age in range(len(stored))
        ]
        outcomes = [Outcomes(drift, breached) for drift, breached in stored]
        stamp = (len(stored), START)
        groups[(1, segment)] = GroupStreaks.of(stamp, model.objectives, keys, outcomes)
    groups[(2, ALL_SEGMENTS)] = groups[(1, "eu")]  # a model deleted since: not exposed
    out = streak_series([model], groups)
    drift = {labels: value for labels, value in out[names.DRIFT_STREAK]}
    assert drift == {
        ("fraud", "all", "prior"): 1.0,
        ("fraud", "all", "likelihood"): 2.0,
        ("fraud", "eu", "prior"): 0.0,
        ("fraud", "eu", "likelihood"): 1.0,
    }
    breach = {labels: value for labels, value in out[names.SLA_BREACH_STREAK]}
    assert breach == {  # the objective's id: its metric and op are its target's labels
        ("fraud", "all", "recall_ge"): 2.0,
        ("fraud", "all", "brier-cap"): 0.0,
        ("fraud", "eu", "recall_ge"): 0.0,
        ("fraud", "eu", "brier-cap"): 1.0,
    }
