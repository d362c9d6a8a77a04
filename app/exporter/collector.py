"""The Prometheus collector of stored window results (read at scrape time).

It never computes a metric: :mod:`app.exporter.reads` reads the rows the
worker and the ingestion wrote, :mod:`app.exporter.series` turns them into
samples. ``GET /metrics`` reads the stored documents only of the windows
whose text is not cached yet (see :meth:`WindowResultsCollector.render_text`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session

from app.db.queue import queue_stats
from app.exporter.names import FAMILIES, FamilySpec
from app.exporter.reads import (
    ModelRow,
    Snapshot,
    WindowKey,
    read_latest_keys,
    read_latest_windows,
    read_models,
    read_snapshot,
)
from app.exporter.series import (
    WINDOW_FAMILIES,
    exposed_windows,
    families,
    model_series,
    segment_label,
    window_series,
)
from app.exporter.text import Series, render_families, render_series, sample_lines
from app.services.sla_objectives import Objective


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
        Families :meth:`render_text` writes after its own (the streaks of
        app/exporter/streaks.py, the estimates of app/exporter/estimates.py),
        read in the same session with the same models.

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
