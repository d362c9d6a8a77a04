"""What a scrape reads: the models, the latest fresh window of each segment, the queue.

Every value comes from rows the worker and the ingestion wrote; nothing here
computes a metric. One scrape runs a fixed number of statements, whatever
the number of models and segments (their SQL is in :mod:`app.db.scrape`):

1. the models with their accepted batch and row counts (:func:`read_models`:
   the counters folded into the model's all-traffic window aggregates plus
   its unfolded and quarantined all-traffic deltas), their batches not
   folded yet and their quarantined deltas; one statement whose cost grows
   with the windows and the unfolded deltas, not with the batches folded;
2. the latest window with a fresh result per (model, segment): its key,
   ``computed_at`` and aggregate version (:func:`read_latest_keys`; not on a
   collector's first scrape, where 3 reads every latest window with its key);
3. the stored metrics, intervals, drift verdict and completed window
   (``maturity``) of those windows (:func:`read_latest_windows`);
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
import sys
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy.orm import Session

from app.db import scrape
from app.db.queue import QueueStats, queue_stats
from app.sla.objectives import Objective

log = logging.getLogger("priorwatch.exporter")

Shard = tuple[int, int]
"""(index, count) of a scrape shard, ``0 <= index < count``: the models with
``id % count == index``, as kube-state-metrics shards its objects."""


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
    exposition: str | tuple[str, ...] | None = None
    """The model's ``exposition`` setting (a preset or the families written whole), or
    None: the service's default (app/exporter/exposition.py)."""


@dataclass(frozen=True, slots=True)
class ResultStamp:
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

    key: ResultStamp
    n: int
    positives: int
    metrics: Mapping[str, Any]
    intervals: Mapping[str, Any]
    reasons: Mapping[str, str]
    drift: Mapping[str, Any] | None
    detail_current: bool = True
    """The detail tier's intervals are of the same version as the metrics (the SLA
    judges the others by their point value: app/sla/objectives.py)."""
    maturity: Mapping[str, Any] | None = None
    """The completed window of a window holding unlabelled and labelled rows
    (docs/maturity.md), which the SLA gauges judge; else None."""


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
    result = scrape.model_counts(session, shard)
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
            exposition=exposition if not isinstance(exposition, list) else tuple(exposition),
        )
        for (
            model_id,
            name,
            window,
            segments,
            sla,
            missingness,
            horizon,
            exposition,
            batches,
            rows,
            unfolded,
            quarantined,
        ) in result
    )


def _key(row: Any) -> ResultStamp:
    """The key of a row read (its segment key interned: the caches hold thousands)."""
    return ResultStamp(int(row[0]), sys.intern(row[1]), row[2], row[3], int(row[4]))


def read_latest_keys(session: Session, shard: Shard | None = None) -> list[ResultStamp]:
    """The key of the latest fresh window of every (model, segment) (of the models of
    ``shard``; one statement)."""
    return [_key(r) for r in scrape.latest_keys(session, shard)]


def json_document(text: str | None) -> Any:
    """A stored JSON document read as text (orjson: several times faster than the
    drivers' json.loads on ~1,000 documents per scrape)."""
    return None if text is None else orjson.loads(text)


def read_latest_windows(
    session: Session,
    only: Collection[ResultStamp] | None = None,
    shard: Shard | None = None,
    projection: scrape.Projection | None = None,
) -> Iterator[LatestWindow]:
    """The latest fresh windows with their stored documents, as they are fetched
    (:data:`~app.db.scrape.KEYS_PER_QUERY` rows at a time: the documents of a large fleet are
    never all in memory at once).

    Parameters
    ----------
    only : collection of ResultStamp, optional
        Read these windows (matched on model, segment and start, as they are
        now, if still fresh; one statement per :data:`~app.db.scrape.KEYS_PER_QUERY`)
        instead of every latest fresh window (one statement).
    shard : (index, count), optional
        Without ``only``: the latest fresh windows of the models of this shard.
    projection : Projection, optional
        Only these members of the documents (on PostgreSQL; :class:`app.db.scrape.Projection`);
        None: the documents whole.
    """
    keys = None if only is None else [(k.model_id, k.segment, k.start) for k in only]
    rows = scrape.latest_documents(session, keys, shard, projection)
    yield from (_latest_window(r) for r in rows)


def _latest_window(r: Any) -> LatestWindow:
    return LatestWindow(
        key=_key(r),
        n=int(r[5]),
        positives=int(r[6]),
        metrics=json_document(r[7]) or {},
        intervals=json_document(r[8]) or {},
        reasons=json_document(r[9]) or {},
        drift=json_document(r[10]),
        detail_current=bool(r[11]),
        maturity=json_document(r[12]),
    )


def read_snapshot(session: Session) -> Snapshot:
    """Read everything a scrape exposes (read-only; the caller closes the session)."""
    return Snapshot(
        models=read_models(session),
        windows=tuple(read_latest_windows(session)),
        queue=queue_stats(session),
    )
