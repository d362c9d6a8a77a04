"""The reads of the window API: stored windows with their results, and the sources
of merged windows (re-windowing).

Each takes a model id and a segment key; the counts of a stored window are its
aggregate's plus its unfolded deltas' (:func:`unfolded_totals`). They only
read: the caller's session is left with at most an open read transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, Select, Subquery, and_, func, or_, select
from sqlalchemy.orm import Session

from app.db.models import BatchDelta, WindowAggregate, WindowMetrics

WA = WindowAggregate
WM = WindowMetrics


def unfolded_totals(model_id: int, segment: str) -> Subquery:
    """Per window of (model, segment) with unfolded deltas: ``deltas``, ``n``, ``positives``,
    ``n_unlabelled``."""
    return (
        select(
            BatchDelta.window_start,
            func.count().label("deltas"),
            func.sum(BatchDelta.n).label("n"),
            func.sum(BatchDelta.positives).label("positives"),
            func.sum(BatchDelta.n_unlabelled).label("n_unlabelled"),
        )
        .where(BatchDelta.model_id == model_id, BatchDelta.segment == segment)
        .group_by(BatchDelta.window_start)
        .subquery()
    )


def unfolded_deltas(
    session: Session, model_id: int, segment: str, starts: Collection[datetime]
) -> list[BatchDelta]:
    """The unfolded deltas of the windows of (model, segment) starting at ``starts``."""
    return list(
        session.scalars(
            select(BatchDelta).where(
                BatchDelta.model_id == model_id,
                BatchDelta.segment == segment,
                BatchDelta.window_start.in_(list(starts)),
            )
        )
    )


def _stored_columns(unfolded: Subquery, with_curves: bool) -> list[Any]:
    columns: list[Any] = [
        WA.window_start,
        (WA.n + func.coalesce(unfolded.c.n, 0)).label("n"),
        (WA.positives + func.coalesce(unfolded.c.positives, 0)).label("positives"),
        func.coalesce(unfolded.c.deltas, 0).label("unfolded"),
        WA.version,
        WA.dirty,
        WM.status,
        WM.aggregate_version,
        WM.computed_at,
        WM.metrics,
        WM.reasons,
        WM.intervals,
        WM.drift,
        WM.error,
        (WA.n_unlabelled + func.coalesce(unfolded.c.n_unlabelled, 0)).label("n_unlabelled"),
        WM.estimate,
        WM.maturity,
        WM.detail_version,
        WM.detail_computed_at,
    ]
    if with_curves:
        columns.append(WM.curves)
    return columns


def _stored_select(model_id: int, key: str, *, with_curves: bool) -> Select[Any]:
    unfolded = unfolded_totals(model_id, key)
    return (
        select(*_stored_columns(unfolded, with_curves))
        .select_from(WA)
        .outerjoin(
            WM,
            and_(
                WM.model_id == WA.model_id,
                WM.segment == WA.segment,
                WM.window_start == WA.window_start,
            ),
        )
        .outerjoin(unfolded, unfolded.c.window_start == WA.window_start)
        .where(
            WA.model_id == model_id,
            WA.segment == key,
            or_(_has_rows(), unfolded.c.deltas.is_not(None)),
        )
    )


def _has_rows() -> Any:
    """The aggregate holds rows, labelled or not."""
    return (WA.n > 0) | (WA.n_unlabelled > 0)


def stored_rows(
    session: Session, model_id: int, key: str, start: datetime, end: datetime
) -> Sequence[Row[Any]]:
    """The stored windows of (model, segment key) with data whose start is in [start, end),
    oldest first: their current counts (``n``, ``positives``, ``n_unlabelled``, with
    ``unfolded`` deltas), ``version``, ``dirty`` and the stored result's columns."""
    return session.execute(
        _stored_select(model_id, key, with_curves=False)
        .where(WA.window_start >= start, WA.window_start < end)
        .order_by(WA.window_start)
    ).all()


def stored_row(session: Session, model_id: int, key: str, start: datetime) -> Row[Any] | None:
    """One stored window as :func:`stored_rows` reads it, with ``curves``; None without data."""
    return session.execute(
        _stored_select(model_id, key, with_curves=True).where(WA.window_start == start)
    ).one_or_none()


def starts_with_data(
    session: Session, model_id: int, key: str, start: datetime, end: datetime
) -> Sequence[datetime]:
    """The starts in [start, end) of the windows of (model, segment key) holding rows or
    unfolded deltas, oldest first."""
    unfolded = unfolded_totals(model_id, key)
    return session.scalars(
        select(WA.window_start)
        .outerjoin(unfolded, unfolded.c.window_start == WA.window_start)
        .where(
            WA.model_id == model_id,
            WA.segment == key,
            or_(_has_rows(), unfolded.c.deltas.is_not(None)),
            WA.window_start >= start,
            WA.window_start < end,
        )
        .order_by(WA.window_start)
    ).all()


def aggregates_at(
    session: Session, model_id: int, key: str, starts: Collection[datetime]
) -> Sequence[WindowAggregate]:
    """The aggregates of the windows of (model, segment key) starting at ``starts``."""
    return session.scalars(
        select(WA).where(WA.model_id == model_id, WA.segment == key, WA.window_start.in_(starts))
    ).all()
