"""Refresh one dirty window: claim -> load -> compute -> persist (fenced).

Each step is its own short transaction, owned here; no transaction is open
while computing. The SQL is in :mod:`app.db.queue`; the computation in
:func:`app.services.window_compute.compute_window_result`.

* :func:`claim_window` claims the waiting window with the oldest change and
  reads its sums, its unfolded deltas and its model in the claim transaction;
  the sums plus exactly those deltas (:func:`app.services.deltas.fold`) are
  what the window is computed on.
* :func:`compute_claimed` loads the drift reference (the sum of the reference
  windows of the same segment, cached by their versions) and computes: the
  full result when the window's detail is due, else the summary
  (:mod:`app.services.refresh_tier`).
* :func:`persist_result` fences the completion on the claim attempt and, in
  the same transaction, folds the claimed deltas into the aggregate (new
  version; the deltas deleted) and stores the result with that version (a
  summary keeps the stored detail: :mod:`app.services.window_document`).
  When the window's data changed and other windows use it as their drift
  reference, those are marked for recomputation in the same transaction.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import queue
from app.db.models import Model, WindowAggregate
from app.db.queue import Claim
from app.db.session import write_transaction
from app.services.deltas import Delta, Folded, aggregate_columns, exact_of, fold
from app.services.drift_reference import dependent_windows, reference_period
from app.services.model_config import ModelConfig
from app.services.refresh_tier import detail_due, next_detail_due
from app.services.window_compute import WindowResult, compute_window_result
from app.services.window_document import KEPT_BY_SUMMARY, window_document
from app.services.window_sums import WindowSums
from app.services.windowing import window_length
from app.statuses import StoredStatus

log = logging.getLogger("priorwatch.worker")


@dataclass(frozen=True)
class ClaimedWindow:
    """A claimed window with everything its computation needs.

    ``folded`` is the aggregate plus the deltas ``batch_ids`` (the claimed
    ones): the window is computed on ``folded.sums`` and the fold stores it.
    """

    claim: Claim
    model: ModelConfig
    folded: Folded
    batch_ids: tuple[uuid.UUID, ...]
    detail_due_at: datetime | None = None
    """The row's detail due time at the claim (app/services/refresh_tier.py)."""

    @property
    def sums(self) -> WindowSums:
        return self.folded.sums


class Outcome(enum.Enum):
    """What :func:`persist_result` did."""

    STORED = "stored"
    """The result is stored and the window is clean (no batch arrived meanwhile)."""
    STORED_STILL_DIRTY = "stored_still_dirty"
    """The result is stored; deltas arrived meanwhile, so the window stays waiting."""
    FENCED_OUT = "fenced_out"
    """Another worker claimed the window since: nothing was written."""


def claim_window(
    session: Session, *, lease_seconds: float, settle_seconds: float = 0.0
) -> ClaimedWindow | None:
    """Claim the oldest dirty window (one transaction); None when none is waiting.

    On SQLite an idle poll only reads: the database write lock is taken only
    when a window is waiting, so an idle worker never makes writers wait.
    """
    if session.get_bind().dialect.name == "sqlite":
        waiting = queue.any_claimable(session, settle_seconds=settle_seconds)
        session.rollback()
        if not waiting:
            return None
    with write_transaction(session):
        found = queue.claim_next(
            session, lease_seconds=lease_seconds, settle_seconds=settle_seconds
        )
        if found is None:
            return None
        claim, row = found
        model_row = session.get(Model, claim.model_id)
        if model_row is None:  # the model was deleted: its rows cascade away
            return None
        model = ModelConfig.from_row(model_row)
        deltas = [Delta.from_row(d) for d in queue.claimed_deltas(session, claim)]
        base = WindowSums.from_row(row)
        folded = fold(
            base,
            exact_of(base, row.exact_sums),
            deltas,
            model.n_bins,
            stored_unlabelled=row.n_unlabelled,
        )
        claimed = ClaimedWindow(
            claim, model, folded, tuple(d.batch_id for d in deltas), row.detail_due_at
        )
    return claimed


class ReferenceCache:
    """Summed reference periods, keyed by the (start, version) of every window in them.

    A reference changes only when one of its windows gets a batch (its version
    moves), so the key identifies the sum exactly; most windows of a model share
    one reference and it is read and summed once per process.
    """

    def __init__(self, max_entries: int = 64) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[Any, ...], WindowSums | None] = OrderedDict()

    def get(
        self, session: Session, model: ModelConfig, segment: str, start: datetime, end: datetime
    ) -> WindowSums | None:
        """The sum of the windows of (model, segment) starting in [start, end), or None."""
        where = (
            WindowAggregate.model_id == model.id,
            WindowAggregate.segment == segment,
            WindowAggregate.window_start >= start,
            WindowAggregate.window_start < end,
            WindowAggregate.version > 0,
        )
        versions = session.execute(
            select(WindowAggregate.window_start, WindowAggregate.version)
            .where(*where)
            .order_by(WindowAggregate.window_start)
        ).all()
        key = (model.id, segment, model.n_bins, tuple((s, int(v)) for s, v in versions))
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        rows = session.scalars(select(WindowAggregate).where(*where)).all()
        total = WindowSums.merge(WindowSums.from_row(r) for r in rows)
        self._entries[key] = total
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return total


def compute_claimed(
    session: Session,
    claimed: ClaimedWindow,
    cache: ReferenceCache,
    *,
    detail_interval_seconds: float = 0.0,
) -> WindowResult:
    """Load the window's drift reference (read-only) and compute its result: full when
    its detail is due (:func:`app.services.refresh_tier.detail_due`), else the summary."""
    claim, model = claimed.claim, claimed.model
    period = reference_period(model, claim.window_start)
    reference = None
    try:
        if period is not None and not period.contains_window:
            reference = cache.get(session, model, claim.segment, period.start, period.end)
    finally:
        session.rollback()  # end the read transaction before computing
    return compute_window_result(
        model,
        claimed.sums,
        reference,
        in_reference_period=period is not None and period.contains_window,
        detail=detail_due(
            now=claim.claimed_at,
            window_end=_window_end(claimed),
            detail_due_at=claimed.detail_due_at,
            detail_interval_seconds=detail_interval_seconds,
        ),
    )


def _window_end(claimed: ClaimedWindow) -> datetime:
    return claimed.claim.window_start + window_length(claimed.model.window)


def persist_result(
    session: Session,
    claimed: ClaimedWindow,
    result: WindowResult | None,
    error: str | None = None,
    *,
    detail_interval_seconds: float = 0.0,
) -> Outcome:
    """Store ``result`` (or ``error``) for the claimed window, fenced (one transaction).

    Parameters
    ----------
    result : WindowResult or None
        The computed result; None together with ``error`` when the computation
        failed (stored with status "error"; the window is not retried until
        its aggregate changes, since the computation is deterministic).
        A summary result keeps the stored detail
        (:func:`app.services.window_document.window_document`) and sets the
        window's detail due time; a full one (or an error) clears it.
    """
    claim = claimed.claim
    folded = (
        aggregate_columns(claimed.folded, claimed.model.thresholds) if claimed.batch_ids else None
    )
    due = None
    if result is not None and not result.detail:
        due = next_detail_due(
            now=claim.claimed_at,
            window_end=_window_end(claimed),
            detail_due_at=claimed.detail_due_at,
            detail_interval_seconds=detail_interval_seconds,
        )
    with write_transaction(session):
        version = queue.fence(
            session, claim, folded=folded, batch_ids=claimed.batch_ids, detail_due_at=due
        )
        if version is None:
            return Outcome.FENCED_OUT
        previous = queue.stored_version(session, claim)
        now = queue.database_now(session)
        if result is None:
            status, document = StoredStatus.ERROR, {"error": error or "computation failed"}
        else:
            stored = None if result.detail else queue.stored_intervals(session, claim)
            status = StoredStatus.FRESH
            document = window_document(result, stored, version=version, computed_at=now)
        queue.upsert_window_metrics(
            session,
            claim,
            version=version,
            status=status,
            computed_at=now,
            document=document,
            keep=KEPT_BY_SUMMARY if result is not None and not result.detail else (),
        )
        if previous is None or previous < version:
            _invalidate_dependents(session, claimed, now)
        waiting = queue.has_deltas(session, claim)
    return Outcome.STORED_STILL_DIRTY if waiting else Outcome.STORED


def _invalidate_dependents(session: Session, claimed: ClaimedWindow, now: datetime) -> None:
    dependents = dependent_windows(claimed.model, claimed.claim.window_start)
    if dependents is None:
        return
    marked = queue.invalidate_windows(
        session,
        claimed.claim.model_id,
        now=now,
        segment=claimed.claim.segment,
        start_from=dependents.start_from,
        start_to=dependents.start_to,
        exclude=dependents.exclude,
    )
    if marked:
        log.info(
            "reference window %s/%s changed: %d dependent windows marked",
            claimed.model.name,
            claimed.claim.segment,
            marked,
        )


def refresh_claimed(
    session: Session,
    claimed: ClaimedWindow,
    cache: ReferenceCache,
    *,
    detail_interval_seconds: float = 0.0,
) -> Outcome:
    """Compute and persist a claimed window; a failing computation is stored as an error.

    ``detail_interval_seconds`` (the worker setting; 0: every refresh is full)
    bounds how long the detail tier lags the data (app/services/refresh_tier.py).
    """
    interval = detail_interval_seconds
    try:
        result = compute_claimed(session, claimed, cache, detail_interval_seconds=interval)
    except Exception as exc:
        if _is_database_error(exc):
            raise  # infrastructure, not the window: let the loop back off
        log.exception(
            "window %s/%s/%s failed",
            claimed.model.name,
            claimed.claim.segment,
            claimed.claim.window_start.isoformat(),
        )
        return persist_result(session, claimed, None, f"{type(exc).__name__}: {exc}")
    return persist_result(session, claimed, result, detail_interval_seconds=interval)


def release_claimed(session: Session, claimed: ClaimedWindow) -> bool:
    """Give the window back (graceful stop); False if the claim was already stale."""
    with write_transaction(session):
        return queue.release(session, claimed.claim)


def _is_database_error(exc: BaseException) -> bool:
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    return isinstance(exc, DBAPIError | SQLAlchemyError)
