"""Refresh waiting windows in groups: claim -> load -> compute -> persist (fenced).

Each step is its own short transaction, owned here; no transaction is open
while computing. The SQL is in :mod:`app.db.queue`; the computation in
:func:`app.services.windows.compute.compute_window_result`.

* :func:`claim_windows` claims up to ``group_size`` waiting windows (oldest
  change first) and reads their sums, their unfolded deltas and their
  models in the claim transaction; each window's sums plus exactly its
  deltas (:func:`app.services.windows.deltas.fold`) are what it is computed on. A
  delta that cannot be folded (:func:`app.services.windows.deltas.fold_rows`) is
  quarantined in that transaction (:func:`app.db.queue.quarantine_deltas`):
  the window is computed without it and its stored result says so in
  ``error``, and the other windows of the group are not held back.
* :func:`compute_or_error` loads a window's drift reference (the sum of the
  reference windows of the same segment, cached by their versions,
  :mod:`app.services.windows.reference_cache`) and
  computes (:func:`compute_claimed`): the full result when the window's
  detail is due, else the summary (:mod:`app.services.refresh.tiers`); a
  failing computation becomes an error to store.
* :func:`persist_group` stores the group in one transaction: per window
  still held (fenced on its claim attempt) it folds the claimed deltas into
  the aggregate (new version; the deltas deleted) and stores the result with
  that version (a summary keeps the stored detail:
  :mod:`app.services.refresh.document`). When a window's data changed and
  other windows use it as their drift reference, those are marked for
  recomputation in the same transaction.
* :func:`refresh_group` computes a claimed group window by window and
  persists it; asked to stop, it releases the windows not computed yet.
"""

from __future__ import annotations

import enum
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row
from sqlalchemy.orm import Session

from app.db import queue
from app.db.queue import Claim
from app.db.references import ReferenceRows
from app.db.session import write_transaction
from app.services.models.config import ModelConfig
from app.services.refresh.budget import DetailBudget
from app.services.refresh.document import KEPT_BY_SUMMARY, window_document
from app.services.refresh.tiers import detail_due, detail_phase, next_detail_due
from app.services.windows.compute import Tier, WindowResult, compute_window_result
from app.services.windows.deltas import Folded, aggregate_columns, exact_of, fold_rows
from app.services.windows.reference import baseline_period, dependent_windows
from app.services.windows.reference_cache import Period, ReferenceCache
from app.services.windows.sums import WindowSums
from app.statuses import StoredStatus
from app.timegrid import window_length

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
    """The row's detail due time at the claim (app/services/refresh/tiers.py)."""
    backlog: bool = True
    """The claim took a whole group, so more windows were waiting (False: the queue was
    short and the refresh is full, app/services/refresh/tiers.py)."""
    quarantined: tuple[queue.Quarantined, ...] = ()
    """Claimed deltas that could not be folded, quarantined by the claim."""

    @property
    def sums(self) -> WindowSums:
        return self.folded.sums


@dataclass(frozen=True)
class RefreshPolicy:
    """How a worker tiers its refreshes (:mod:`app.services.refresh.tiers`).

    Attributes
    ----------
    detail_interval_seconds : float
        Longest lag of an open window's detail tier behind its data (the worker
        setting; 0: every refresh is full).
    budget : DetailBudget or None
        The worker's budget (:mod:`app.services.refresh.budget`): due details are
        deferred while they took more than their share of its time, and each
        computation is accounted in it. None: no bound.
    """

    detail_interval_seconds: float = 0.0
    budget: DetailBudget | None = None


EVERY_REFRESH_FULL = RefreshPolicy()
"""No tiers: every refresh computes the detail too."""


class Outcome(enum.Enum):
    """What :func:`persist_group` did with one window."""

    STORED = "stored"
    """The result is stored and the window is clean (no batch arrived meanwhile)."""
    STORED_STILL_DIRTY = "stored_still_dirty"
    """The result is stored; deltas arrived meanwhile, so the window stays waiting."""
    FENCED_OUT = "fenced_out"
    """Another worker claimed the window since (or an invalidation fenced it out):
    nothing was written."""
    RELEASED = "released"
    """Not computed (the worker is stopping): the window was given back, waiting."""


MODEL_CACHE_MODELS = 1_024
"""Most models a worker's :class:`ModelCache` holds (about 80 MB at 10,000 bins)."""


class ModelCache:
    """The claimed windows' models, parsed once per version of their settings.

    A model's ``updated_at`` moves with every change of its settings (and the change
    fences out the claims of its windows, :func:`app.db.queue.invalidate_windows`);
    the claim returns it with each window, so a claim reads the model rows only of
    the models not cached at that version (one query), and a worker parses a
    model's settings once, not at every claim. The least recently claimed models
    are dropped past ``max_models`` (a model holds its bin edges: 80 KB at 10,000
    bins).
    """

    def __init__(self, max_models: int = MODEL_CACHE_MODELS) -> None:
        self.max_models = max_models
        self._models: OrderedDict[int, ModelConfig] = OrderedDict()

    def of(self, session: Session, versions: Mapping[int, datetime]) -> dict[int, ModelConfig]:
        """The models of ``versions`` (model id -> ``updated_at`` read by the claim)."""
        found = {i: m for i, m in self._cached(versions) if m.updated_at == versions[i]}
        stale = [i for i in versions if i not in found]
        for row in queue.claimed_models(session, stale) if stale else ():
            found[row.id] = self._models[row.id] = ModelConfig.from_row(row)
        while len(self._models) > self.max_models:
            self._models.popitem(last=False)
        return found

    def _cached(self, versions: Mapping[int, datetime]) -> Iterator[tuple[int, ModelConfig]]:
        for model_id in versions:
            model = self._models.get(model_id)
            if model is not None:
                self._models.move_to_end(model_id)
                yield model_id, model


def claim_windows(
    session: Session,
    *,
    lease_seconds: float,
    settle_seconds: float = 0.0,
    group_size: int = 1,
    models: ModelCache | None = None,
    references: ReferenceCache | None = None,
) -> list[ClaimedWindow]:
    """Claim up to ``group_size`` waiting windows; [] when none waits.

    The claim takes at most half of the claimable windows (at least one), so
    that concurrent workers share a short queue; the windows come in key order.
    A claim of fewer than ``group_size`` windows (the queue was short) marks
    them ``backlog=False``: their refreshes are full. ``models`` keeps the parsed
    models between claims (a worker's :class:`ModelCache`; None: read every time).
    With ``references``, the group's drift references are read with the deltas
    too (:meth:`ReferenceCache.read_ahead`), for :func:`refresh_group`.

    On PostgreSQL the claim, the reads of the deltas and the quarantine are one
    transaction. On SQLite an idle poll only reads: the database write lock is
    taken only when a window is waiting, and then for the claim's ``UPDATE``
    alone; the deltas are read and folded after its commit, in a read
    transaction, so that the writers of batches do not wait behind the reading
    and folding of hundreds of deltas (docs/worker.md, "SQLite"), and an unfoldable delta
    is quarantined in a write transaction of its own, only where the claim
    still holds (:func:`_quarantine_held`). Reading the deltas after the claim
    is as safe: the lease keeps every other claimer away, the fold deletes
    exactly the deltas it read or fails (:class:`app.db.queue.DoubleFold`), and
    only a claim still held at completion folds (app/db/queue.py).
    """
    sqlite = session.get_bind().dialect.name == "sqlite"
    if sqlite:
        waiting = queue.any_claimable(session, settle_seconds=settle_seconds)
        session.rollback()
        if not waiting:
            return []
    with write_transaction(session):
        claimed = queue.claim_group(
            session,
            lease_seconds=lease_seconds,
            settle_seconds=settle_seconds,
            group_size=group_size,
        )
        if not claimed:
            return []
        if not sqlite:
            group = _read_claimed(session, claimed, group_size, models, references)
            queue.quarantine_deltas(session, _quarantined(group), group[0].claim.claimed_at)
            return group
    try:
        group = _read_claimed(session, claimed, group_size, models, references)
    finally:
        session.rollback()  # end the read transaction
    _quarantine_held(session, group)
    return group


def _read_claimed(
    session: Session,
    claimed: list[tuple[Claim, Row[Any]]],
    group_size: int,
    models: ModelCache | None,
    references: ReferenceCache | None,
) -> list[ClaimedWindow]:
    """The claimed windows with their models and their deltas folded (the
    unfoldable ones set aside); the group's drift references read ahead."""
    versions = {claim.model_id: row.model_at for claim, row in claimed}
    configs = (models or ModelCache()).of(session, versions)
    deltas = queue.claimed_deltas(session, [claim for claim, _ in claimed])
    backlog = len(claimed) >= group_size
    group = [
        _claimed_window(claim, row, configs[claim.model_id], deltas[claim.key], backlog)
        for claim, row in claimed
    ]
    if references is not None:
        references.read_ahead(ReferenceRows(session), (_reference_of(c) for c in group))
    return group


def _quarantined(group: Sequence[ClaimedWindow]) -> list[queue.Quarantined]:
    """The group's unfoldable deltas, each logged at ERROR."""
    quarantined = []
    for window in group:
        for q in window.quarantined:
            log.error(
                "window %s/%s/%s: delta of batch %s quarantined, not folded: %s",
                window.model.name,
                q.key[1],
                q.key[2].isoformat(),
                q.batch_id,
                q.reason,
            )
            quarantined.append(q)
    return quarantined


def _quarantine_held(session: Session, group: Sequence[ClaimedWindow]) -> None:
    """Quarantine the group's unfoldable deltas after the claim committed (SQLite):
    in a write transaction of their own, those of the windows whose claim still holds
    (:func:`app.db.queue.lock_claimed`); a window fenced out meanwhile is left to its
    new claimant, and its completion here writes nothing."""
    quarantined = _quarantined(group)
    if not quarantined:
        return
    with write_transaction(session):
        held = queue.lock_claimed(session, [w.claim for w in group if w.quarantined]).held
        queue.quarantine_deltas(
            session, [q for q in quarantined if q.key in held], group[0].claim.claimed_at
        )


def _claimed_window(
    claim: Claim, row: Row[Any], model: ModelConfig, rows: list[Row[Any]], backlog: bool
) -> ClaimedWindow:
    base = WindowSums.from_row(row)
    done = fold_rows(
        base,
        exact_of(base, row.exact_sums),
        rows,
        model.n_bins,
        stored_unlabelled=row.n_unlabelled,
    )
    quarantined = tuple(
        queue.Quarantined(
            claim.key, d.batch_id, d.received_at, int(d.n), int(d.n_unlabelled), reason
        )
        for d, reason in done.unfoldable
    )
    batch_ids = tuple(d.batch_id for d in done.deltas)
    return ClaimedWindow(
        claim, model, done.folded, batch_ids, row.detail_due_at, backlog, quarantined
    )


def compute_claimed(
    session: Session,
    claimed: ClaimedWindow,
    cache: ReferenceCache,
    policy: RefreshPolicy = EVERY_REFRESH_FULL,
) -> WindowResult:
    """Load the window's drift reference (read-only) and compute its result: full when
    its detail is due (:func:`app.services.refresh.tiers.detail_due`, with room in the
    ``policy``'s budget, if any), else the summary."""
    claim, model = claimed.claim, claimed.model
    period = baseline_period(model, claim.window_start)
    reference = None
    try:
        if period is not None and not period.contains_window:
            reference = cache.get(
                ReferenceRows(session), model, claim.segment, period.start, period.end
            )
    finally:
        session.rollback()  # end the read transaction before computing
    due = detail_due(
        now=claim.claimed_at,
        window_end=_window_end(claimed),
        detail_due_at=claimed.detail_due_at,
        detail_interval_seconds=policy.detail_interval_seconds,
        backlog=claimed.backlog,
        budget_allows=policy.budget is None or policy.budget.allows(),
    )
    return compute_window_result(
        model,
        claimed.sums,
        reference,
        in_baseline_period=period is not None and period.contains_window,
        tier=Tier.FULL if due else Tier.SUMMARY,
    )


def _reference_of(claimed: ClaimedWindow) -> Period | None:
    """The window's drift reference period, None when it has none to read."""
    period = baseline_period(claimed.model, claimed.claim.window_start)
    if period is None or period.contains_window:
        return None
    return (claimed.model.id, claimed.claim.segment, period.start, period.end)


def _window_end(claimed: ClaimedWindow) -> datetime:
    return claimed.claim.window_start + window_length(claimed.model.window)


@dataclass(frozen=True)
class Computed:
    """A claimed window with its result, or (``result`` None) the error its
    computation raised, stored with status "error".

    ``detail_due_at`` is the window's next detail due time: set after a summary
    result, None after a full result or an error.
    """

    claimed: ClaimedWindow
    result: WindowResult | None
    error: str | None = None
    detail_due_at: datetime | None = None


def compute_or_error(
    session: Session,
    claimed: ClaimedWindow,
    cache: ReferenceCache,
    policy: RefreshPolicy = EVERY_REFRESH_FULL,
) -> Computed:
    """Compute a claimed window; a failing computation is returned as an error.

    The ``policy`` says when the detail tier is computed (:class:`RefreshPolicy`).
    A database error propagates (infrastructure, not the window: the loop
    backs off). Any other error is logged and kept: the computation is
    deterministic, so the window is stored as an error and not retried until
    its aggregate changes.
    """
    started = time.perf_counter()
    try:
        result = compute_claimed(session, claimed, cache, policy)
    except Exception as exc:
        if _is_database_error(exc):
            raise
        log.exception(
            "window %s/%s/%s failed",
            claimed.model.name,
            claimed.claim.segment,
            claimed.claim.window_start.isoformat(),
        )
        return Computed(claimed, None, f"{type(exc).__name__}: {exc}")
    if policy.budget is not None:
        policy.budget.record(time.perf_counter() - started, result.tier)
    if result.tier is Tier.FULL:
        return Computed(claimed, result)
    due = next_detail_due(
        now=claimed.claim.claimed_at,
        window_end=_window_end(claimed),
        detail_due_at=claimed.detail_due_at,
        detail_interval_seconds=policy.detail_interval_seconds,
        phase=detail_phase(*claimed.claim.key),
    )
    return Computed(claimed, result, detail_due_at=due)


def quarantine_note(quarantined: Sequence[queue.Quarantined]) -> str | None:
    """What a window's ``error`` says of the deltas its refresh quarantined (None: none).

    >>> from datetime import UTC
    >>> at = datetime(2026, 1, 1, tzinfo=UTC)
    >>> q = queue.Quarantined((1, "*", at), uuid.UUID(int=7), at, 3, 0, "OverflowError: x")
    >>> print(quarantine_note([q]))
    1 delta quarantined, not counted (batch 00000000-0000-0000-0000-000000000007: OverflowError: x)
    """
    if not quarantined:
        return None
    plural = "s" if len(quarantined) > 1 else ""
    listed = "; ".join(f"batch {q.batch_id}: {q.reason}" for q in quarantined)
    return f"{len(quarantined)} delta{plural} quarantined, not counted ({listed})"


def _stored_result(computed: Computed, version: int, now: datetime) -> queue.StoredResult:
    """What ``window_metrics`` stores for a computed window (aggregate ``version``)."""
    claim, result = computed.claimed.claim, computed.result
    notes = (quarantine_note(computed.claimed.quarantined), claim.stored_note)
    note = "; ".join(n for n in notes if n) or None  # what was ever left out stays said
    if result is None:
        failed = computed.error or "computation failed"
        error = {"error": failed if note is None else f"{failed}; {note}"}
        return queue.StoredResult(claim, version, StoredStatus.ERROR, error)
    full = result.tier is Tier.FULL
    stored = None if full else claim.stored_intervals
    stored_maturity = None if full else claim.stored_maturity
    document = window_document(result, stored, stored_maturity, version=version, computed_at=now)
    keep = () if full else KEPT_BY_SUMMARY
    return queue.StoredResult(claim, version, StoredStatus.FRESH, document | {"error": note}, keep)


def _changes_data(claimed: ClaimedWindow) -> bool:
    """Whether storing this window gives it a result of a newer aggregate version
    (its drift dependents must then be recomputed)."""
    stored = claimed.claim.stored_version
    return bool(claimed.batch_ids) or stored is None or stored < claimed.claim.version


def _dependents(claimed: ClaimedWindow) -> queue.KeyRange | None:
    """The windows that use this one as (part of) their drift reference."""
    dependents = dependent_windows(claimed.model, claimed.claim.window_start)
    if dependents is None:
        return None
    return queue.KeyRange(
        claimed.claim.model_id,
        claimed.claim.segment,
        dependents.start_from,
        dependents.start_to,
        dependents.exclude,
    )


def persist_group(
    session: Session, computed: Sequence[Computed], released: Sequence[ClaimedWindow] = ()
) -> list[Outcome]:
    """Store the ``computed`` windows and give the ``released`` ones back (one transaction).

    Each window is fenced on its own claim: one whose claim was lost is left
    alone (FENCED_OUT) and does not affect the others. Any exception (a
    database error, :class:`app.db.queue.DoubleFold`) rolls the whole group
    back: nothing is half-stored and every claimed delta stays for the next
    claim.

    Returns
    -------
    list of Outcome
        One per window: the computed ones in order, then the released ones
        (RELEASED).
    """
    reach = [(c.claimed, _dependents(c.claimed)) for c in computed if _changes_data(c.claimed)]
    marked = [(claimed, r) for claimed, r in reach if r is not None]
    completions = {
        c.claimed.claim.key: queue.Completion(
            c.claimed.claim,
            aggregate_columns(c.claimed.folded, c.claimed.model.thresholds)
            if c.claimed.batch_ids
            else None,
            c.claimed.batch_ids,
            detail_due_at=c.detail_due_at,
        )
        for c in computed
    }
    completions |= {r.claim.key: queue.Completion(r.claim, release=True) for r in released}
    with write_transaction(session):
        held, now, dependents = queue.lock_claimed(
            session, [c.claim for c in completions.values()], [r for _, r in marked]
        )
        queue.complete(session, [c for key, c in completions.items() if key in held])
        stored = [c for c in computed if c.claimed.claim.key in held]
        queue.upsert_window_metrics(
            session,
            [
                _stored_result(
                    c, held[c.claimed.claim.key].version + (1 if c.claimed.batch_ids else 0), now
                )
                for c in stored
            ],
            computed_at=now,
        )
        changed = [(claimed, r) for claimed, r in marked if claimed.claim.key in held]
        # no dependent row locked (the usual case of the latest window): no statement
        count = queue.mark_dependents(session, [r for _, r in changed], now) if dependents else 0
    if count:
        log.info(
            "drift reference windows changed (%s): %d dependent windows marked",
            ", ".join(f"{c.model.name}/{c.claim.segment}" for c, _ in changed),
            count,
        )
    return [_outcome(c.claimed, held) for c in computed] + [Outcome.RELEASED] * len(released)


def _outcome(claimed: ClaimedWindow, held: Mapping[queue.AggregateKey, queue.Held]) -> Outcome:
    found = held.get(claimed.claim.key)
    if found is None:
        return Outcome.FENCED_OUT
    if found.deltas > len(claimed.batch_ids):
        return Outcome.STORED_STILL_DIRTY
    return Outcome.STORED


def refresh_group(
    session: Session,
    group: Sequence[ClaimedWindow],
    cache: ReferenceCache,
    should_stop: Callable[[], bool] = lambda: False,
    policy: RefreshPolicy = EVERY_REFRESH_FULL,
) -> list[Outcome]:
    """Compute a claimed group window by window (no transaction open), then persist
    it in one transaction (:func:`persist_group`).

    Once ``should_stop()`` is true (checked before each window), the windows
    not computed yet are released in that transaction and the computed ones
    are stored. The ``policy`` says when the detail tier is computed.
    """
    computed: list[Computed] = []
    with cache.versions_read(ReferenceRows(session), (_reference_of(c) for c in group)):
        for claimed in group:
            if should_stop():
                break
            computed.append(compute_or_error(session, claimed, cache, policy))
    return persist_group(session, computed, group[len(computed) :])


def _is_database_error(exc: BaseException) -> bool:
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    return isinstance(exc, DBAPIError | SQLAlchemyError)
