"""The stored form of int64 counts (app/db/types.py): each array in the narrowest width
that holds its largest count, read back exactly; raw int64 bytes of earlier rows still read."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy.dialects import postgresql, sqlite

from app.db.types import COUNTS_MAGIC, Int64Array, decode_counts, encode_counts

HEADER = len(COUNTS_MAGIC) + 1


@pytest.mark.parametrize(
    ("largest", "width"),
    [
        (0, 1),
        (255, 1),
        (256, 2),
        (65_535, 2),
        (65_536, 4),
        (2**32 - 1, 4),
        (2**32, 8),
        (2**53, 8),
        (2**63 - 1, 8),
    ],
)
def test_counts_take_the_narrowest_width_that_holds_the_largest(largest: int, width: int) -> None:
    counts = np.array([0, 3, largest, 1], dtype=np.int64)
    stored = encode_counts(counts)
    assert stored[: len(COUNTS_MAGIC)] == COUNTS_MAGIC and stored[len(COUNTS_MAGIC)] == width
    assert len(stored) == HEADER + counts.size * width
    back = decode_counts(stored)
    assert back.dtype == np.int64 and back.tolist() == counts.tolist()


@pytest.mark.parametrize("values", [[-1, 7], [-(2**63), 2**63 - 1], []])
def test_negative_and_empty_arrays_round_trip(values: list[int]) -> None:
    counts = np.array(values, dtype=np.int64)
    back = decode_counts(encode_counts(counts))
    assert back.dtype == np.int64 and back.tolist() == values


def test_random_histograms_round_trip_exactly() -> None:
    rng = np.random.default_rng(17)
    for scale in (0.5, 40.0, 3e3, 1e6, 1e11):
        counts = rng.poisson(scale, 10_000).astype(np.int64)
        assert np.array_equal(decode_counts(encode_counts(counts)), counts)


def test_a_sparse_histogram_of_10_000_bins_takes_an_eighth_of_its_raw_size() -> None:
    counts = np.zeros(10_000, dtype=np.int64)
    counts[np.random.default_rng(3).integers(0, 10_000, 3_000)] += 1
    assert len(encode_counts(counts)) == HEADER + 10_000 < counts.nbytes // 7


def test_raw_int64_bytes_of_earlier_rows_still_read() -> None:
    counts = np.array([0, 5, 2**40, 12], dtype="<i8")
    back = decode_counts(counts.tobytes())
    assert back.dtype == np.int64 and back.tolist() == counts.tolist()


def test_arrays_read_back_are_read_only_in_every_width() -> None:
    for counts in (np.array([1, 2]), np.array([1, 2**40]), np.array([0, 3])):
        back = decode_counts(encode_counts(counts))
        with pytest.raises(ValueError, match="read-only"):
            back[0] = 9
    with pytest.raises(ValueError, match="read-only"):
        decode_counts(np.array([1, 2], dtype="<i8").tobytes())[0] = 9


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect()])
def test_the_column_type_stores_and_reads_the_narrowed_form(dialect: object) -> None:
    column = Int64Array()
    counts = np.array([4, 0, 300], dtype=np.int64)
    stored = column.process_bind_param(counts, dialect)  # type: ignore[arg-type]
    assert stored == encode_counts(counts)
    assert column.process_result_value(stored, dialect).tolist() == [4, 0, 300]  # type: ignore[arg-type,union-attr]
    assert column.process_bind_param(None, dialect) is None  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one-dimensional"):
        column.process_bind_param(np.zeros((2, 2)), dialect)  # type: ignore[arg-type]
