"""Column types shared by the tables: UTC timestamps, JSON, numpy arrays as bytes."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
from sqlalchemy import JSON, DateTime, Dialect, LargeBinary
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeDecorator

#: JSON document; JSONB on PostgreSQL.
JSONDocument = JSON().with_variant(JSONB(), "postgresql")


def json_text(value: Any) -> str:
    """The JSON text a :data:`JSONDocument` column stores (the engines' serializer).

    orjson's text: the same JSON value as the standard library's
    ``json.dumps`` (without its spaces), about 15 times faster on a window's
    documents (docs/worker.md, "What a window stores"). Where orjson would
    not give the standard library's value, the standard library writes it, so
    every document is stored as before: a type orjson refuses (a numpy
    scalar, a key that is not a string, an integer past 64 bits) and a
    non-finite float, which orjson writes ``null`` and the standard library
    ``NaN``/``Infinity`` (which PostgreSQL refuses, as it did). A non-finite
    float shows in orjson's text as ``null``, so only a text holding one
    is searched for them.

    >>> json_text({"auc_roc": 0.5, "f1": None, "curve": [0.1, 1e-05]})
    '{"auc_roc":0.5,"f1":null,"curve":[0.1,0.00001]}'
    >>> json_text({"prior": float("nan")})
    '{"prior": NaN}'
    """
    try:
        text = orjson.dumps(value)
    except TypeError:
        return json.dumps(value)
    if b"null" in text and not _finite(value):
        return json.dumps(value)
    return text.decode()


def _finite(value: Any) -> bool:
    """No non-finite float anywhere in ``value`` (dicts, lists and tuples searched)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(map(_finite, value.values()))
    if isinstance(value, list | tuple):
        return all(map(_finite, value))
    return True


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC ``datetime`` on every backend.

    PostgreSQL stores ``timestamptz``. SQLite has no time zones: values are
    stored as naive UTC text and come back with ``tzinfo=UTC``. Naive values
    are refused on the way in, so a local time can never be stored by mistake.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: store timezone-aware UTC values")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class _NumpyArray(TypeDecorator[npt.NDArray[Any]]):
    """A one-dimensional numpy array stored as little-endian bytes.

    The round trip is exact (no text conversion), so stored counts merge
    exactly by addition. Arrays read back are read-only; build a new array to
    change a value.
    """

    impl = LargeBinary
    cache_ok = True
    dtype: np.dtype[Any]

    def process_bind_param(self, value: Any, dialect: Dialect) -> bytes | None:
        if value is None:
            return None
        arr = np.asarray(value)
        if arr.ndim != 1:
            raise ValueError(f"expected a one-dimensional array, got shape {arr.shape}")
        return self.encode(arr)

    def process_result_value(self, value: bytes | None, dialect: Dialect) -> Any:
        return None if value is None else self.decode(value)

    def encode(self, arr: npt.NDArray[Any]) -> bytes:
        """The stored bytes of a one-dimensional array."""
        return np.ascontiguousarray(arr, dtype=self.dtype).tobytes()

    def decode(self, value: bytes) -> npt.NDArray[Any]:
        """The (read-only) array of stored bytes."""
        return np.frombuffer(value, dtype=self.dtype)

    def compare_values(self, x: Any, y: Any) -> bool:
        if x is None or y is None:
            return x is y
        return bool(np.array_equal(np.asarray(x), np.asarray(y)))


COUNTS_MAGIC = b"\xff" * 8
"""The first 8 bytes of a narrowed array of counts: -1 as a little-endian int64, which
no raw array of counts starts with (counts are not negative)."""

_WIDTHS = {code: np.dtype(name) for code, name in ((1, "<u1"), (2, "<u2"), (4, "<u4"), (8, "<i8"))}


def encode_counts(arr: npt.NDArray[Any]) -> bytes:
    """int64 counts as bytes: the magic, one byte of width, then each count in the
    narrowest of 1, 2, 4 or 8 bytes that holds the largest (8: signed, for any value).

    The counts of a histogram are mostly small: at 10,000 bins a window of a
    few thousand rows takes 10 KB instead of 80 KB, which is what a fold reads
    and writes back (and what PostgreSQL sends hex-encoded, at twice the size).
    """
    counts = np.asarray(arr, dtype=np.int64)
    width = 8
    if counts.size and int(counts.min()) >= 0:
        top = int(counts.max())
        width = next(w for w in (1, 2, 4, 8) if w == 8 or top < 1 << (8 * w))
    return COUNTS_MAGIC + bytes((width,)) + counts.astype(_WIDTHS[width], copy=False).tobytes()


def decode_counts(value: bytes) -> npt.NDArray[np.int64]:
    """The int64 array of :func:`encode_counts`, or of raw ``<i8`` bytes (the form
    before the narrowing; such a value is rewritten narrowed by its next write)."""
    if not value.startswith(COUNTS_MAGIC):
        return np.frombuffer(value, dtype="<i8")
    dtype = _WIDTHS[value[len(COUNTS_MAGIC)]]
    counts = np.frombuffer(value, dtype=dtype, offset=len(COUNTS_MAGIC) + 1)
    if dtype.itemsize == 8:
        return counts
    wide = counts.astype(np.int64)
    wide.flags.writeable = False
    return wide


class Int64Array(_NumpyArray):
    """int64 counts (histograms, confusion cells), stored narrowed (:func:`encode_counts`)."""

    dtype = np.dtype("<i8")
    cache_ok = True

    def encode(self, arr: npt.NDArray[Any]) -> bytes:
        return encode_counts(arr)

    def decode(self, value: bytes) -> npt.NDArray[Any]:
        return decode_counts(value)


class Int32Array(_NumpyArray):
    """int32 values (sparse bin indices), stored as ``<i4`` bytes."""

    dtype = np.dtype("<i4")
    cache_ok = True


class Float64Array(_NumpyArray):
    """float64 values (bin edges), stored as ``<f8`` bytes."""

    dtype = np.dtype("<f8")
    cache_ok = True
