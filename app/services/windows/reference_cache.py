"""The worker's cache of summed drift references, keyed by the versions of their windows.

A window's drift reference is the sum of the reference period's windows of
the same segment (:func:`app.services.windows.reference.baseline_period`),
each completed first where it is partially labelled
(:func:`app.services.windows.maturity.reference_window`).
It changes only when one of those windows gets a batch (its version moves),
so the versions identify the sum exactly and a worker reads and sums a
reference's rows only when it changed. See :class:`ReferenceCache`; the rows
come from a :class:`PeriodRows` (``app.db.references.ReferenceRows`` reads them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from app.maturity import ASSUMPTIONS
from app.services.models.config import ModelConfig
from app.services.windows.maturity import reference_window
from app.services.windows.sums import WindowSums

REFERENCE_CACHE_MB = 256.0
"""Default bound of a :class:`ReferenceCache` (the worker setting ``reference_cache_mb``)."""

READ_AHEAD_WINDOWS = 64
"""Most windows whose rows :meth:`ReferenceCache.versions_read` reads for a group (about
15 MB at 10,000 bins); the references past it are read by their own :meth:`get`, as
is a longer one, so that long fixed reference periods are not all held at once."""

Period = tuple[int, str, datetime, datetime]
"""(model id, segment, start, end) of a drift reference period."""


_Versions = dict[Period, tuple[tuple[datetime, int], ...]]
"""The (start, version) of the windows holding data of each period."""
_Rows = dict[Period, list[Any]]
"""The rows read of each period."""


def _wanted(periods: Iterable[Period | None]) -> list[Period]:
    return list(dict.fromkeys(p for p in periods if p is not None))


class PeriodRows(Protocol):
    """Reads the windows of reference periods, in key order, one statement per call,
    each row with every period that holds it (the periods of a segment may overlap)."""

    def versions(self, periods: Sequence[Period]) -> Iterator[tuple[Period, Any]]:
        """Rows with the ``window_start`` and ``version`` of the windows that hold data."""
        ...

    def sums(self, periods: Sequence[Period]) -> Iterator[tuple[Period, Any]]:
        """Rows with the ``window_start`` and the sums of every window
        (what :meth:`WindowSums.from_row` reads)."""
        ...


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
        self._versions: _Versions = {}
        self._loaded: _Rows = {}
        self._ahead: tuple[list[Period], _Versions, _Rows] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def read_ahead(self, read: PeriodRows, periods: Iterable[Period | None]) -> None:
        """Read what :meth:`versions_read` reads for these periods now, in the caller's
        transaction (the worker's claim), for the next :meth:`versions_read` of the
        same periods. Safe to read early: a reference whose window changes after the
        read gets its dependents marked for recomputation, which fences out their
        claims (app/db/queue.py)."""
        wanted = _wanted(periods)
        self._ahead = (wanted, *self._read(read, wanted))

    @contextmanager
    def versions_read(self, read: PeriodRows, periods: Iterable[Period | None]) -> Iterator[None]:
        """Read the window versions of several reference periods in one query, and the
        rows of those whose sums are not cached in one more (up to
        :data:`READ_AHEAD_WINDOWS` windows); inside the block, the first :meth:`get` of
        each period uses them instead of its own queries. What :meth:`read_ahead`
        read for the same periods is used instead (no query)."""
        wanted = _wanted(periods)
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == wanted:
            self._versions, self._loaded = ahead[1], ahead[2]
        else:
            self._versions, self._loaded = self._read(read, wanted)
        try:
            yield
        finally:
            self._versions = {}
            self._loaded = {}

    def _read(self, read: PeriodRows, wanted: list[Period]) -> tuple[_Versions, _Rows]:
        """The versions of ``wanted`` and the rows of those whose sums are not cached."""
        found: dict[Period, list[tuple[datetime, int]]] = {p: [] for p in wanted}
        for p, row in read.versions(wanted):
            found[p].append((row.window_start, int(row.version)))
        versions = {p: tuple(v) for p, v in found.items()}
        missing = _within([p for p in wanted if not self._cached(_key(p, versions[p]))], versions)
        loaded: _Rows = {p: [] for p in missing}
        for p, row in read.sums(missing):
            loaded[p].append(row)
        return versions, loaded

    def _cached(self, key: tuple[Any, ...]) -> bool:
        """A sum of these versions is cached, under any ``label_missingness`` (an entry's
        key ends with the setting: the windows are completed under it)."""
        return any((*key, m) in self._entries for m in ASSUMPTIONS)

    def get(
        self, read: PeriodRows, model: ModelConfig, segment: str, start: datetime, end: datetime
    ) -> WindowSums | None:
        """The sum of the windows of (model, segment) starting in [start, end), or None."""
        period = (model.id, segment, start, end)
        versions = self._versions.pop(period, None)
        if versions is None:
            found = read.versions([period])
            versions = tuple((row.window_start, int(row.version)) for _, row in found)
        key = (*_key(period, versions), model.label_missingness)
        if key in self._entries:
            self._entries.move_to_end(key)
            packed = self._entries[key][0]
            return None if packed is None else packed.unpack()
        rows = self._loaded.pop(period, None)
        if rows is None:
            rows = [row for _, row in read.sums([period])]
        total = WindowSums.merge(reference_window(model, WindowSums.from_row(row)) for row in rows)
        packed = None if total is None else _Packed.of(total)
        size = entry_bytes(len(versions), packed)
        self._entries[key] = (packed, size)
        self.nbytes += size
        while self.nbytes > self.max_bytes and self._entries:
            self.nbytes -= self._entries.popitem(last=False)[1][1]
        return total


def _within(periods: list[Period], versions: _Versions) -> list[Period]:
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


ENTRY_BYTES = 512
"""Bytes counted for an entry besides its arrays (its objects), and per window of its key."""


def entry_bytes(windows: int, packed: _Packed | None) -> int:
    """The size counted for a cache entry of a reference of ``windows`` windows: its
    arrays plus :data:`ENTRY_BYTES` per window and one more (so that entries of empty
    references count too)."""
    return ENTRY_BYTES * (windows + 1) + (0 if packed is None else packed.nbytes)


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
