"""A Prometheus collector that reads stored window results at scrape time.

It never computes a metric: every value comes from rows the worker and the
ingestion wrote. One scrape runs a fixed number of queries, whatever the
number of models and segments:

1. the models with their accepted batch and row counts (one GROUP BY on
   ``batch``);
2. the latest window with a fresh result per (model, segment): its key,
   ``computed_at`` and aggregate version (:func:`read_latest_keys`);
3. the stored metrics, intervals and drift verdict of those windows
   (:func:`read_latest_windows`) -- in ``GET /metrics``, only of the windows
   whose text is not cached yet (see :meth:`WindowResultsCollector.render_text`);
4. the queue depth and the age of its oldest dirty mark
   (:func:`app.worker.queue.queue_stats`).

"Latest fresh window": per (model, segment), the latest window whose stored
result has status ``"fresh"`` (it was computed from the version of the
aggregate that was current when it was written). A batch arriving since
does not hide it until the worker has refreshed the window, so the gauges do
not flip back to an older window between a batch and its recomputation.

Label values come from registered names only: a model's name, its
registered segments (windows of a segment removed from the model are not
exposed) and ``"all"`` for the all-traffic window; metric names are the
stored keys, which are those of ``evaluate``. Undefined values (None) are
omitted, never exported as NaN. No sample carries a timestamp.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

import orjson
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Select, Text, and_, cast, func, select, tuple_
from sqlalchemy.orm import Session

from app.db.models import ALL_SEGMENTS, Batch, Model, WindowAggregate, WindowMetrics
from app.exporter import names
from app.exporter.names import FAMILIES, FamilySpec
from app.exporter.text import Series, render_families, render_series, sample_lines
from app.services.sla import BREACHED, MET, Objective, evaluate_objective
from app.services.windowing import window_length
from app.worker.queue import QueueStats, queue_stats

log = logging.getLogger("priorwatch.exporter")

WA = WindowAggregate
WM = WindowMetrics

DRIFT_KINDS: tuple[str, ...] = ("prior", "likelihood")
"""``kind`` label values of the drift gauges."""
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


@dataclass(frozen=True)
class Snapshot:
    """Everything one scrape exposes."""

    models: tuple[ModelRow, ...]
    windows: tuple[LatestWindow, ...]
    queue: QueueStats


# --- reading -------------------------------------------------------------------


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


def read_models(session: Session) -> tuple[ModelRow, ...]:
    """Every model with its accepted batches and rows (one statement)."""
    counts = (
        select(
            Batch.model_id.label("model_id"),
            func.count().label("batches"),
            func.sum(Batch.n).label("rows"),
        )
        .group_by(Batch.model_id)
        .subquery()
    )
    result = session.execute(
        select(
            Model.id,
            Model.name,
            Model.window,
            Model.segments,
            Model.sla,
            func.coalesce(counts.c.batches, 0),
            func.coalesce(counts.c.rows, 0),
        )
        .outerjoin(counts, counts.c.model_id == Model.id)
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
        )
        for model_id, name, window, segments, sla, batches, rows in result
    )


def _latest(*columns: Any) -> Select[Any]:
    """SELECT ``columns`` of the latest fresh result per (model, segment) and its aggregate."""
    latest = (
        select(
            WM.model_id.label("model_id"),
            WM.segment.label("segment"),
            func.max(WM.window_start).label("window_start"),
        )
        .where(WM.status == "fresh")
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


def read_latest_keys(session: Session) -> list[WindowKey]:
    """The key of the latest fresh window of every (model, segment) (one statement)."""
    return [_key(r) for r in session.execute(_latest()).all()]


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
    session: Session, only: Collection[WindowKey] | None = None
) -> list[LatestWindow]:
    """The latest fresh windows with their stored documents.

    Parameters
    ----------
    only : collection of WindowKey, optional
        Read these windows (matched on model, segment and start, as they are
        now, if still fresh; one statement per :data:`KEYS_PER_QUERY`)
        instead of every latest fresh window (one statement).
    """
    documents = (
        WA.n,
        WA.positives,
        _as_text(WM.metrics),
        _as_text(WM.intervals),
        _as_text(WM.reasons),
        _as_text(WM.drift),
    )
    if only is None:
        statements = [_latest(*documents)]
    else:
        keys = [(k.model_id, k.segment, k.start) for k in only]
        statements = [
            _with_aggregate(*documents).where(
                WM.status == "fresh",
                tuple_(WM.model_id, WM.segment, WM.window_start).in_(keys[i : i + KEYS_PER_QUERY]),
            )
            for i in range(0, len(keys), KEYS_PER_QUERY)
        ]
    return [
        LatestWindow(
            key=_key(r),
            n=int(r[5]),
            positives=int(r[6]),
            metrics=_json(r[7]) or {},
            intervals=_json(r[8]) or {},
            reasons=_json(r[9]) or {},
            drift=_json(r[10]),
        )
        for statement in statements
        for r in session.execute(statement).all()
    ]


def read_snapshot(session: Session) -> Snapshot:
    """Read everything a scrape exposes (read-only; the caller closes the session)."""
    return Snapshot(
        models=read_models(session),
        windows=tuple(read_latest_windows(session)),
        queue=queue_stats(session),
    )


# --- series --------------------------------------------------------------------


def _finite(value: Any) -> float | None:
    """``value`` as a float, or None when it is absent, not a number, or not finite."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def segment_label(model: ModelRow, key: str) -> str | None:
    """The ``segment`` label of a stored segment key; None when it must not be exposed."""
    if key == ALL_SEGMENTS:
        return names.ALL_SEGMENTS_LABEL
    if key not in model.segments or key == names.ALL_SEGMENTS_LABEL:
        return None  # deregistered, or would collide with the all-traffic label
    return key


WINDOW_FAMILIES: tuple[FamilySpec, ...] = tuple(
    f for f in FAMILIES if f.labels[:2] == ("model", "segment")
)
"""The families with one series set per exposed window."""


def window_series(model: ModelRow, segment: str, window: LatestWindow) -> Series:
    """The samples of one exposed window, by family of :data:`WINDOW_FAMILIES` (pure)."""
    out: Series = {spec.name: [] for spec in WINDOW_FAMILIES}
    labels = (model.name, segment)
    metric = out[names.WINDOW_METRIC]
    for name, raw in window.metrics.items():
        if raw is None:
            continue
        if type(raw) is float:  # the common case, checked fast
            if math.isfinite(raw):
                metric.append(((*labels, name), raw))
            continue
        value = _finite(raw)
        if value is not None:
            metric.append(((*labels, name), value))
    lower, upper = out[names.WINDOW_METRIC_LOWER], out[names.WINDOW_METRIC_UPPER]
    for name, bounds in window.intervals.items():
        if not isinstance(bounds, Mapping):
            continue
        low, high = _finite(bounds.get("lower")), _finite(bounds.get("upper"))
        if low is not None:
            lower.append(((*labels, name), low))
        if high is not None:
            upper.append(((*labels, name), high))
    examples = out[names.WINDOW_EXAMPLES]
    examples.append(((*labels, "positive"), float(window.positives)))
    examples.append(((*labels, "negative"), float(window.n - window.positives)))
    end = window.key.start + window_length(model.window)
    out[names.WINDOW_END].append((labels, end.timestamp()))
    _add_drift(out, labels, window.drift)
    for objective in model.objectives:
        result = evaluate_objective(objective, window.metrics, window.intervals, window.reasons)
        if result.status in (MET, BREACHED):
            out[names.SLA_MET].append(
                ((*labels, *objective_labels(objective)), 1.0 if result.status == MET else 0.0)
            )
    return out


def objective_labels(objective: Objective) -> tuple[str, str, str]:
    """The ``objective``, ``metric`` and ``op`` labels of an SLA objective (no target)."""
    return (objective.id, objective.metric, objective.op)


def _add_drift(out: Series, labels: tuple[str, str], drift: Mapping[str, Any] | None) -> None:
    if not drift:
        return
    for kind in DRIFT_KINDS:
        test = drift.get(kind)
        if not isinstance(test, Mapping):
            continue
        flag = test.get("flag")
        if isinstance(flag, bool):
            out[names.DRIFT_FLAG].append(((*labels, kind), 1.0 if flag else 0.0))
        p_value, effect = _finite(test.get("p_value")), _finite(test.get("effect"))
        if p_value is not None:
            out[names.DRIFT_P_VALUE].append(((*labels, kind), p_value))
        if effect is not None:
            out[names.DRIFT_EFFECT].append(((*labels, kind), effect))


def model_series(models: Iterable[ModelRow], queue: QueueStats) -> Series:
    """The samples that do not depend on a window: counters, targets, queue (pure)."""
    out: Series = {spec.name: [] for spec in FAMILIES if spec not in WINDOW_FAMILIES}
    for model in models:
        out[names.BATCHES_INGESTED].append(((model.name,), float(model.batches)))
        out[names.PREDICTIONS_INGESTED].append(((model.name,), float(model.rows)))
        for objective in model.objectives:
            out[names.SLA_TARGET].append(
                ((model.name, *objective_labels(objective)), objective.target)
            )
    out[names.DIRTY_WINDOWS].append(((), float(queue.dirty_windows)))
    out[names.WORKER_LAG].append(((), queue.lag_seconds))
    return out


def exposed_windows(
    models: Iterable[ModelRow], keys: Iterable[WindowKey]
) -> list[tuple[ModelRow, str, WindowKey]]:
    """The windows to expose, as (model, segment label, key), in exposition order.

    Windows of unknown models and of segments that are not registered (any
    more) are left out.
    """
    by_id = {m.id: m for m in models}
    out = []
    for key in sorted(keys, key=lambda k: (k.model_id, k.segment)):
        model = by_id.get(key.model_id)
        if model is None:
            continue
        segment = segment_label(model, key.segment)
        if segment is not None:
            out.append((model, segment, key))
    return out


def series(snapshot: Snapshot) -> Series:
    """Every sample of one snapshot, by family (pure).

    The one place that decides which series exist and their values
    (:func:`window_series` and :func:`model_series`); :func:`families` and
    :meth:`WindowResultsCollector.render_text` both write it.
    """
    out: Series = {spec.name: [] for spec in FAMILIES}
    windows = {w.key: w for w in snapshot.windows}
    for model, segment, key in exposed_windows(snapshot.models, windows):
        for name, samples in window_series(model, segment, windows[key]).items():
            out[name].extend(samples)
    for name, samples in model_series(snapshot.models, snapshot.queue).items():
        out[name].extend(samples)
    return out


def families(snapshot: Snapshot) -> tuple[Metric, ...]:
    """The metric families of one snapshot as prometheus_client objects (pure)."""
    samples = series(snapshot)
    out: list[Metric] = []
    for spec in FAMILIES:
        family: GaugeMetricFamily | CounterMetricFamily
        if spec.kind == "counter":
            family = CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
        else:
            family = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
        for labels, value in samples[spec.name]:
            family.add_metric(labels, value)
        out.append(family)
    return tuple(out)


class SeriesPart(Protocol):
    """More families for :meth:`WindowResultsCollector.render_text`, read in its session."""

    specs: tuple[FamilySpec, ...]

    def read(self, session: Session, models: tuple[ModelRow, ...]) -> Series:
        """The samples of :attr:`specs`, by family."""
        ...


ChunkKey = tuple[WindowKey, str, str, str, tuple[Objective, ...]]
"""What one window's text depends on: the stored result and aggregate version
(WindowKey), the segment label, the model's name, window length and objectives."""


class WindowResultsCollector(Collector):
    """Yields the ``priorwatch_*`` families of :mod:`app.exporter.names` per scrape.

    Parameters
    ----------
    session_factory : callable returning a Session
        A new session per scrape; it is only read from, then closed.
    parts : sequence of SeriesPart
        Families :meth:`render_text` writes after its own (e.g. the streaks of
        app/exporter/streaks.py), read in the same session with the same models.

    ``collect`` serves any prometheus_client registry. ``GET /metrics`` uses
    :meth:`render_text`: the same series in the text format, written by
    :mod:`app.exporter.text` (prometheus_client's encoder costs ~30 us a
    sample, seconds at 100 models x 10 segments), with each window's lines
    kept until its stored result, aggregate version or model settings change.
    """

    def __init__(
        self, session_factory: Callable[[], Session], parts: Iterable[SeriesPart] = ()
    ) -> None:
        self._session_factory = session_factory
        self._parts = tuple(parts)
        self._lock = threading.Lock()
        self._chunks: dict[ChunkKey, dict[str, str]] = {}

    def snapshot(self) -> Snapshot:
        """Read the stored results (one read-only session, closed at once)."""
        with self._session_factory() as session:
            try:
                return read_snapshot(session)
            finally:
                session.rollback()

    def collect(self) -> Iterator[Metric]:
        yield from families(self.snapshot())

    def describe(self) -> Iterable[Metric]:
        """Nothing: the families are only known at scrape time (no check at register)."""
        return ()

    def render_text(self) -> str:
        """The families in Prometheus text format 0.0.4 (no timestamps).

        Reads the models, the keys of the latest windows and the queue, then
        the documents of the windows whose lines are not cached; the cache
        keeps exactly the windows exposed by the latest scrape.
        """
        with self._lock:
            cached = self._chunks
        with self._session_factory() as session:
            try:
                models = read_models(session)
                exposed = exposed_windows(models, read_latest_keys(session))
                wanted = {_chunk_key(m, s, k): (m, s) for m, s, k in exposed}
                missing = [k[0] for k in wanted if k not in cached]
                fetched = read_latest_windows(session, missing) if missing else []
                queue = queue_stats(session)
                extra = [(part.specs, part.read(session, models)) for part in self._parts]
            finally:
                session.rollback()
        chunks: dict[ChunkKey, dict[str, str]] = {k: cached[k] for k in wanted if k in cached}
        by_model = {m.id: m for m in models}
        for window in fetched:
            model = by_model[window.key.model_id]
            segment = segment_label(model, window.key.segment)
            if segment is None:
                continue
            samples = window_series(model, segment, window)
            chunks[_chunk_key(model, segment, window.key)] = {
                spec.name: sample_lines(spec, samples[spec.name]) for spec in WINDOW_FAMILIES
            }
        with self._lock:
            self._chunks = chunks
        parts: dict[str, list[str]] = {spec.name: [] for spec in FAMILIES}
        for key in sorted(chunks, key=lambda k: (k[0].model_id, k[0].segment)):
            for name, text in chunks[key].items():
                parts[name].append(text)
        others = model_series(models, queue)
        for spec in FAMILIES:
            if spec.name in others:
                parts[spec.name].append(sample_lines(spec, others[spec.name]))
        text = render_families(FAMILIES, parts)
        return text + "".join(render_series(specs, samples) for specs, samples in extra)


def _chunk_key(model: ModelRow, segment: str, key: WindowKey) -> ChunkKey:
    return (key, segment, model.name, model.window, model.objectives)
