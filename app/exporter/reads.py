"""What a scrape reads: the models, the latest fresh window of each segment, the queue.

Every value comes from rows the worker and the ingestion wrote; nothing here
computes a metric. One scrape runs a fixed number of statements, whatever
the number of models and segments:

1. the models with their accepted batch and row counts (:func:`read_models`:
   the counters folded into the model's all-traffic window aggregates plus
   its unfolded and quarantined all-traffic deltas), their batches not
   folded yet and their quarantined deltas; one statement whose cost grows
   with the windows and the unfolded deltas, not with the batches folded;
2. the latest window with a fresh result per (model, segment): its key,
   ``computed_at`` and aggregate version (:func:`read_latest_keys`);
3. the stored metrics, intervals and drift verdict of those windows
   (:func:`read_latest_windows`);
4. the queue depth and the age of its oldest dirty mark
   (:func:`app.db.queue.queue_stats`).

"Latest fresh window": per (model, segment), the latest window with labelled
rows whose stored result has status ``"fresh"`` (it was computed from the version of the
aggregate that was current when it was written). A batch arriving since
does not hide it until the worker has refreshed the window, so the gauges do
not flip back to an older window between a batch and its recomputation.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import (
    ColumnElement,
    Float,
    Select,
    Text,
    and_,
    case,
    cast,
    func,
    literal,
    select,
    true,
    tuple_,
    union_all,
)
from sqlalchemy.orm import Session

from app.db.models import (
    ALL_SEGMENTS,
    BatchDelta,
    Model,
    QuarantinedDelta,
    WindowAggregate,
    WindowMetrics,
)
from app.db.queue import QueueStats, queue_stats
from app.sla.objectives import Objective
from app.statuses import StoredStatus

log = logging.getLogger("priorwatch.exporter")

WA = WindowAggregate
WM = WindowMetrics

Shard = tuple[int, int]
"""(index, count) of a scrape shard, ``0 <= index < count``: the models with
``id % count == index``, as kube-state-metrics shards its objects."""

KEYS_PER_QUERY = 500
"""Most windows fetched by one statement of :func:`read_latest_windows` (bound-parameter limits)."""


@dataclass(frozen=True)
class ModelRow:
    """A registered model as the exporter needs it."""

    id: int
    name: str
    window: str
    segments: frozenset[str]
    objectives: tuple[Objective, ...]
    batches: int
    rows: int
    unfolded: int = 0
    """Batches not folded yet (its unfolded all-traffic deltas)."""
    quarantined: int = 0
    """Deltas of the model (any segment) the worker quarantined."""
    label_missingness: str = "none"
    """How the model's labels arrive (``class``, ``score``; ``none``: no completion)."""
    label_horizon: str | None = None
    """When a window's labels are expected complete ("90d"), or None."""


@dataclass(frozen=True)
class WindowKey:
    """A stored result: its window, when it was computed, and the aggregate's version.

    Any change of what the exporter shows for the window changes this key.
    """

    model_id: int
    segment: str
    start: datetime
    computed_at: datetime
    version: int


@dataclass(frozen=True)
class LatestWindow:
    """The latest window with a fresh result of one (model, segment key)."""

    key: WindowKey
    n: int
    positives: int
    metrics: Mapping[str, Any]
    intervals: Mapping[str, Any]
    reasons: Mapping[str, str]
    drift: Mapping[str, Any] | None
    detail_current: bool = True
    """The detail tier's intervals are of the same version as the metrics (the SLA
    judges the others by their point value: app/sla/objectives.py)."""


@dataclass(frozen=True)
class Snapshot:
    """Everything one scrape exposes."""

    models: tuple[ModelRow, ...]
    windows: tuple[LatestWindow, ...]
    queue: QueueStats


def _objectives(
    model_id: int, name: str, documents: Iterable[Mapping[str, Any]]
) -> tuple[Objective, ...]:
    out: list[Objective] = []
    for doc in documents:
        try:
            objective = Objective.from_document(doc)
        except (KeyError, TypeError, ValueError):
            log.warning("model %s (%d): skipping malformed SLA objective %r", name, model_id, doc)
            continue
        if objective.id in {o.id for o in out}:  # stored before ids had to be unique
            unique = f"{objective.id}-{len(out) + 1}"
            log.warning("model %s (%d): SLA objective id %r repeats: exported as %r",
                        name, model_id, objective.id, unique)  # fmt: skip
            objective = replace(objective, id=unique)
        out.append(objective)
    return tuple(out)


def _of_shard(model_id: Any, shard: Shard | None) -> ColumnElement[bool]:
    """The condition that ``model_id`` is in ``shard`` (always true when None)."""
    return true() if shard is None else model_id % shard[1] == shard[0]


def read_models(session: Session, shard: Shard | None = None) -> tuple[ModelRow, ...]:
    """Every model (of ``shard``) with its accepted batches and rows, labelled or not,
    its batches not folded yet and its quarantined deltas (one statement).

    Each batch counts once in its window's all-traffic aggregate: as an
    unfolded delta until the worker folds it, then in the aggregate's
    ``batches``, ``n`` and ``n_unlabelled`` (the fold moves it from one to the
    other in one transaction, so a reading never counts it twice or misses it),
    or, if the worker could not fold it, as a quarantined delta (accepted all
    the same: the counters never go down).
    """
    quarantined = QuarantinedDelta
    counted = quarantined.segment == ALL_SEGMENTS
    parts = union_all(
        select(
            WA.model_id.label("model_id"),
            WA.batches.label("batches"),
            (WA.n + WA.n_unlabelled).label("rows"),
            literal(0).label("unfolded"),
            literal(0).label("quarantined"),
        ).where(WA.segment == ALL_SEGMENTS),
        select(
            BatchDelta.model_id.label("model_id"),
            literal(1).label("batches"),
            (BatchDelta.n + BatchDelta.n_unlabelled).label("rows"),
            literal(1).label("unfolded"),
            literal(0).label("quarantined"),
        ).where(BatchDelta.segment == ALL_SEGMENTS),
        select(
            quarantined.model_id.label("model_id"),
            case((counted, 1), else_=0).label("batches"),
            case((counted, quarantined.n + quarantined.n_unlabelled), else_=0).label("rows"),
            literal(0).label("unfolded"),
            literal(1).label("quarantined"),
        ),
    ).subquery()
    counts = (
        select(
            parts.c.model_id,
            func.sum(parts.c.batches).label("batches"),
            # a float sum: an integer SUM raises on SQLite past 2^63 (legacy totals)
            func.sum(cast(parts.c.rows, Float)).label("rows"),
            func.sum(parts.c.unfolded).label("unfolded"),
            func.sum(parts.c.quarantined).label("quarantined"),
        )
        .group_by(parts.c.model_id)
        .subquery()
    )
    result = session.execute(
        select(
            Model.id,
            Model.name,
            Model.window,
            Model.segments,
            Model.sla,
            Model.label_missingness,
            Model.label_horizon,
            func.coalesce(counts.c.batches, 0),
            func.coalesce(counts.c.rows, 0),
            func.coalesce(counts.c.unfolded, 0),
            func.coalesce(counts.c.quarantined, 0),
        )
        .outerjoin(counts, counts.c.model_id == Model.id)
        .where(_of_shard(Model.id, shard))
        .order_by(Model.name)
    ).all()
    return tuple(
        ModelRow(
            id=int(model_id),
            name=name,
            window=window,
            segments=frozenset(segments or ()),
            objectives=_objectives(model_id, name, sla or ()),
            batches=int(batches),
            rows=int(rows),
            unfolded=int(unfolded),
            quarantined=int(quarantined),
            label_missingness=missingness,
            label_horizon=horizon,
        )
        for (
            model_id,
            name,
            window,
            segments,
            sla,
            missingness,
            horizon,
            batches,
            rows,
            unfolded,
            quarantined,
        ) in result
    )


def _latest(*columns: Any, shard: Shard | None = None) -> Select[Any]:
    """SELECT ``columns`` of the latest fresh result with labelled rows per (model, segment)
    and its aggregate (a window of unlabelled rows only: app/exporter/estimates.py)."""
    latest = (
        _with_aggregate()
        .with_only_columns(
            WM.model_id.label("model_id"),
            WM.segment.label("segment"),
            func.max(WM.window_start).label("window_start"),
        )
        .where(WM.status == StoredStatus.FRESH, WA.n > 0, _of_shard(WM.model_id, shard))
        .group_by(WM.model_id, WM.segment)
        .subquery()
    )
    return _with_aggregate(*columns).join(
        latest,
        and_(
            latest.c.model_id == WM.model_id,
            latest.c.segment == WM.segment,
            latest.c.window_start == WM.window_start,
        ),
    )


def _key(row: Any) -> WindowKey:
    return WindowKey(int(row[0]), row[1], row[2], row[3], int(row[4]))


def read_latest_keys(session: Session, shard: Shard | None = None) -> list[WindowKey]:
    """The key of the latest fresh window of every (model, segment) (of the models of
    ``shard``; one statement)."""
    return [_key(r) for r in session.execute(_latest(shard=shard)).all()]


def _as_text(column: Any) -> Any:
    """A JSON column read as its text, decoded by :func:`_json` (orjson: several times
    faster than the drivers' json.loads on ~1,000 documents per scrape)."""
    return cast(column, Text)


def _json(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


def _with_aggregate(*columns: Any) -> Select[Any]:
    return select(
        WM.model_id, WM.segment, WM.window_start, WM.computed_at, WA.version, *columns
    ).join(
        WA,
        and_(
            WA.model_id == WM.model_id,
            WA.segment == WM.segment,
            WA.window_start == WM.window_start,
        ),
    )


def read_latest_windows(
    session: Session, only: Collection[WindowKey] | None = None, shard: Shard | None = None
) -> Iterator[LatestWindow]:
    """The latest fresh windows with their stored documents, as they are fetched
    (:data:`KEYS_PER_QUERY` rows at a time: the documents of a large fleet are
    never all in memory at once).

    Parameters
    ----------
    only : collection of WindowKey, optional
        Read these windows (matched on model, segment and start, as they are
        now, if still fresh; one statement per :data:`KEYS_PER_QUERY`)
        instead of every latest fresh window (one statement).
    shard : (index, count), optional
        Without ``only``: the latest fresh windows of the models of this shard.
    """
    documents = (
        WA.n,
        WA.positives,
        _as_text(WM.metrics),
        _as_text(WM.intervals),
        _as_text(WM.reasons),
        _as_text(WM.drift),
        WM.detail_version == WM.aggregate_version,
    )
    if only is None:
        statements = [_latest(*documents, shard=shard)]
    else:
        keys = [(k.model_id, k.segment, k.start) for k in only]
        statements = [
            _with_aggregate(*documents).where(
                WM.status == StoredStatus.FRESH,
                tuple_(WM.model_id, WM.segment, WM.window_start).in_(keys[i : i + KEYS_PER_QUERY]),
            )
            for i in range(0, len(keys), KEYS_PER_QUERY)
        ]
    for statement in statements:
        rows = session.execute(statement.execution_options(yield_per=KEYS_PER_QUERY))
        yield from (_latest_window(r) for r in rows)


def _latest_window(r: Any) -> LatestWindow:
    return LatestWindow(
        key=_key(r),
        n=int(r[5]),
        positives=int(r[6]),
        metrics=_json(r[7]) or {},
        intervals=_json(r[8]) or {},
        reasons=_json(r[9]) or {},
        drift=_json(r[10]),
        detail_current=bool(r[11]),
    )


def read_snapshot(session: Session) -> Snapshot:
    """Read everything a scrape exposes (read-only; the caller closes the session)."""
    return Snapshot(
        models=read_models(session),
        windows=tuple(read_latest_windows(session)),
        queue=queue_stats(session),
    )
