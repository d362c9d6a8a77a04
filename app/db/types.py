"""Column types shared by the tables: UTC timestamps, JSON, numpy arrays as bytes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import JSON, DateTime, Dialect, LargeBinary
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeDecorator

#: JSON document; JSONB on PostgreSQL.
JSONDocument = JSON().with_variant(JSONB(), "postgresql")


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
        return np.ascontiguousarray(arr, dtype=self.dtype).tobytes()

    def process_result_value(self, value: bytes | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        return np.frombuffer(value, dtype=self.dtype)

    def compare_values(self, x: Any, y: Any) -> bool:
        if x is None or y is None:
            return x is y
        return bool(np.array_equal(np.asarray(x), np.asarray(y)))


class Int64Array(_NumpyArray):
    """int64 counts (histograms), stored as ``<i8`` bytes."""

    dtype = np.dtype("<i8")
    cache_ok = True


class Int32Array(_NumpyArray):
    """int32 values (sparse bin indices), stored as ``<i4`` bytes."""

    dtype = np.dtype("<i4")
    cache_ok = True


class Float64Array(_NumpyArray):
    """float64 values (bin edges), stored as ``<f8`` bytes."""

    dtype = np.dtype("<f8")
    cache_ok = True
