"""Tiered refresh on a real database (SQLite and PostgreSQL, real migrations): summary
refreshes of open windows, the carried detail and its stamp, the detail due time in the
claim query, a closed-window backlog's summaries first and details after (the SLA
pending in between), and the read model."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import numpy as np
import sqlalchemy as sa
from _worker_support import (
    aggregate_rows,
    metrics_rows,
    post_batch,
    register_model,
    utcnow,
    window_starts,
)
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import queue
from app.db.models import ALL_SEGMENTS, WindowAggregate
from app.db.session import write_transaction
from app.exporter.streaks import read_outcomes
from app.services.models.config import ModelConfig
from app.services.read.sla_report import sla_report as read_sla_report
from app.services.read.windows import get_window
from app.services.refresh.budget import DetailBudget
from app.services.refresh.groups import (
    ClaimedWindow,
    RefreshPolicy,
    claim_windows,
    refresh_group,
)
from app.services.refresh.tiers import DETAIL_SPREAD, detail_phase
from app.services.windows.compute import Tier, compute_window_result
from app.services.windows.reference_cache import ReferenceCache
from app.sla.objectives import Objective
from app.timegrid import window_length

INTERVAL = 300.0
OPEN = "1w"
"""A window that stays open through the test (the current week)."""


def refresh(
    factory: sessionmaker[Session], interval: float = INTERVAL, budget: DetailBudget | None = None
) -> ClaimedWindow | None:
    """Claim the next window and refresh it as the worker does; None when none is claimable.

    Groups of one: a claim always takes a whole group, so the tiers apply as under a
    backlog (app/services/refresh/tiers.py).
    """
    with factory() as session:
        group = claim_windows(session, lease_seconds=30.0)
        if not group:
            return None
        refresh_group(session, group, ReferenceCache(), policy=RefreshPolicy(interval, budget))
        return group[0]


def open_window(
    factory: sessionmaker[Session], settings: Settings, seed: int
) -> tuple[ModelConfig, datetime, np.random.Generator]:
    """A model with one open window holding a batch of 2,000 rows: (model, start, rng)."""
    model = register_model(factory, window=OPEN)
    (start,) = window_starts(model, 1)
    rng = np.random.default_rng(seed)
    post_batch(factory, model, settings, at=utcnow(), rng=rng, n=2_000)
    return model, start, rng


def set_due(
    factory: sessionmaker[Session], model: ModelConfig, start: datetime, due: datetime
) -> None:
    with factory() as session, write_transaction(session):
        session.execute(
            sa.update(WindowAggregate)
            .where(WindowAggregate.model_id == model.id, WindowAggregate.window_start == start)
            .values(detail_due_at=due)
        )


def test_an_open_window_gets_a_summary_then_its_detail_when_due(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model = register_model(factory, window=OPEN)
    (start,) = window_starts(model, 1)
    end = start + window_length(model.window)
    rng = np.random.default_rng(41)
    post_batch(factory, model, settings, at=utcnow(), rng=rng, n=2_000)

    first = refresh(factory)
    assert first is not None and first.claim.window_start == start
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    assert stored.metrics["auc_roc"] is not None and stored.curves is None
    assert stored.intervals == {}  # every interval is in the detail tier
    assert (stored.detail_version, stored.detail_computed_at) == (None, None)
    (row,) = aggregate_rows(factory, model.id)
    delay = INTERVAL * (1 - DETAIL_SPREAD * detail_phase(*first.claim.key))
    assert row.detail_due_at == min(first.claim.claimed_at + timedelta(seconds=delay), end)
    assert refresh(factory) is None  # nothing changed and the detail is not due yet
    with factory() as session:
        assert queue.queue_stats(session).dirty_windows == 0  # a due time is not a change

    set_due(factory, model, start, utcnow() - timedelta(seconds=1))  # as if the time passed
    second = refresh(factory)
    assert second is not None and not second.batch_ids  # claimed without a new batch
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    full = compute_window_result(model, second.sums, None)
    assert (stored.curves, stored.intervals) == (full.curves, full.intervals)
    assert stored.detail_version == stored.aggregate_version == 1
    assert stored.detail_computed_at == stored.computed_at
    (row,) = aggregate_rows(factory, model.id)
    assert row.detail_due_at is None and row.version == 1
    assert refresh(factory) is None


def test_a_summary_keeps_the_previous_detail_with_its_stamp(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model, start, rng = open_window(factory, settings, 42)
    assert refresh(factory, interval=0.0) is not None  # full
    before = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    assert before.detail_version == 1 and before.curves is not None

    post_batch(factory, model, settings, at=utcnow(), rng=rng, n=2_000, separation=0.5)
    claimed = refresh(factory)
    assert claimed is not None
    after = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    summary = compute_window_result(model, claimed.sums, None, tier=Tier.SUMMARY)
    assert after.aggregate_version == 2 and after.metrics == summary.metrics
    assert after.metrics != before.metrics
    assert after.curves == before.curves
    assert (after.detail_version, after.detail_computed_at) == (1, before.detail_computed_at)
    assert before.intervals and after.intervals == {
        k: v for k, v in before.intervals.items() if summary.metrics.get(k) is not None
    }

    with factory() as session:
        view = get_window(session, model, start, segment=None, granularity=None, now=utcnow())
    assert view is not None and view.curves == before.curves
    assert view.to_dict()["detail"]["aggregate_version"] == 1
    assert view.to_dict()["detail"]["current"] is False
    assert view.aggregate_version == 2 and view.status == "fresh"


def test_a_closed_window_gets_its_summary_then_exactly_one_full_refresh(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model = register_model(factory, window="1h")
    past = utcnow() - timedelta(hours=3)
    start = post_batch(factory, model, settings, at=past, rng=np.random.default_rng(43))
    first = refresh(factory)  # groups of one: a backlog, so the summary first
    assert first is not None and first.claim.window_start == start and first.batch_ids
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    assert stored.metrics["auc_roc"] is not None and stored.curves is None
    (row,) = aggregate_rows(factory, model.id)
    assert row.detail_due_at == first.claim.claimed_at  # closed: due at once, behind the queue
    second = refresh(factory)  # claimed for its detail alone
    assert second is not None and not second.batch_ids
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    full = compute_window_result(model, second.sums, None)
    assert (stored.curves, stored.intervals) == (full.curves, full.intervals)
    assert stored.detail_version == stored.aggregate_version == 1
    (row,) = aggregate_rows(factory, model.id)
    assert row.detail_due_at is None
    assert refresh(factory) is None
    day = start.replace(hour=0)
    with factory() as session:  # a merged window computes both tiers now
        merged = get_window(session, model, day, segment=None, granularity="1d", now=utcnow())
    assert merged is not None and merged.curves is not None and merged.detail_current
    assert merged.to_dict()["detail"]["computed_at"] == merged.to_dict()["computed_at"]


def test_a_closed_window_backlog_gets_every_summary_first_and_the_sla_waits_for_details(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    """Six closed windows waiting, claims of two: the claims take the six summaries, then
    the six details (each due at its summary's claim, behind the data that waited). In
    between, the SLA report and the exporter's streak outcomes read the interval
    objective as pending; once the details are stored they decide it from the intervals,
    as the objective does on an independent full computation of the same sums."""
    objective = {"metric": "auc_roc", "op": ">=", "target": 0.8}
    model = register_model(factory, window="1h", sla=[objective])
    starts = window_starts(model, 6, end=utcnow() - timedelta(hours=1))
    rng = np.random.default_rng(48)
    for start in starts:
        post_batch(factory, model, settings, at=start, rng=rng, n=600)

    tiers: list[tuple[datetime, bool]] = []
    summaries: dict[datetime, ClaimedWindow] = {}
    checked = False
    while True:
        with factory() as session:
            group = claim_windows(session, lease_seconds=30.0, group_size=2)
            if not group:
                break
            refresh_group(session, group, ReferenceCache(), policy=RefreshPolicy(INTERVAL))
        for claimed in group:
            start = claimed.claim.window_start
            tiers.append((start, start in summaries))
            summaries.setdefault(start, claimed)
        if len(summaries) == len(starts) and len(tiers) == len(starts):
            report = sla_report(
                factory, model, starts[0], starts[-1] + timedelta(hours=1), utcnow()
            )
            assert [w["status"] for w in report["windows"]] == ["pending"] * len(starts)
            for window in report["windows"]:
                (result,) = window["objectives"]
                assert result["status"] == "pending" and result["value"] is not None
                assert (result["lower"], result["upper"]) == (None, None)
            assert report["summary"]["windows_pending"] == len(starts)
            assert report["summary"]["compliance_ratio"] is None
            assert set(streak_outcomes(factory, model)) == {None}
            checked = True
    assert [detail for _, detail in tiers] == [False] * 6 + [True] * 6  # summaries first
    assert checked
    assert sorted(start for start, _ in tiers[:6]) == starts

    stored = metrics_rows(factory, model.id)
    report = sla_report(factory, model, starts[0], starts[-1] + timedelta(hours=1), utcnow())
    statuses = [w["objectives"][0]["status"] for w in report["windows"]]
    expected = []
    for start in starts:
        row = stored[(ALL_SEGMENTS, start)]
        assert row.detail_version == row.aggregate_version == 1 and row.curves is not None
        full = compute_window_result(model, summaries[start].sums, None)
        assert (row.metrics, row.intervals) == (full.metrics, full.intervals)
        bounds = full.intervals["auc_roc"]
        decided = Objective("auc_roc", ">=", 0.8).status(
            full.metrics["auc_roc"], bounds["lower"], bounds["upper"]
        )
        expected.append(str(decided))
    assert statuses == expected and "pending" not in statuses
    assert streak_outcomes(factory, model) == [s == "breached" for s in expected]


def sla_report(
    factory: sessionmaker[Session],
    model: ModelConfig,
    start: datetime,
    end: datetime,
    now: datetime,
) -> dict[str, Any]:
    with factory() as session:
        report = read_sla_report(session, model, segment=None, start_from=start, to=end, now=now)
    return report.to_dict()


def streak_outcomes(factory: sessionmaker[Session], model: ModelConfig) -> list[bool | None]:
    """The exporter's breach outcome of each stored window of ``model``, in start order."""
    objectives = {model.id: [Objective.from_document(o) for o in model.sla]}
    with factory() as session:
        rows = metrics_rows(factory, model.id)
        keys = [(model.id, seg, start, row.computed_at) for (seg, start), row in rows.items()]
        outcomes = read_outcomes(session, keys, objectives)
    return [outcomes[key].breached[0] for key in sorted(outcomes, key=lambda k: k[2])]


def test_an_open_windows_detail_falls_due_at_its_end(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    """With an interval longer than the window, the due time is the window's end: the
    result is then claimable once, with no new batch, and gets its full refresh."""
    model = register_model(factory, window=OPEN)
    (start,) = window_starts(model, 1)
    end = start + window_length(model.window)
    post_batch(factory, model, settings, at=utcnow(), rng=np.random.default_rng(44))
    assert refresh(factory, interval=30 * 86_400.0) is not None
    (row,) = aggregate_rows(factory, model.id)
    assert row.detail_due_at == end
    set_due(factory, model, start, utcnow() - timedelta(seconds=1))  # the end passed
    claimed = refresh(factory, interval=30 * 86_400.0)
    assert claimed is not None and not claimed.batch_ids
    assert metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)].curves is not None
    assert refresh(factory, interval=30 * 86_400.0) is None  # exactly one


def test_claims_take_the_older_of_change_and_detail_due(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model = register_model(factory, window="1h")
    a, b, c, d = window_starts(model, 4, end=utcnow() - timedelta(hours=1))
    rng = np.random.default_rng(45)
    for start in (a, b, c, d):
        post_batch(factory, model, settings, at=start, rng=rng)
    while refresh(factory) is not None:  # every window refreshed (summary, then detail)
        pass
    now = utcnow()
    set_due(factory, model, a, now + timedelta(hours=1))  # not due yet: never claimed
    set_due(factory, model, c, now - timedelta(minutes=10))  # due before b's change
    post_batch(factory, model, settings, at=b, rng=rng)  # a change now
    set_due(factory, model, d, now + timedelta(minutes=5))  # a change now, its due later
    post_batch(factory, model, settings, at=d, rng=rng)

    order = []
    while (claimed := refresh(factory)) is not None:
        order.append((claimed.claim.window_start, len(claimed.batch_ids)))
    # b and d are closed: their summaries first, their details due at those claims, after
    assert order == [(c, 0), (b, 1), (d, 1), (b, 0), (d, 0)]
    rows = {r.window_start: r for r in aggregate_rows(factory, model.id)}
    assert rows[a].detail_due_at is not None  # still waiting for its time
    assert all(rows[s].detail_due_at is None for s in (b, c, d))  # their details are done


def test_a_settings_change_makes_the_detail_due_now(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model = register_model(factory, window=OPEN)
    (start,) = window_starts(model, 1)
    post_batch(factory, model, settings, at=utcnow(), rng=np.random.default_rng(46))
    assert refresh(factory) is not None  # summary: detail due later
    (row,) = aggregate_rows(factory, model.id)
    later = row.detail_due_at
    assert later is not None
    with factory() as session, write_transaction(session):
        now = queue.database_now(session)
        assert queue.invalidate_windows(session, model.id, now=now, detail_due=True) == 1
    (row,) = aggregate_rows(factory, model.id)
    assert row.detail_due_at == now < later
    earlier = now - timedelta(minutes=1)
    set_due(factory, model, start, earlier)
    with factory() as session, write_transaction(session):  # an earlier due time is kept
        queue.invalidate_windows(session, model.id, now=now, detail_due=True)
    (row,) = aggregate_rows(factory, model.id)
    assert row.detail_due_at == earlier and row.dirty
    claimed = refresh(factory)
    assert claimed is not None
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    assert stored.curves is not None and stored.detail_version == stored.aggregate_version


def test_a_short_queue_refreshes_in_full_and_a_backlog_in_summaries(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    """A claim that takes fewer windows than its group size (fewer than twice the group
    size were waiting) computes in full; a claim of a whole group computes summaries."""
    rng = np.random.default_rng(47)
    models = [register_model(factory, f"m{i}", window=OPEN) for i in range(5)]
    for model in models:
        post_batch(factory, model, settings, at=utcnow(), rng=rng)
    with factory() as session:  # 5 waiting, groups of 2: a whole group, a backlog
        backlog = claim_windows(session, lease_seconds=30.0, group_size=2)
        assert len(backlog) == 2 and all(c.backlog for c in backlog)
        refresh_group(session, backlog, ReferenceCache(), policy=RefreshPolicy(INTERVAL))
    with factory() as session:  # 3 waiting, groups of 4: a short queue
        short = claim_windows(session, lease_seconds=30.0, group_size=4)
        assert len(short) == 1 and not short[0].backlog
        refresh_group(session, short, ReferenceCache(), policy=RefreshPolicy(INTERVAL))
    for claimed, full in [(backlog[0], False), (backlog[1], False), (short[0], True)]:
        model_id, start = claimed.claim.model_id, claimed.claim.window_start
        stored = metrics_rows(factory, model_id)[(ALL_SEGMENTS, start)]
        tier = Tier.FULL if full else Tier.SUMMARY
        expected = compute_window_result(claimed.model, claimed.sums, None, tier=tier)
        assert (stored.curves is not None, stored.intervals) == (full, expected.intervals)
        assert (stored.detail_version is not None) is full
        (row,) = aggregate_rows(factory, model_id)
        assert (row.detail_due_at is None) is full  # a summary sets the due time


def test_a_spent_detail_budget_defers_a_due_detail_to_a_new_due_time(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model, start, rng = open_window(factory, settings, 43)
    assert refresh(factory) is not None  # a summary: the detail is due later
    set_due(factory, model, start, utcnow() - timedelta(seconds=1))
    post_batch(factory, model, settings, at=utcnow(), rng=rng, n=500)

    spent = DetailBudget(0.5)
    spent.record(1.0, Tier.FULL)  # all of the worker's time went to details
    deferred = refresh(factory, budget=spent)
    assert deferred is not None and deferred.batch_ids  # the new data is folded ...
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    assert stored.aggregate_version == 2 and stored.curves is None  # ... as a summary
    (row,) = aggregate_rows(factory, model.id)
    delay = INTERVAL * (1 - DETAIL_SPREAD * detail_phase(*deferred.claim.key))
    assert row.detail_due_at == deferred.claim.claimed_at + timedelta(seconds=delay)
    assert spent.total_seconds > spent.detail_seconds  # the summary was accounted
    assert refresh(factory, budget=spent) is None  # not claimable again before then

    set_due(factory, model, start, utcnow() - timedelta(seconds=1))
    room = DetailBudget(0.5)
    assert refresh(factory, budget=room) is not None
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    assert stored.curves is not None and stored.detail_version == 2
    assert room.detail_seconds == room.total_seconds > 0.0
