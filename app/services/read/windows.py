"""Read windows: stored results, and merged windows computed on the fly (re-windowing).

A window is identified by (model, segment, start). The API shows the
all-traffic window (stored under the segment key ``"*"``) as ``segment: null``.

* **Stored windows** (the model's own window length): the counts of the
  aggregate plus its unfolded deltas, and the worker's last result. The
  window is ``"fresh"`` when that result was computed from the aggregate's
  current version, no delta waits to be folded and nothing has marked the
  window for recomputation since (:func:`is_fresh`); otherwise it is
  ``"pending"`` and carries the last result, if any, computed from an older
  version (``aggregate_version`` says which).
* **Merged windows** (``granularity`` a longer window length, e.g. ``"1d"``
  over a ``"1h"`` model): the stored aggregates of each longer window, each
  with its unfolded deltas folded in (:func:`app.services.windows.deltas.fold`), are
  summed exactly (:meth:`WindowSums.merge`) and computed now with
  :func:`compute_window_result`, against the same drift reference the worker
  would use. They are always ``"fresh"`` (computed from the current sums).

Queries here only read; the caller's session is left with at most an open
read transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Subquery, and_, func, or_, select
from sqlalchemy.orm import Session

from app.db import queries
from app.db.models import ALL_SEGMENTS, BatchDelta, WindowAggregate, WindowMetrics
from app.errors import InvalidInput
from app.services.models.config import ModelConfig
from app.services.windows.compute import compute_window_result
from app.services.windows.deltas import exact_of, fold_rows
from app.services.windows.limits import CountOverflow
from app.services.windows.reference import reference_period
from app.services.windows.reference_cache import ReferenceCache
from app.services.windows.sums import WindowSums
from app.statuses import StoredStatus, WindowState
from app.timegrid import (
    WindowRange,
    check_granularity,
    check_window_start,
    resolve_range,
    window_length,
    window_start,
)

MAX_STORED_WINDOWS = 5_000
"""Longest range of stored windows one request may span (in model windows)."""
MAX_MERGED_WINDOWS = 200
"""Most merged windows one request may span (each is computed on the fly)."""
MAX_MERGED_SOURCE_WINDOWS = 2_000
"""Most stored windows one re-windowing request may read (each holds two histograms)."""

WA = WindowAggregate
WM = WindowMetrics


# --- names, ranges, granularity ----------------------------------------------


def segment_key(model: ModelConfig, segment: str | None) -> str:
    """The stored segment key of the API's ``segment`` (None: all traffic).

    Raises
    ------
    InvalidInput
        ``segment`` is not one of the model's registered segments.
    """
    if segment is None:
        return ALL_SEGMENTS
    if segment not in model.segments:
        registered = ", ".join(sorted(model.segments)) or "none"
        raise InvalidInput(
            "segment", f"{segment!r} is not a registered segment of {model.name!r} ({registered})"
        )
    return segment


def segment_name(key: str) -> str | None:
    """The API's ``segment`` for a stored segment key (None for all traffic)."""
    return None if key == ALL_SEGMENTS else key


# --- the view ----------------------------------------------------------------


DETAIL_PENDING = "the detail tier (curves, intervals) is not computed yet: it follows the summary"
"""``reasons["detail"]`` (and ``["curves"]``) of a window whose summary alone is computed."""
NO_LABELLED_DETAIL = "the window has no labelled rows: no curves or intervals"
"""``reasons["detail"]`` (and ``["curves"]``) of a window of unlabelled rows only."""
NO_SCORE_HISTOGRAMS = "the window holds confusion-matrix rows only: no score histograms"
"""``reasons["curves"]`` of a labelled window without per-class histograms."""


@dataclass(frozen=True)
class WindowView:
    """One window as the API shows it.

    Attributes
    ----------
    start, end : datetime
        The half-open window [start, end), UTC.
    segment : str or None
        The registered segment, or None for the all-traffic window.
    granularity : str
        The window length (the model's, or the re-windowing granularity).
    n, positives : int
        Labelled examples in the window and actual positives among them
        (current sums).
    status : str
        ``"fresh"`` or ``"pending"`` (module docstring).
    metrics : dict of str to float or None
        Names as in ``evaluate``; empty when nothing was computed yet.
    reasons : dict of str to str
        Why each None metric is None (``"insufficient_data"`` or the formula's case).
    intervals : dict of str to dict
        ``{"lower", "upper", "level"}`` of the prior-invariant metrics.
    drift : dict or None
        ``{"verdict", "prior", "likelihood", "attribution", ...}``.
    curves : dict or None
        ROC, PR, calibrated PR and OPRC points (single-window view only).
    computed_at : datetime or None
        When the result was computed.
    aggregate_version : int or None
        The aggregate version the result was computed from (stored windows).
    merged_windows : int
        Stored windows summed into this one (1 for a stored window).
    error : str or None
        Why the last computation failed (stored status "error").
    n_unlabelled : int
        Rows without labels (current sums).
    estimate : dict or None
        The label-free estimate from the unlabelled rows (docs/estimation.md);
        None without unlabelled rows or without a drift reference.
    maturity : dict or None
        The completed window of a partially labelled window (docs/maturity.md);
        None, with ``reasons["maturity"]`` saying why, otherwise.
    detail_version, detail_computed_at : int or None, datetime or None
        The stamp of the detail tier (curves and intervals): the aggregate
        version it was computed from and when. Older than
        ``aggregate_version`` after a summary refresh; None while a window
        has no detail yet. A merged window's detail is computed with it
        (``detail_computed_at`` = ``computed_at``, no version).
    """

    start: datetime
    end: datetime
    segment: str | None
    granularity: str
    n: int
    positives: int
    status: str
    metrics: dict[str, float | None] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    intervals: dict[str, Any] = field(default_factory=dict)
    drift: dict[str, Any] | None = None
    curves: dict[str, Any] | None = None
    computed_at: datetime | None = None
    aggregate_version: int | None = None
    merged_windows: int = 1
    error: str | None = None
    n_unlabelled: int = 0
    estimate: dict[str, Any] | None = None
    maturity: dict[str, Any] | None = None
    detail_version: int | None = None
    detail_computed_at: datetime | None = None

    @property
    def prior(self) -> float | None:
        """pi = P / n of the window (None when empty)."""
        return self.positives / self.n if self.n > 0 else None

    @property
    def detail_current(self) -> bool:
        """The detail tier was computed from the same aggregate version as the metrics
        (always, for a merged window: both are computed now)."""
        return self.detail_computed_at is not None and self.detail_version == self.aggregate_version

    def detail(self) -> dict[str, Any] | None:
        """The detail stamp as the API shows it, or None (no detail yet)."""
        if self.detail_computed_at is None:
            return None
        return {
            "aggregate_version": self.detail_version,
            "computed_at": iso(self.detail_computed_at),
            "current": self.detail_current,
        }

    def reasons_shown(self, *, with_curves: bool) -> dict[str, str]:
        """:attr:`reasons` plus why a document shown as null is null: ``detail`` (and
        ``curves`` in the single-window view) of a computed window."""
        reasons = dict(self.reasons)
        if self.computed_at is None:  # pending: ``status`` says why
            return reasons
        why = NO_LABELLED_DETAIL if self.n <= 0 else DETAIL_PENDING
        if self.detail_computed_at is None:
            reasons["detail"] = why
        if with_curves and self.curves is None:
            computed = self.detail_computed_at is not None and self.n > 0
            reasons["curves"] = NO_SCORE_HISTOGRAMS if computed else why
        return reasons

    def to_dict(self, *, with_curves: bool = False) -> dict[str, Any]:
        """The contract's JSON shape (datetimes as ISO 8601 UTC strings)."""
        out: dict[str, Any] = {
            "start": iso(self.start),
            "end": iso(self.end),
            "segment": self.segment,
            "granularity": self.granularity,
            "n": self.n,
            "positives": self.positives,
            "prior": self.prior,
            "status": self.status,
            "metrics": self.metrics,
            "reasons": self.reasons_shown(with_curves=with_curves),
            "intervals": self.intervals,
            "drift": self.drift,
            "computed_at": None if self.computed_at is None else iso(self.computed_at),
            "aggregate_version": self.aggregate_version,
            "merged_windows": self.merged_windows,
            "n_unlabelled": self.n_unlabelled,
            "estimate": self.estimate,
            "maturity": self.maturity,
            "detail": self.detail(),
        }
        if self.error is not None:
            out["error"] = self.error
        if with_curves:
            out["curves"] = self.curves
        return out


def iso(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z`` suffix, as the rest of the API writes times."""
    return moment.isoformat().replace("+00:00", "Z")


def is_fresh(
    status: str | None, computed_version: int | None, version: int, dirty: bool, unfolded: int
) -> bool:
    """True when a stored result is the current one of its window.

    It must have been stored as ``"fresh"``, from the aggregate's current
    ``version``, no delta (``unfolded``) may wait to be folded, and the window
    must not be marked for recomputation (a reference or settings change
    marks it dirty without a new version).
    """
    return (
        status == StoredStatus.FRESH and computed_version == version and not dirty and unfolded == 0
    )


# --- stored windows ------------------------------------------------------------


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


def _stored_select(model: ModelConfig, key: str, *, with_curves: bool) -> Any:
    unfolded = queries.unfolded_totals(model.id, key)
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
            WA.model_id == model.id,
            WA.segment == key,
            or_(_has_rows(), unfolded.c.deltas.is_not(None)),
        )
    )


def _has_rows() -> Any:
    """The aggregate holds rows, labelled or not."""
    return (WA.n > 0) | (WA.n_unlabelled > 0)


def _stored_view(model: ModelConfig, key: str, row: Any, *, with_curves: bool) -> WindowView:
    has_result = row.status is not None
    fresh = is_fresh(row.status, row.aggregate_version, row.version, row.dirty, row.unfolded)
    start: datetime = row.window_start
    return WindowView(
        start=start,
        end=start + window_length(model.window),
        segment=segment_name(key),
        granularity=model.window,
        n=int(row.n),
        positives=int(row.positives),
        status=WindowState.FRESH if fresh else WindowState.PENDING,
        metrics=dict(row.metrics or {}) if has_result else {},
        reasons=dict(row.reasons or {}) if has_result else {},
        intervals=dict(row.intervals or {}) if has_result else {},
        drift=row.drift if has_result else None,
        curves=row.curves if with_curves and has_result else None,
        computed_at=row.computed_at,
        aggregate_version=None if row.aggregate_version is None else int(row.aggregate_version),
        error=row.error,
        n_unlabelled=int(row.n_unlabelled),
        estimate=row.estimate if has_result else None,
        maturity=row.maturity if has_result else None,
        detail_version=None if row.detail_version is None else int(row.detail_version),
        detail_computed_at=row.detail_computed_at,
    )


def stored_windows(
    session: Session, model: ModelConfig, key: str, window_range: WindowRange
) -> list[WindowView]:
    """The stored windows of one segment key whose start is in the range, oldest first."""
    rows = session.execute(
        _stored_select(model, key, with_curves=False)
        .where(WA.window_start >= window_range.start, WA.window_start < window_range.end)
        .order_by(WA.window_start)
    ).all()
    return [_stored_view(model, key, row, with_curves=False) for row in rows]


def stored_window(
    session: Session, model: ModelConfig, key: str, start: datetime
) -> WindowView | None:
    """One stored window in full (curves included), or None when it holds no data."""
    row = session.execute(
        _stored_select(model, key, with_curves=True).where(WA.window_start == start)
    ).one_or_none()
    return None if row is None else _stored_view(model, key, row, with_curves=True)


# --- merged windows (re-windowing) --------------------------------------------


def _merge_groups(
    session: Session, model: ModelConfig, key: str, window_range: WindowRange
) -> list[tuple[datetime, list[datetime]]]:
    """(merged start, stored starts) of every merged window with data, oldest first."""
    unfolded = queries.unfolded_totals(model.id, key)
    starts = session.scalars(
        select(WA.window_start)
        .outerjoin(unfolded, unfolded.c.window_start == WA.window_start)
        .where(
            WA.model_id == model.id,
            WA.segment == key,
            or_(_has_rows(), unfolded.c.deltas.is_not(None)),
            WA.window_start >= window_range.start,
            WA.window_start < window_range.end,
        )
        .order_by(WA.window_start)
    ).all()
    if len(starts) > MAX_MERGED_SOURCE_WINDOWS:
        raise InvalidInput(
            "from",
            f"the range holds {len(starts)} stored windows; re-windowing reads at most "
            f"{MAX_MERGED_SOURCE_WINDOWS} per request (narrow from/to)",
        )
    groups: dict[datetime, list[datetime]] = {}
    for s in starts:
        groups.setdefault(window_start(s, window_range.granularity), []).append(s)
    return list(groups.items())


def _with_deltas(row: WindowAggregate, deltas: list[BatchDelta], model: ModelConfig) -> WindowSums:
    """A stored window's sums with its unfolded deltas folded in, as the worker will:
    without those it cannot fold, which it will quarantine."""
    base = WindowSums.from_row(row)
    if not deltas:
        return base
    return fold_rows(base, exact_of(base, row.exact_sums), deltas, model.n_bins).folded.sums


def _merged_view(
    session: Session,
    model: ModelConfig,
    key: str,
    start: datetime,
    sources: Sequence[datetime],
    granularity: str,
    cache: ReferenceCache,
    now: datetime,
    *,
    with_curves: bool,
) -> WindowView | None:
    rows = session.scalars(
        select(WA).where(WA.model_id == model.id, WA.segment == key, WA.window_start.in_(sources))
    ).all()
    deltas: dict[datetime, list[BatchDelta]] = {}
    for d in queries.unfolded_deltas(session, model.id, key, sources):
        deltas.setdefault(d.window_start, []).append(d)
    try:
        parts = [_with_deltas(r, deltas.get(r.window_start, []), model) for r in rows]
        sums = WindowSums.merge(parts)
        if sums is None or (sums.n <= 0 and sums.n_unlabelled <= 0):
            return None
        end = start + window_length(granularity)
        period = reference_period(model, start, end)
        reference = None
        if period is not None and not period.contains_window:
            reference = cache.get(session, model, key, period.start, period.end)
    except CountOverflow as exc:
        raise InvalidInput("granularity", f"{exc}; use a finer granularity") from None
    result = compute_window_result(
        model,
        sums,
        reference,
        in_reference_period=period is not None and period.contains_window,
        parts=parts,
    )
    return WindowView(
        start=start,
        end=end,
        segment=segment_name(key),
        granularity=granularity,
        n=sums.n,
        positives=sums.positives,
        status=WindowState.FRESH,
        metrics=result.metrics,
        reasons=result.reasons,
        intervals=result.intervals,
        drift=result.drift,
        curves=result.curves if with_curves else None,
        computed_at=now,
        merged_windows=len(rows),
        n_unlabelled=sums.n_unlabelled,
        estimate=result.estimate,
        maturity=result.maturity,
        detail_computed_at=now,
    )


def merged_windows(
    session: Session, model: ModelConfig, key: str, window_range: WindowRange, now: datetime
) -> list[WindowView]:
    """Windows of ``window_range.granularity`` summed from the stored ones and computed now."""
    cache = ReferenceCache()
    views = []
    for start, sources in _merge_groups(session, model, key, window_range):
        view = _merged_view(
            session,
            model,
            key,
            start,
            sources,
            window_range.granularity,
            cache,
            now,
            with_curves=False,
        )
        if view is not None:
            views.append(view)
    return views


# --- entry points ------------------------------------------------------------------


def list_windows(
    session: Session,
    model: ModelConfig,
    *,
    segment: str | None,
    start_from: datetime | None,
    to: datetime | None,
    granularity: str | None,
    now: datetime,
) -> list[WindowView]:
    """The windows of one segment (None: all traffic) starting in [from, to), oldest first.

    Parameters
    ----------
    segment : str or None
        A registered segment, or None for the all-traffic windows.
    start_from, to : datetime or None
        The range of window starts (see :func:`app.timegrid.resolve_range`).
    granularity : str or None
        None or the model's window: the stored windows. A longer window length:
        merged windows computed now (at most :data:`MAX_MERGED_WINDOWS`).
    now : datetime
        The current time (default ``to``; ``computed_at`` of merged windows).

    Raises
    ------
    InvalidInput
        Unregistered segment, bad granularity, bad or too long range.
    """
    key = segment_key(model, segment)
    granularity = check_granularity(model.window, granularity)
    if granularity == model.window:
        window_range = resolve_range(
            granularity, start_from, to, now=now, max_windows=MAX_STORED_WINDOWS
        )
        return stored_windows(session, model, key, window_range)
    window_range = resolve_range(
        granularity, start_from, to, now=now, max_windows=MAX_MERGED_WINDOWS
    )
    return merged_windows(session, model, key, window_range, now)


def get_window(
    session: Session,
    model: ModelConfig,
    start: datetime,
    *,
    segment: str | None,
    granularity: str | None,
    now: datetime,
) -> WindowView | None:
    """One window in full, curves included; None when it holds no data.

    ``start`` must be the start of a window of the granularity (the model's
    window by default); a longer granularity merges and computes it now.
    """
    key = segment_key(model, segment)
    granularity = check_granularity(model.window, granularity)
    start = check_window_start(start, granularity)
    if granularity == model.window:
        return stored_window(session, model, key, start)
    window_range = WindowRange(start, start + window_length(granularity), granularity)
    groups = _merge_groups(session, model, key, window_range)
    if not groups:
        return None
    ((merged_start, sources),) = groups
    return _merged_view(
        session,
        model,
        key,
        merged_start,
        sources,
        granularity,
        ReferenceCache(),
        now,
        with_curves=True,
    )
