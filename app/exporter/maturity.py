"""Label maturity in the exposition: how far the labels have arrived, and the completed metrics.

Per (model, segment):

* the latest fresh window **holding both unlabelled and labelled rows** gives
  ``priorwatch_window_label_completeness`` and ``priorwatch_window_completed``
  (``metric="prior"``: the completed prior; else the completed metrics), both
  from its stored ``maturity`` document (absent while it is null: a model whose
  ``label_missingness`` is ``none``, a window off the protocol);
* the windows that ended ``1d``, ``7d`` and ``30d`` ago give
  ``priorwatch_label_completeness{age}`` (the completeness curve; models
  completing their windows only, windows with scored rows only);
* ``priorwatch_labels_overdue_windows`` counts the windows past the model's
  ``label_horizon`` with less than 95% of their labels (0 when none; models
  with a horizon only). A window of scored rows without any label counts.

The completeness of the last two is labelled over scored rows of the
window's aggregate (app/db/labels.py), the ratio the worker stores as
``maturity.completeness``. At most four statements per scrape (the keys of the
latest windows, then the documents only of those that changed since the previous
scrape: :func:`read_maturity`); nothing is
computed but window arithmetic on the injected clock.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy.orm import Session

from app.db.labels import WindowCompleteness, overdue_windows, windows_completeness
from app.db.models import ALL_SEGMENTS
from app.db.scrape import latest_maturity_keys, maturity_documents
from app.exporter import names
from app.exporter.names import MATURITY_FAMILIES, FamilySpec
from app.exporter.part import ExpositionOf, StoredPartCollector, whole
from app.exporter.reads import ModelRow, Shard, json_document
from app.exporter.series import measured, segment_label
from app.exporter.text import Series
from app.timegrid import parse_duration, window_length, window_start

AGES: Mapping[str, timedelta] = {
    "1d": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
"""``age`` label values of the completeness curve: how long ago the window ended."""


EXPOSED_PARTS = ("completeness", "prior", "metrics")
"""The members of a ``maturity`` document the exposition reads."""
PRIOR_READ = ("value",)
"""What the exposition reads of a ``maturity`` document's ``prior``."""


@dataclass(frozen=True)
class StoredMaturity:
    """The stored ``maturity`` document of one window."""

    model_id: int
    segment: str
    document: Mapping[str, Any]


Group = tuple[int, str]
"""(model id, segment key)."""
WindowKey = tuple[int, str, datetime, datetime]
"""(model id, segment key, window start, computed_at): changes whenever the result does."""
Read = tuple[WindowKey, frozenset[str] | None, str | None]
"""A group's window, the names its document was trimmed to (None: every one) and the
trimmed document as JSON (None: null, or not an object): a few hundred bytes a window
in one object, where the decoded document holds a dozen."""


def read_maturity(
    session: Session,
    kept: Mapping[int, frozenset[str] | None],
    shard: Shard | None = None,
    cached: Mapping[Group, Read] | None = None,
) -> dict[Group, Read]:
    """The maturity document of the latest fresh window holding both kinds of rows, per
    (model, segment) of the models of ``kept`` in ``shard``, with only what
    :func:`maturity_series` reads (:data:`EXPOSED_PARTS`, projected in SQL where the
    database can) and of its completed values only the names ``kept[model id]`` (None:
    every one).

    One statement reads the windows' keys; the documents are read only for the groups
    whose window, result or names differ from ``cached`` (the previous return value), by
    key (one statement per 500), or for the whole shard when they are most of them (one
    statement), trimmed as they arrive: a shard's documents are never all in memory whole.
    With nothing ``cached`` (a cold cache) the documents of the whole shard are read at
    once, their keys with them: one statement fewer that finds the latest windows.
    """
    if not cached:
        members = _members_read(kept.values())
        return _read_documents(session, None, members, shard, kept, lambda g: g[0] in kept)
    keys: dict[Group, WindowKey] = {
        (int(m), sys.intern(segment)): (int(m), sys.intern(segment), start, computed)
        for m, segment, start, computed in latest_maturity_keys(session, shard)
        if m in kept
    }
    out: dict[Group, Read] = {}
    for group, key in keys.items():
        old = cached.get(group)
        if old is not None and old[0] == key and old[1] == kept[group[0]]:
            out[group] = old
    missing = [key for group, key in keys.items() if group not in out]
    if not missing:
        return out
    only = None if len(missing) * 2 > len(keys) else [key[:3] for key in missing]
    wanted = {key[:2] for key in missing}
    members = _members_read({kept[group[0]] for group in wanted})
    # else cached (read with the whole shard)
    out.update(_read_documents(session, only, members, shard, kept, wanted.__contains__))
    return out


def _read_documents(
    session: Session,
    only: Sequence[tuple[int, str, datetime]] | None,
    members: Mapping[str, Sequence[str] | None],
    shard: Shard | None,
    kept: Mapping[int, frozenset[str] | None],
    wanted: Callable[[Group], bool],
) -> dict[Group, Read]:
    """The :data:`Read` of the groups ``wanted`` among the documents
    :func:`~app.db.scrape.maturity_documents` reads (of ``only``, else of the whole
    shard), each trimmed as it arrives."""
    out: dict[Group, Read] = {}
    for model_id, segment, start, computed, text in maturity_documents(
        session, only, members, shard
    ):
        group = (int(model_id), sys.intern(segment))
        if wanted(group):
            document, names_kept = json_document(text), kept[group[0]]
            stored = None
            if isinstance(document, Mapping):
                # decoded to str: orjson's bytes keep their 4 KB buffer
                stored = orjson.dumps(_trimmed(document, names_kept)).decode()
            out[group] = ((*group, start, computed), names_kept, stored)
    return out


def _members_read(kept: Iterable[frozenset[str] | None]) -> dict[str, Sequence[str] | None]:
    """The members of the documents :func:`read_maturity` reads (:data:`EXPOSED_PARTS`), of
    ``prior`` its value, of ``metrics`` the names of any of ``kept`` (every one when one
    of them is None)."""
    names: set[str] | None = set()
    for names_kept in kept:
        names = None if names is None or names_kept is None else names | names_kept
    metrics = None if names is None else sorted(names)
    return {"completeness": None, "prior": PRIOR_READ, "metrics": metrics}


def stored_maturity(read: Mapping[Group, Read]) -> list[StoredMaturity]:
    """The documents of :func:`read_maturity`'s groups (those not null), decoded."""
    return [
        StoredMaturity(*group, orjson.loads(stored))
        for group, (_, _, stored) in read.items()
        if stored is not None
    ]


def _trimmed(document: Mapping[str, Any], kept: frozenset[str] | None) -> dict[str, Any]:
    """The members of ``document`` :func:`maturity_series` reads, without the completed
    values (``prior``, ``metrics``) whose name is not ``kept`` (None: every one)."""
    read = {key: document[key] for key in EXPOSED_PARTS if key in document}
    prior = read.get("prior")
    if isinstance(prior, Mapping):
        read["prior"] = {"value": prior.get("value")}
    if kept is None:
        return read
    if "prior" not in kept:
        read.pop("prior", None)
    metrics = read.get("metrics")
    if isinstance(metrics, Mapping):
        read["metrics"] = {name: value for name, value in metrics.items() if name in kept}
    return read


def ended_ago(model: ModelRow, now: datetime, age: timedelta) -> datetime:
    """Start of the model's latest window that had ended ``age`` before ``now``.

    >>> model = ModelRow(1, "m", "1h", frozenset(), (), 0, 0)
    >>> ended_ago(model, datetime(2026, 11, 27, 10, 30, tzinfo=UTC), timedelta(days=1))
    datetime.datetime(2026, 11, 26, 9, 0, tzinfo=datetime.timezone.utc)
    """
    return window_start(now - age, model.window) - window_length(model.window)


def horizon_cutoff(model: ModelRow, now: datetime) -> datetime | None:
    """The windows starting before this ended at least ``label_horizon`` before ``now``
    (None: the model has no horizon)."""
    if model.label_horizon is None:
        return None
    return window_start(now - parse_duration(model.label_horizon, "label_horizon"), model.window)


def maturity_series(
    models: Iterable[ModelRow],
    stored: Iterable[StoredMaturity],
    curve: Iterable[WindowCompleteness],
    overdue: Mapping[tuple[int, str], int],
    now: datetime,
) -> Series:
    """The samples of :data:`~app.exporter.names.MATURITY_FAMILIES` (pure)."""
    out: Series = {spec.name: [] for spec in MATURITY_FAMILIES}
    by_id = {m.id: m for m in models}
    for doc in sorted(stored, key=lambda d: (d.model_id, d.segment)):
        model = by_id.get(doc.model_id)
        segment = None if model is None else segment_label(model, doc.segment)
        if model is None or segment is None:
            continue
        labels = (model.name, segment)
        completeness = measured(doc.document.get("completeness"))
        if completeness is not None:
            out[names.WINDOW_LABEL_COMPLETENESS].append((labels, completeness))
        prior = doc.document.get("prior")
        values = {"prior": prior.get("value") if isinstance(prior, Mapping) else None}
        metrics = doc.document.get("metrics")
        for name, raw in {**values, **(metrics if isinstance(metrics, Mapping) else {})}.items():
            value = measured(raw)
            if value is not None:
                out[names.WINDOW_COMPLETED].append(((*labels, name), value))
    _curve_samples(out, by_id, curve, now)
    for model in by_id.values():
        if model.label_horizon is None:
            continue
        for key in sorted({ALL_SEGMENTS, *model.segments}):
            segment = segment_label(model, key)
            if segment is not None:
                count = float(overdue.get((model.id, key), 0))
                out[names.LABELS_OVERDUE].append(((model.name, segment), count))
    return out


def _curve_samples(
    out: Series, by_id: Mapping[int, ModelRow], curve: Iterable[WindowCompleteness], now: datetime
) -> None:
    for window in sorted(curve, key=lambda w: (w.model_id, w.segment, w.start)):
        model = by_id.get(window.model_id)
        segment = None if model is None else segment_label(model, window.segment)
        if model is None or segment is None:
            continue
        for age, ago in AGES.items():
            if ended_ago(model, now, ago) == window.start:
                sample = ((model.name, segment, age), window.completeness)
                out[names.LABEL_COMPLETENESS].append(sample)


class MaturityCollector(StoredPartCollector):
    """Yields :data:`~app.exporter.names.MATURITY_FAMILIES` per scrape.

    ``GET /metrics`` writes them with the window families: the window
    collector calls :meth:`read` in its own session.

    Parameters
    ----------
    session_factory : callable returning a Session
        A new session per :meth:`collect`; it is only read from, then closed.
    clock : callable returning an aware datetime, optional
        Now, for the ages of the completeness curve and the label horizons.
    """

    specs: tuple[FamilySpec, ...] = MATURITY_FAMILIES

    def __init__(
        self,
        session_factory: Callable[[], Session],
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__(session_factory)
        self._clock = clock
        self._lock = threading.Lock()
        self._read: dict[Group, Read] = {}

    def read(
        self,
        session: Session,
        models: tuple[ModelRow, ...],
        shard: Shard | None = None,
        exposition_of: ExpositionOf = whole,
    ) -> Series:
        """The samples of :attr:`specs`, by family, read in ``session`` (the stored
        documents only of the windows not read by the previous call)."""
        now = self._clock()
        kept = {m.id: exposition_of(m).kept(names.WINDOW_COMPLETED) for m in models}
        completing = [m for m in models if m.label_missingness != "none"]
        starts = {m.id: [ended_ago(m, now, ago) for ago in AGES.values()] for m in completing}
        cutoffs = {m.id: horizon_cutoff(m, now) for m in models}
        overdue = overdue_windows(session, {k: v for k, v in cutoffs.items() if v is not None})
        with self._lock:
            cached = self._read
        read = read_maturity(session, kept, shard, cached)
        with self._lock:
            self._read = read
        return maturity_series(
            models,
            stored_maturity(read),
            windows_completeness(session, starts),
            overdue,
            now,
        )
