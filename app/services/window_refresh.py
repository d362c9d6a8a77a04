"""Refresh one dirty window: claim -> load -> compute -> persist (fenced).

Each step is its own short transaction, owned here; no transaction is open
while computing. The SQL is in :mod:`app.db.queue`; the computation in
:func:`app.services.window_compute.compute_window_result`.

* :func:`claim_window` claims the oldest dirty window and reads its sums and
  its model in the claim transaction (so the sums are those of the claimed
  version).
* :func:`compute_claimed` loads the drift reference (the sum of the reference
  windows of the same segment, cached by their versions) and computes.
* :func:`persist_result` fences the completion on the claim attempt, stores the
  result with the version it was computed from and clears the dirty mark if no
  batch arrived since. When the window's data changed and other windows use it
  as their drift reference, those are marked for recomputation in the same
  transaction.
"""

from __future__ import annotations

import enum
import logging
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
from app.services.drift_reference import dependent_windows, reference_period
from app.services.model_config import ModelConfig
from app.services.window_compute import WindowResult, compute_window_result
from app.services.window_sums import WindowSums
from app.statuses import StoredStatus

log = logging.getLogger("priorwatch.worker")


@dataclass(frozen=True)
class ClaimedWindow:
    """A claimed window with everything its computation needs."""

    claim: Claim
    model: ModelConfig
    sums: WindowSums


class Outcome(enum.Enum):
    """What :func:`persist_result` did."""

    STORED = "stored"
    """The result is stored and the window is clean (no batch arrived meanwhile)."""
    STORED_STILL_DIRTY = "stored_still_dirty"
    """The result is stored; a batch arrived meanwhile, so the window stays dirty."""
    FENCED_OUT = "fenced_out"
    """Another worker claimed the window since: nothing was written."""


def claim_window(session: Session, *, lease_seconds: float) -> ClaimedWindow | None:
    """Claim the oldest dirty window (one transaction); None when none is waiting.

    On SQLite an idle poll only reads: the database write lock is taken only
    when a window is waiting, so an idle worker never makes writers wait.
    """
    if session.get_bind().dialect.name == "sqlite":
        waiting = queue.any_claimable(session)
        session.rollback()
        if not waiting:
            return None
    with write_transaction(session):
        found = queue.claim_next(session, lease_seconds=lease_seconds)
        if found is None:
            return None
        claim, row = found
        model_row = session.get(Model, claim.model_id)
        if model_row is None:  # the model was deleted: its rows cascade away
            return None
        claimed = ClaimedWindow(claim, ModelConfig.from_row(model_row), WindowSums.from_row(row))
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
    session: Session, claimed: ClaimedWindow, cache: ReferenceCache
) -> WindowResult:
    """Load the window's drift reference (read-only) and compute its result."""
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
    )


def _document(result: WindowResult) -> dict[str, Any]:
    return {
        "metrics": result.metrics,
        "reasons": result.reasons,
        "intervals": result.intervals,
        "drift": result.drift,
        "curves": result.curves,
        "estimate": result.estimate,
    }


def persist_result(
    session: Session, claimed: ClaimedWindow, result: WindowResult | None, error: str | None = None
) -> Outcome:
    """Store ``result`` (or ``error``) for the claimed window, fenced (one transaction).

    Parameters
    ----------
    result : WindowResult or None
        The computed result; None together with ``error`` when the computation
        failed (stored with status "error"; the window is not retried until
        its aggregate changes, since the computation is deterministic).
    """
    claim = claimed.claim
    with write_transaction(session):
        current = queue.fence(session, claim)
        if current is None:
            return Outcome.FENCED_OUT
        previous = queue.stored_version(session, claim)
        now = queue.database_now(session)
        if result is None:
            status, document = StoredStatus.ERROR, {"error": error or "computation failed"}
        else:
            status = StoredStatus.FRESH if current == claim.version else StoredStatus.STALE
            document = _document(result)
        queue.upsert_window_metrics(
            session, claim, status=status, computed_at=now, document=document
        )
        if previous is None or previous < claim.version:
            _invalidate_dependents(session, claimed, now)
    return Outcome.STORED if current == claim.version else Outcome.STORED_STILL_DIRTY


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


def refresh_claimed(session: Session, claimed: ClaimedWindow, cache: ReferenceCache) -> Outcome:
    """Compute and persist a claimed window; a failing computation is stored as an error."""
    try:
        result = compute_claimed(session, claimed, cache)
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
    return persist_result(session, claimed, result)


def release_claimed(session: Session, claimed: ClaimedWindow) -> bool:
    """Give the window back (graceful stop); False if the claim was already stale."""
    with write_transaction(session):
        return queue.release(session, claimed.claim)


def _is_database_error(exc: BaseException) -> bool:
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    return isinstance(exc, DBAPIError | SQLAlchemyError)
