"""The worker's cache of summed drift references, keyed by the versions of their windows.

A window's drift reference is the sum of the reference period's windows of
the same segment (:func:`app.services.windows.reference.reference_period`),
each completed first where it is partially labelled
(:func:`app.services.windows.maturity.reference_window`).
It changes only when one of those windows gets a batch (its version moves),
so the versions identify the sum exactly and a worker reads and sums a
reference's rows only when it changed. See :class:`ReferenceCache`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt
from sqlalchemy import Row, Select, Table, and_, bindparam, or_, select
from sqlalchemy.orm import Session

from app.db.models import WindowAggregate
from app.db.session import BINARY_RESULTS
from app.maturity import ASSUMPTIONS
from app.services.models.config import ModelConfig
from app.services.windows.maturity import reference_window
from app.services.windows.sums import AggregateRow, WindowSums

REFERENCE_CACHE_MB = 256.0
"""Default bound of a :class:`ReferenceCache` (the worker setting ``reference_cache_mb``)."""

READ_AHEAD_WINDOWS = 64
"""Most windows whose rows :meth:`ReferenceCache.versions_read` reads for a group (about
15 MB at 10,000 bins); the references past it are read by their own :meth:`get`, as
is a longer one, so that long fixed reference periods are not all held at once."""

Period = tuple[int, str, datetime, datetime]
"""(model id, segment, start, end) of a drift reference period."""


class ReferenceCache:
    """Summed reference periods, keyed by the (start, version) of every window in them.

    A reference changes only when one of its windows gets a batch (its version
    moves), so the key identifies the sum exactly. Most windows of a model
    with a fixed reference period share one sum; in a fleet whose reference
    is the previous window, each window has its own, reused at every refresh
    of the window until the previous one changes. Entries are stored compactly
    (each histogram as its non-empty bins) and the least recently used are
    dropped once they hold more than ``max_bytes``.

    :meth:`versions_read` reads the versions of a group's references in one
    query, and the rows of the references not cached in one more; :meth:`get`
    uses them (else it reads its own versions, and the rows of a missing sum,
    with the columns it needs). A group of windows thus reads its references
    in two statements, not two per window.
    """

    def __init__(self, max_bytes: float = REFERENCE_CACHE_MB * 2**20) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0
        """Bytes held by the entries (:func:`entry_bytes`)."""
        self._entries: OrderedDict[tuple[Any, ...], tuple[_Packed | None, int]] = OrderedDict()
        self._versions: dict[Period, tuple[tuple[datetime, int], ...]] = {}
        self._loaded: dict[Period, list[Row[Any]]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    @contextmanager
    def versions_read(self, session: Session, periods: Iterable[Period | None]) -> Iterator[None]:
        """Read the window versions of several reference periods in one query, and the
        rows of those whose sums are not cached in one more (up to
        :data:`READ_AHEAD_WINDOWS` windows); inside the block, the first :meth:`get` of
        each period uses them instead of its own queries."""
        wanted = list(dict.fromkeys(p for p in periods if p is not None))
        found: dict[Period, list[tuple[datetime, int]]] = {p: [] for p in wanted}
        for p, row in _rows_by_period(session, wanted, "versions"):
            found[p].append((row.window_start, int(row.version)))
        self._versions = {p: tuple(v) for p, v in found.items()}
        missing = _within(
            [p for p in wanted if not self._cached(_key(p, self._versions[p]))],
            self._versions,
        )
        loaded: dict[Period, list[Row[Any]]] = {p: [] for p in missing}
        for p, row in _rows_by_period(session, missing, "sums"):
            loaded[p].append(row)
        self._loaded = loaded
        try:
            yield
        finally:
            self._versions = {}
            self._loaded = {}

    def _cached(self, key: tuple[Any, ...]) -> bool:
        """A sum of these versions is cached, under any ``label_missingness`` (an entry's
        key ends with the setting: the windows are completed under it)."""
        return any((*key, m) in self._entries for m in ASSUMPTIONS)

    def get(
        self, session: Session, model: ModelConfig, segment: str, start: datetime, end: datetime
    ) -> WindowSums | None:
        """The sum of the windows of (model, segment) starting in [start, end), or None."""
        period = (model.id, segment, start, end)
        versions = self._versions.pop(period, None)
        if versions is None:
            read = _rows_by_period(session, [period], "versions")
            versions = tuple((row.window_start, int(row.version)) for _, row in read)
        key = (*_key(period, versions), model.label_missingness)
        if key in self._entries:
            self._entries.move_to_end(key)
            packed = self._entries[key][0]
            return None if packed is None else packed.unpack()
        rows = self._loaded.pop(period, None)
        if rows is None:
            rows = [row for _, row in _rows_by_period(session, [period], "sums")]
        total = WindowSums.merge(reference_window(model, WindowSums.from_row(row)) for row in rows)
        packed = None if total is None else _Packed.of(total)
        size = entry_bytes(len(versions), packed)
        self._entries[key] = (packed, size)
        self.nbytes += size
        while self.nbytes > self.max_bytes and self._entries:
            self.nbytes -= self._entries.popitem(last=False)[1][1]
        return total


def _within(
    periods: list[Period], versions: dict[Period, tuple[tuple[datetime, int], ...]]
) -> list[Period]:
    """``periods`` in order, each kept while they hold at most :data:`READ_AHEAD_WINDOWS`
    windows in all (a period that would pass the bound is left out)."""
    kept, windows = [], 0
    for p in periods:
        if windows + len(versions[p]) <= READ_AHEAD_WINDOWS:
            kept.append(p)
            windows += len(versions[p])
    return kept


def _key(period: Period, versions: tuple[tuple[datetime, int], ...]) -> tuple[Any, ...]:
    """A cache key: the period's model and segment with the (start, version) of its
    windows (a model's bins are fixed at creation, so the model fixes the arrays' size)."""
    return (period[0], period[1], versions)


def _rows_by_period(
    session: Session, periods: list[Period], columns: Columns
) -> Iterator[tuple[Period, Row[Any]]]:
    """The rows of the windows in ``periods`` (one statement, in key order; ``columns``:
    their keys with their versions, of the windows that hold data, or with their sums),
    each with every period that holds it (the periods of one segment may overlap)."""
    if not periods:
        return
    series: dict[tuple[int, str], list[Period]] = {}
    params: dict[str, Any] = {}
    for k, p in enumerate(periods):
        series.setdefault((p[0], p[1]), []).append(p)
        params |= dict(zip((f"model{k}", f"segment{k}", f"start{k}", f"end{k}"), p, strict=True))
    rows = session.connection().execute(
        _periods_statement(columns, len(periods)), params, execution_options=BINARY_RESULTS
    )
    for row in rows:
        for p in series[(row.model_id, row.segment)]:
            if p[2] <= row.window_start < p[3]:
                yield p, row


ENTRY_BYTES = 512
"""Bytes counted for an entry besides its arrays (its objects), and per window of its key."""


def entry_bytes(windows: int, packed: _Packed | None) -> int:
    """The size counted for a cache entry of a reference of ``windows`` windows: its
    arrays plus :data:`ENTRY_BYTES` per window and one more (so that entries of empty
    references count too)."""
    return ENTRY_BYTES * (windows + 1) + (0 if packed is None else packed.nbytes)


Columns = Literal["versions", "sums"]
"""What :func:`_rows_by_period` reads of each window besides its key."""

_WA = cast(Table, WindowAggregate.__table__).c
_KEY = (_WA.model_id, _WA.segment, _WA.window_start)
_SUMS = [_WA[name] for name in AggregateRow.__annotations__]
"""The columns :meth:`WindowSums.from_row` reads."""


@lru_cache(maxsize=256)
def _periods_statement(columns: Columns, count: int) -> Select[Any]:
    """The windows of ``count`` periods (parameters ``model<k>``, ``segment<k>``,
    ``start<k>``, ``end<k>``), in key order; built once per shape."""
    periods = or_(
        *(
            and_(
                _WA.model_id == bindparam(f"model{k}"),
                _WA.segment == bindparam(f"segment{k}"),
                _WA.window_start >= bindparam(f"start{k}"),
                _WA.window_start < bindparam(f"end{k}"),
            )
            for k in range(count)
        )
    )
    if columns == "versions":
        return select(*_KEY, _WA.version).where(periods, _WA.version > 0).order_by(*_KEY)
    return select(*_KEY, *_SUMS).where(periods).order_by(*_KEY)


Sparse = tuple[npt.NDArray[np.int32], npt.NDArray[np.int64] | npt.NDArray[np.int32]]


@dataclass(frozen=True)
class _Packed:
    """A WindowSums with its histograms as (indices, counts) of their non-empty bins."""

    sums: WindowSums
    """The sums with the histograms set to None."""
    hists: tuple[Sparse | None, Sparse | None, Sparse | None]
    """hist_positives, hist_negatives, unlabelled."""
    n_bins: int
    nbytes: int

    @classmethod
    def of(cls, sums: WindowSums) -> _Packed:
        arrays = (sums.hist_positives, sums.hist_negatives, sums.unlabelled)
        n_bins = next((a.size for a in arrays if a is not None), 0)
        hists = (_sparse(arrays[0]), _sparse(arrays[1]), _sparse(arrays[2]))
        nbytes = sum(i.nbytes + v.nbytes for h in hists if h is not None for i, v in [h])
        bare = replace(sums, hist_positives=None, hist_negatives=None, unlabelled=None)
        return cls(bare, hists, n_bins, nbytes)

    def unpack(self) -> WindowSums:
        pos, neg, unlabelled = (_dense(h, self.n_bins) for h in self.hists)
        return replace(self.sums, hist_positives=pos, hist_negatives=neg, unlabelled=unlabelled)


def _sparse(counts: npt.NDArray[np.int64] | None) -> Sparse | None:
    if counts is None:
        return None
    index = np.flatnonzero(counts).astype(np.int32)
    values = counts[index]
    small = values.size == 0 or (values.min() >= 0 and values.max() <= np.iinfo(np.int32).max)
    return index, values.astype(np.int32) if small else values


def _dense(sparse: Sparse | None, n_bins: int) -> npt.NDArray[np.int64] | None:
    if sparse is None:
        return None
    out = np.zeros(n_bins, dtype=np.int64)
    out[sparse[0]] = sparse[1]
    return out
