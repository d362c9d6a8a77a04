"""Tiered refresh without a database: the tier decision, the due time, the two tiers of
compute_window_result, the stored document's carried detail and the SLA fallback."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from builders import model_config, sample, sums_of

from app.exporter.streaks import streak, window_outcomes
from app.metrics.confusion import ConfusionCounts
from app.services.models.config import ModelConfig
from app.services.read.sla_report import window_results
from app.services.read.windows import WindowView
from app.services.refresh.document import KEPT_BY_SUMMARY, window_document
from app.services.refresh.tiers import DETAIL_SPREAD, detail_due, detail_phase, next_detail_due
from app.services.windows.compute import Tier, WindowResult, compute_window_result
from app.services.windows.sums import WindowSums
from app.sla.objectives import (
    DETAIL_PENDING_REASON,
    Objective,
    evaluate_objective,
)

T0 = datetime(2026, 11, 26, 10, tzinfo=UTC)
MODEL = model_config((0.5, 0.3), n_bins=2_000, pi0=0.05, cost_ratio=0.7)
END = T0 + timedelta(hours=1)
MINUTE = timedelta(minutes=1)


# --- the decision -------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "due_at", "interval", "full"),
    [
        (T0 + MINUTE, None, 300.0, False),  # open, no due time: summary
        (T0 + MINUTE, T0 + 2 * MINUTE, 300.0, False),  # due later
        (T0 + 2 * MINUTE, T0 + 2 * MINUTE, 300.0, True),  # due now
        (T0 + 3 * MINUTE, T0 + 2 * MINUTE, 300.0, True),  # overdue
        (END, None, 300.0, False),  # closed, no due time: the summary first
        (END + MINUTE, None, 300.0, False),
        (END + MINUTE, END + MINUTE, 300.0, True),  # closed, due since its summary
        (END + MINUTE, END, 300.0, True),  # closed, due at its end while open
        (END + MINUTE, END + 2 * MINUTE, 300.0, False),
        (T0 + MINUTE, None, 0.0, True),  # 0: every refresh is full
        (END, None, 0.0, True),
    ],
)
def test_detail_is_due_when_overdue_or_always(
    now: datetime, due_at: datetime | None, interval: float, full: bool
) -> None:
    assert (
        detail_due(now=now, window_end=END, detail_due_at=due_at, detail_interval_seconds=interval)
        is full
    )


def test_without_a_backlog_every_refresh_is_full() -> None:
    for now in (T0 + MINUTE, END + MINUTE):
        for due_at in (None, T0 + 2 * MINUTE, END + 2 * MINUTE):
            short = detail_due(
                now=now,
                window_end=END,
                detail_due_at=due_at,
                detail_interval_seconds=300.0,
                backlog=False,
            )
            assert short is True


def test_the_budget_defers_an_open_windows_detail_but_never_a_closed_ones() -> None:
    def full(now: datetime, due_at: datetime) -> bool:
        return detail_due(
            now=now,
            window_end=END,
            detail_due_at=due_at,
            detail_interval_seconds=300.0,
            budget_allows=False,
        )

    assert full(T0 + 3 * MINUTE, T0 + 2 * MINUTE) is False
    assert full(END + MINUTE, END) is True


def test_a_summary_sets_the_earliest_due_time() -> None:
    def due(now: datetime, due_at: datetime | None) -> datetime:
        return next_detail_due(
            now=now, window_end=END, detail_due_at=due_at, detail_interval_seconds=300.0, phase=0.0
        )

    assert due(T0, None) == T0 + 5 * MINUTE  # the interval after the first change
    assert due(T0 + 2 * MINUTE, T0 + 5 * MINUTE) == T0 + 5 * MINUTE  # not postponed
    assert due(T0 + 2 * MINUTE, T0 + 10 * MINUTE) == T0 + 7 * MINUTE
    assert due(END - MINUTE, None) == END  # never after the window's end
    # closed: due at the summary's own time, behind the changes that waited before it
    assert due(END, None) == END
    assert due(END + 7 * MINUTE, None) == END + 7 * MINUTE
    assert due(END + 7 * MINUTE, END + 9 * MINUTE) == END + 7 * MINUTE


def test_the_phase_sets_a_delay_between_half_the_interval_and_the_interval() -> None:
    def delay(phase: float) -> float:
        due = next_detail_due(
            now=T0, window_end=END, detail_due_at=None, detail_interval_seconds=300.0, phase=phase
        )
        return (due - T0).total_seconds()

    assert DETAIL_SPREAD == 0.5
    assert delay(0.0) == 300.0
    assert delay(0.5) == 225.0
    assert 150.0 <= delay(np.nextafter(1.0, 0.0)) < 150.001  # timedelta: microseconds
    later = next_detail_due(
        now=T0, window_end=END, detail_due_at=T0 + MINUTE, detail_interval_seconds=300.0, phase=0.9
    )
    assert later == T0 + MINUTE  # a due time already set is never postponed


def test_window_phases_are_fixed_by_the_key_and_spread_evenly() -> None:
    keys = [(model, f"seg-{s}", T0) for model in range(1, 201) for s in range(10)]
    phases = np.array([detail_phase(*key) for key in keys])
    assert ((phases >= 0.0) & (phases < 1.0)).all()
    assert detail_phase(7, "seg-3", T0) == detail_phase(7, "seg-3", T0)
    assert detail_phase(7, "seg-3", T0) != detail_phase(7, "seg-3", T0 + timedelta(days=1))
    assert detail_phase(7, "seg-3", T0) != detail_phase(7, "seg-4", T0)
    # 2,000 keys in 10 equal bins: a chi-square of 9 degrees of freedom, p > 0.001
    counts, _ = np.histogram(phases, bins=10, range=(0.0, 1.0))
    assert ((counts - 200.0) ** 2 / 200.0).sum() < 27.88


# --- the two tiers -----------------------------------------------------------------


@pytest.fixture(scope="module")
def window_and_model() -> tuple[ModelConfig, WindowSums]:
    return MODEL, sums_of(*sample(np.random.default_rng(31), 20_000, 0.1), MODEL)


def test_full_result_is_the_summary_plus_the_detail(
    window_and_model: tuple[ModelConfig, WindowSums],
) -> None:
    model, window = window_and_model
    full = compute_window_result(model, window, None)
    summary = compute_window_result(model, window, None, tier=Tier.SUMMARY)
    assert (full.tier, summary.tier) == (Tier.FULL, Tier.SUMMARY)
    assert summary.curves is None and full.curves is not None
    assert (summary.metrics, summary.reasons, summary.drift, summary.estimate) == (
        full.metrics,
        full.reasons,
        full.drift,
        full.estimate,
    )
    assert summary.intervals == {}  # every interval is in the detail tier
    assert {"calibrated_f1", "recall", "auc_roc", "gini", "ops_f1", "ops_auc_pr", "ks"} <= set(
        full.intervals
    )


def test_a_given_generator_draws_both_tiers(
    window_and_model: tuple[ModelConfig, WindowSums],
) -> None:
    model, window = window_and_model
    one = compute_window_result(model, window, None, rng=np.random.default_rng(5))
    two = compute_window_result(model, window, None, rng=np.random.default_rng(5))
    seeded = compute_window_result(model, window, None)
    assert one.intervals == two.intervals and one.tier is Tier.FULL
    assert one.intervals["auc_roc"] != seeded.intervals["auc_roc"]  # other draws


def test_a_window_of_unlabelled_rows_only_keeps_the_tier_asked_for() -> None:
    window = sums_of(*sample(np.random.default_rng(32), 500, 0.1), MODEL)
    unlabelled = replace(
        window,
        n=0,
        positives=0,
        hist_positives=None,
        hist_negatives=None,
        confusion=(ConfusionCounts(0.0, 0.0, 0.0, 0.0),) * 2,
        sums=None,
        unlabelled=window.hist_positives + window.hist_negatives,  # type: ignore[operator]
    )
    assert compute_window_result(MODEL, unlabelled, None, tier=Tier.SUMMARY).tier is Tier.SUMMARY
    assert compute_window_result(MODEL, unlabelled, None).tier is Tier.FULL


# --- the stored document ----------------------------------------------------------


SUMMARY = WindowResult(
    metrics={"recall": 0.7, "auc_roc": None, "ops_f1": 0.4, "gini": 0.5},
    reasons={"auc_roc": "insufficient_data"},
    intervals={},
    drift={"verdict": "none"},
    tier=Tier.SUMMARY,
)
STORED = {
    "recall": {"lower": 0.1, "upper": 0.2, "level": 0.95},
    "auc_roc": {"lower": 0.7, "upper": 0.9, "level": 0.95},
    "ops_f1": {"lower": 0.3, "upper": 0.5, "level": 0.95},
    "gini": {"lower": 0.4, "upper": 0.6, "level": 0.95},
}


def test_a_summary_carries_the_stored_intervals_of_metrics_still_defined() -> None:
    doc = window_document(SUMMARY, STORED, version=5, computed_at=T0 + MINUTE)
    assert doc["metrics"] == SUMMARY.metrics
    assert doc["intervals"] == {
        "recall": STORED["recall"],
        "ops_f1": STORED["ops_f1"],
        "gini": STORED["gini"],
    }  # auc_roc is None now: its carried interval is dropped
    assert not set(doc) & set(KEPT_BY_SUMMARY)  # curves and stamp stay as stored


def test_a_summary_with_nothing_stored_has_no_intervals() -> None:
    doc = window_document(SUMMARY, None, version=1, computed_at=T0)
    assert doc["intervals"] == {}


def test_a_full_result_is_stored_as_it_is_with_its_own_stamp() -> None:
    full = WindowResult(
        metrics={"auc_roc": 0.8},
        reasons={},
        intervals={"auc_roc": {"lower": 0.75, "upper": 0.85, "level": 0.95}},
        drift={"verdict": "none"},
        curves={"roc": {"fpr": [0.0, 0.5, 1.0]}},
    )
    doc = window_document(full, STORED, version=5, computed_at=T0 + MINUTE)
    assert (doc["intervals"], doc["curves"]) == (full.intervals, full.curves)
    assert (doc["detail_version"], doc["detail_computed_at"]) == (5, T0 + MINUTE)


# --- the SLA verdict never mixes versions -------------------------------------------


AUC = {"auc_roc": {"lower": 0.55, "upper": 0.9, "level": 0.95}}


def test_an_objective_on_an_older_detail_interval_is_pending() -> None:
    objective = Objective("auc_roc", ">=", 0.6)
    current = evaluate_objective(objective, {"auc_roc": 0.8}, AUC)
    assert (current.status, current.lower) == ("inconclusive", 0.55)
    for value in (0.8, 0.5):  # a point value on either side of the target decides nothing
        older = evaluate_objective(objective, {"auc_roc": value}, AUC, detail_current=False)
        assert (older.status, older.value, older.lower, older.upper) == (
            "pending",
            value,
            None,
            None,
        )
        assert older.reason == DETAIL_PENDING_REASON.format(name="auc_roc")
        assert older.to_dict()["evidence"] == "interval"
    for intervals in ({}, None):  # a summary's window: no interval at all yet
        bare = evaluate_objective(objective, {"auc_roc": 0.5}, intervals, detail_current=False)
        assert bare.status == "pending"
    missing = evaluate_objective(objective, {"auc_roc": None}, AUC, detail_current=False)
    assert missing.status == "insufficient_data"


def test_credible_intervals_follow_the_stamp_and_point_objectives_are_not_affected() -> None:
    recall = {"recall": {"lower": 0.55, "upper": 0.9, "level": 0.95}}
    objective = Objective("recall", ">=", 0.6)
    assert evaluate_objective(objective, {"recall": 0.8}, recall).status == "inconclusive"
    older = evaluate_objective(objective, {"recall": 0.8}, recall, detail_current=False)
    assert (older.status, older.lower, older.upper) == ("pending", None, None)
    point = Objective("auc_roc", ">=", 0.6, "point")
    for value, status in ((0.8, "met"), (0.5, "breached")):
        stale = evaluate_objective(point, {"auc_roc": value}, AUC, detail_current=False)
        assert (stale.status, stale.reason) == (status, None)


def _view(detail_version: int | None, detail_at: datetime | None) -> WindowView:
    return WindowView(
        start=T0,
        end=END,
        segment=None,
        granularity="1h",
        n=1_000,
        positives=100,
        status="fresh",
        metrics={"auc_roc": 0.8},
        intervals=AUC,
        aggregate_version=4,
        computed_at=T0 + MINUTE,
        detail_version=detail_version,
        detail_computed_at=detail_at,
    )


def test_the_read_model_shows_the_detail_stamp_and_the_report_follows_it() -> None:
    objective = (Objective("auc_roc", ">=", 0.6),)
    current, older, none = _view(4, T0 + MINUTE), _view(3, T0), _view(None, None)
    assert current.to_dict()["detail"] == {
        "aggregate_version": 4,
        "computed_at": "2026-11-26T10:01:00Z",
        "current": True,
    }
    assert older.to_dict()["detail"] == {
        "aggregate_version": 3,
        "computed_at": "2026-11-26T10:00:00Z",
        "current": False,
    }
    assert none.to_dict()["detail"] is None and not none.detail_current
    assert window_results(objective, current)[0].status == "inconclusive"
    assert window_results(objective, older)[0].status == "pending"
    assert window_results(objective, none)[0].status == "pending"


def test_exporter_streak_outcomes_follow_the_detail_stamp() -> None:
    objective = (Objective("auc_roc", ">=", 0.6),)
    low = {"auc_roc": {"lower": 0.3, "upper": 0.5}}
    assert window_outcomes(objective, (), {"auc_roc": 0.8}, low).breached == (True,)
    for value in (0.8, 0.4):  # pending whatever the point value: untested
        stale = window_outcomes(objective, (), {"auc_roc": value}, low, detail_current=False)
        assert stale.breached == (None,)
    # a window pending its detail neither ends nor extends a breach streak
    assert streak([True, stale.breached[0], True, False]) == 2
