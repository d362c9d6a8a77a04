"""The Prometheus collector of stored window results (read at scrape time).

It never computes a metric: :mod:`app.exporter.reads` reads the rows the
worker and the ingestion wrote, :mod:`app.exporter.series` turns them into
samples. ``GET /metrics`` reads the stored documents only of the windows
whose text is not cached yet (see :meth:`WindowResultsCollector.read_text`).
"""

from __future__ import annotations

import hashlib
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session

from app.db.queue import queue_stats
from app.db.scrape import Projection
from app.exporter.exposition import COMPACT, Exposition
from app.exporter.names import FAMILIES, FamilySpec
from app.exporter.reads import (
    LatestWindow,
    ModelRow,
    ResultStamp,
    Shard,
    Snapshot,
    read_latest_keys,
    read_latest_windows,
    read_models,
    read_snapshot,
)
from app.exporter.series import (
    WINDOW_FAMILIES,
    exposed_windows,
    families,
    holds_process_series,
    model_series,
    read_projection,
    segment_label,
    window_series,
)
from app.exporter.text import Series, render_families, render_series, sample_lines


class SeriesPart(Protocol):
    """More families for :meth:`WindowResultsCollector.read_text`, read in its session."""

    specs: tuple[FamilySpec, ...]

    def read(
        self,
        session: Session,
        models: tuple[ModelRow, ...],
        shard: Shard | None = None,
        exposition_of: Callable[[ModelRow], Exposition] = ...,
    ) -> Series:
        """The samples of :attr:`specs`, by family: those of ``models``, the models of
        ``shard``, only the series ``exposition_of`` each model writes."""
        ...


ChunkKey = tuple[int, str, bytes]
"""A cached window: its model id and segment key, and a digest of what its text depends
on: the stored result and aggregate version (ResultStamp), the segment label and the
model's name, window length, objectives and exposition (a digest is kept instead of
those objects: ~50 bytes a window; two different keys share one with odds of 2^-128)."""


class WindowResultsCollector(Collector):
    """Yields the ``priorwatch_*`` families of :mod:`app.exporter.names` per scrape.

    Parameters
    ----------
    session_factory : callable returning a Session
        A new session per scrape; it is only read from, then closed.
    parts : sequence of SeriesPart
        Families :meth:`read_text` writes after its own (the streaks of
        app/exporter/streaks.py, the estimates of app/exporter/estimates.py, the label
        maturity of app/exporter/maturity.py),
        read in the same session with the same models.
    exposition : Exposition
        Which ``metric`` values of the window, estimate and maturity families are
        written for a model whose ``exposition`` setting is None: the service's default
        (app/exporter/exposition.py; compact unless set).
    shard : (index, count), optional
        Expose only the models with ``id % count == index``, and the series of
        no model only on shard 0 (read so: app/exporter/reads.py); one
        collector per shard, each with its own cache. None: every model.

    ``collect`` serves any prometheus_client registry. ``GET /metrics`` uses
    :meth:`read_text`: the same series in the text format, written by
    :mod:`app.exporter.text` (prometheus_client's encoder costs ~30 us a
    sample, seconds at 100 models x 10 segments), with each window's lines
    kept until its stored result, aggregate version or model settings change.
    """

    def __init__(
        self,
        session_factory: Callable[[], Session],
        parts: Iterable[SeriesPart] = (),
        *,
        exposition: Exposition = COMPACT,
        shard: Shard | None = None,
    ) -> None:
        self._session_factory = session_factory
        self._parts = tuple(parts)
        self._exposition = exposition
        self._shard = shard
        self._lock = threading.Lock()
        self._chunks: dict[ChunkKey, bytes] | None = None
        """The lines of the windows of the latest scrape (None: none yet)."""

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

    def exposition_of(self, model: ModelRow) -> Exposition:
        """The exposition of ``model``'s series: its setting, else the service's default."""
        return Exposition.of_setting(model.exposition, self._exposition)

    def _add_chunk(
        self, chunks: dict[ChunkKey, bytes], model: ModelRow, settings: bytes, window: LatestWindow
    ) -> None:
        """Write the lines of a window just read into ``chunks`` (its document is dropped);
        ``settings``: :func:`_settings` of ``model``."""
        segment = segment_label(model, window.key.segment)
        if segment is None:
            return
        samples = window_series(model, segment, window, self.exposition_of(model))
        lines = (sample_lines(spec, samples[spec.name]) for spec in WINDOW_FAMILIES)
        chunks[_chunk_key(settings, segment, window.key)] = _pack(lines)

    def _read_chunks(
        self,
        session: Session,
        models: tuple[ModelRow, ...],
        cached: dict[ChunkKey, bytes] | None,
    ) -> dict[ChunkKey, bytes]:
        """The lines of every exposed window of ``models``: ``cached``, else written from
        its documents as they arrive, a few hundred at a time (the cache keeps exactly the
        windows exposed by this shard's latest scrape).

        The keys of the latest windows are read first, then the documents of those not
        cached; on the shard's first scrape (``cached`` None) the documents of every
        latest window are read at once, their keys with them: one statement fewer that
        finds the shard's latest windows, about 0.1 s of PostgreSQL per 7,500 windows.
        """
        by_model = {m.id: m for m in models}
        settings = {m.id: _settings(m, self.exposition_of(m)) for m in models}
        projection = read_projection(models, self.exposition_of)
        chunks: dict[ChunkKey, bytes] = {}
        if cached is None:
            for window in read_latest_windows(session, shard=self._shard, projection=projection):
                model_id = window.key.model_id
                if model_id in by_model:
                    self._add_chunk(chunks, by_model[model_id], settings[model_id], window)
            return chunks
        exposed = exposed_windows(models, read_latest_keys(session, self._shard))
        wanted = [(_chunk_key(settings[m.id], s, k), k) for m, s, k in exposed]
        chunks = {key: cached[key] for key, _ in wanted if key in cached}
        missing = [stamp for key, stamp in wanted if key not in chunks]
        at = {(k.model_id, k.segment, k.start) for k in missing}
        windows = _read_windows(session, missing, len(wanted), self._shard, projection)
        for window in windows:
            read = window.key
            if (read.model_id, read.segment, read.start) in at:  # else cached, or newer
                model_id = read.model_id
                self._add_chunk(chunks, by_model[model_id], settings[model_id], window)
        return chunks

    def render_text(self) -> str:
        """The families in Prometheus text format 0.0.4 (no timestamps), as one string."""
        return b"".join(self.read_text()).decode()

    def read_text(self) -> Iterator[bytes]:
        """Read now, then the text family by family (the caller streams it), encoded.

        Reads the models (of this collector's shard), the windows' lines
        (:meth:`_read_chunks`) and, on shard 0 or unsharded, the queue. Each
        cached window is then unpacked once into its families' buffers, which
        are written and freed one family at a time.
        """
        with self._lock:
            cached = self._chunks
        with self._session_factory() as session:
            try:
                models = read_models(session, self._shard)
                chunks = self._read_chunks(session, models, cached)
                queue = queue_stats(session) if holds_process_series(self._shard) else None
                extra = [
                    (part.specs, part.read(session, models, self._shard, self.exposition_of))
                    for part in self._parts
                ]
            finally:
                session.rollback()
        with self._lock:
            self._chunks = chunks
        blocks = {spec.name: bytearray() for spec in FAMILIES}
        for key in sorted(chunks, key=lambda k: k[:2]):
            for spec, text in zip(WINDOW_FAMILIES, _unpack(chunks[key]), strict=True):
                if text:
                    blocks[spec.name] += text + b"\n"
        return _text(blocks, model_series(models, queue), extra)


_SEPARATOR = b"\n\n"
"""Between the families' lines of one window in its cached chunk: a family's lines never
hold an empty line (they are joined by one newline, and label values escape theirs)."""


def _pack(texts: Iterable[str]) -> bytes:
    """One window's lines, family by family, as cached: compressed (a cached window
    costs ~1 KB instead of ~4: the cache of 30,000 windows stays in tens of MB)."""
    return zlib.compress(_SEPARATOR.join(text.encode() for text in texts), 1)


def _unpack(chunk: bytes) -> list[bytes]:
    return zlib.decompress(chunk).split(_SEPARATOR)


def _read_windows(
    session: Session,
    missing: list[ResultStamp],
    wanted: int,
    shard: Shard | None,
    projection: Projection,
) -> Iterator[LatestWindow]:
    """The documents of the ``missing`` windows (only the members of ``projection``): by
    key when they are few, else every latest window of the shard in one statement (a cold
    cache: many IN lists cost more)."""
    if not missing:
        return iter(())
    if len(missing) * 2 <= wanted:
        return read_latest_windows(session, missing, projection=projection)
    return read_latest_windows(session, shard=shard, projection=projection)


WRITTEN = 1 << 20
"""Most bytes of a family's lines written at once (the family's buffer is not copied)."""


def _text(
    blocks: dict[str, bytearray],
    others: Series,
    extra: list[tuple[tuple[FamilySpec, ...], Series]],
) -> Iterator[bytes]:
    for spec in FAMILIES:
        family = blocks.pop(spec.name)  # each family's text is freed once written
        if spec.name in others:
            lines = sample_lines(spec, others[spec.name])
            if lines:
                family += lines.encode() + b"\n"
        yield render_families((spec,), {}).encode()
        with memoryview(family) as view:
            for start in range(0, len(family), WRITTEN):
                yield bytes(view[start : start + WRITTEN])
    for specs, samples in extra:
        for spec in specs:  # one family at a time
            yield render_series((spec,), {spec.name: samples.get(spec.name, [])}).encode()


def _settings(model: ModelRow, exposition: Exposition) -> bytes:
    """What of ``model`` a window's text depends on, as bytes to digest."""
    settings = (model.name, model.window, model.objectives, sorted(exposition.full))
    return repr(settings).encode()


def _chunk_key(settings: bytes, segment: str, key: ResultStamp) -> ChunkKey:
    stamp = repr((segment, key.start, key.computed_at, key.version)).encode()
    return (key.model_id, key.segment, hashlib.blake2b(settings + stamp, digest_size=16).digest())
