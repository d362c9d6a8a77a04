"""The worker's detail budget (app/services/refresh/budget.py) on an injected clock, and
how a deferred detail sets its next due time (app/services/refresh/tiers.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.services.refresh.budget import HALF_LIFE_SECONDS, DetailBudget
from app.services.refresh.tiers import detail_due, next_detail_due
from app.services.windows.compute import Tier
from app.worker.settings import WorkerSettings


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_details_fit_while_they_took_at_most_their_share() -> None:
    budget = DetailBudget(0.5, clock=Clock())
    assert budget.allows()  # nothing accounted yet
    budget.record(0.030, Tier.FULL)
    assert not budget.allows()  # all of the time so far went to a detail
    for _ in range(4):
        budget.record(0.007, Tier.SUMMARY)
    assert not budget.allows()  # 30 of 58 ms
    budget.record(0.007, Tier.SUMMARY)
    assert budget.allows()  # 30 of 65 ms


def test_past_refreshes_weigh_less_with_time() -> None:
    clock = Clock()
    budget = DetailBudget(0.5, clock=clock)
    budget.record(1.0, Tier.FULL)
    clock.now = HALF_LIFE_SECONDS
    assert not budget.allows()  # decayed alike: still all detail
    assert budget.detail_seconds == budget.total_seconds == pytest.approx(0.5)
    budget.record(0.4, Tier.SUMMARY)  # 0.5 s of detail left against 0.9 s in all
    assert budget.detail_seconds == pytest.approx(0.5)
    assert budget.total_seconds == pytest.approx(0.9)
    assert not budget.allows()
    clock.now = 2 * HALF_LIFE_SECONDS
    budget.record(0.1, Tier.SUMMARY)  # 0.25 against 0.55
    assert budget.allows()


def test_a_share_of_one_never_defers_and_the_share_is_checked() -> None:
    budget = DetailBudget(1.0, clock=Clock())
    budget.record(5.0, Tier.FULL)
    assert budget.allows()
    for share in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="share"):
            DetailBudget(share)
    assert WorkerSettings().detail_share == 0.25


T0 = datetime(2026, 11, 26, 10, tzinfo=UTC)
END = T0 + timedelta(days=1)
DUE = T0 - timedelta(seconds=5)


def _due(**changes: object) -> bool:
    args: dict[str, object] = {
        "now": T0,
        "window_end": END,
        "detail_due_at": DUE,
        "detail_interval_seconds": 300.0,
        "backlog": True,
        "budget_allows": False,
    }
    args.update(changes)
    return detail_due(**args)  # type: ignore[arg-type]


def test_an_exhausted_budget_defers_only_a_detail_due_by_its_time() -> None:
    assert _due() is False  # due, but the budget is spent: a summary
    assert _due(budget_allows=True) is True
    assert _due(backlog=False) is True  # a short queue: full whatever the budget
    assert _due(now=END) is True  # the window has closed: its final detail
    assert _due(detail_interval_seconds=0.0) is True


def test_a_deferred_detail_is_due_again_one_delay_later() -> None:
    due = next_detail_due(
        now=T0, window_end=END, detail_due_at=DUE, detail_interval_seconds=300.0, phase=0.0
    )
    assert due == T0 + timedelta(seconds=300)  # the passed due time is replaced
    pending = next_detail_due(
        now=T0,
        window_end=END,
        detail_due_at=T0 + timedelta(seconds=9),
        detail_interval_seconds=300.0,
        phase=0.0,
    )
    assert pending == T0 + timedelta(seconds=9)  # a future due time is kept
