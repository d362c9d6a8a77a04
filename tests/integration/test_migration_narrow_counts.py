"""Migration 0007 (counts stored narrowed): rows written raw before it read the same after
the upgrade; the downgrade gives every narrowed value back as raw int64 bytes, which a
release before it reads, and leaves raw values as they are."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from _migration_support import database_at
from alembic import command

from app.db.migrate import alembic_config, upgrade_to_head
from app.db.types import COUNTS_MAGIC, Int64Array, encode_counts

T0 = datetime(2026, 11, 20, 10, tzinfo=UTC)
RAW = np.array([0, 1, 2, 3], dtype="<i8")
WINDOWS = 1_201
"""Narrowed aggregates written after the upgrade: three pages of the downgrade's reads."""
NARROW = [np.array([5, 0, 300, 2], dtype="<i8"), np.array([1, 70_000, 0, 9], dtype="<i8")]

AGGREGATE = (
    "INSERT INTO window_aggregate (model_id, segment, window_start, n, positives,"
    " hist_positives, hist_negatives, confusion, version, dirty, created_at, updated_at)"
    " VALUES (1, :s, :t, 6, 2, :p, :n, '[]', 1, false, :t, :t)"
)
DELTA = (
    "INSERT INTO batch_delta (model_id, segment, window_start, batch_id, received_at, n,"
    " positives, confusion, bins, bin_positives, bin_negatives) VALUES (1, '*', :t, :b, :t,"
    " 3, 1, :c, :i, :p, :n)"
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def old_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at revision 0006 holding a window stored raw."""
    url, engine = database_at(request, tmp_path, "0006", T0)
    with engine.begin() as conn:
        conn.execute(
            sa.text(AGGREGATE), {"s": "*", "t": T0, "p": RAW.tobytes(), "n": RAW.tobytes()}
        )
    engine.dispose()
    yield url


def _aggregates(conn: sa.Connection) -> list[tuple[bytes, bytes]]:
    rows = conn.execute(
        sa.text(
            "SELECT hist_positives, hist_negatives FROM window_aggregate"
            " ORDER BY segment, window_start"
        )
    )
    return [(bytes(p), bytes(n)) for p, n in rows]


def test_downgrade_widens_what_the_service_narrowed(old_url: str) -> None:
    engine = sa.create_engine(old_url)
    try:
        upgrade_to_head(old_url)
        with engine.begin() as conn:
            assert _aggregates(conn) == [(RAW.tobytes(), RAW.tobytes())]  # untouched
            counts = sa.column("c", Int64Array())  # the raw row reads through the type
            read = sa.select(counts).select_from(
                sa.text("(SELECT hist_positives AS c FROM window_aggregate) AS a")
            )
            assert conn.execute(read).scalar_one().tolist() == RAW.tolist()
            positives, negatives = (encode_counts(a) for a in NARROW)
            conn.execute(  # more rows than the downgrade reads at once
                sa.text(AGGREGATE),
                [
                    {"s": "eu", "t": T0 + timedelta(hours=i), "p": positives, "n": negatives}
                    for i in range(WINDOWS)
                ],
            )
            confusion = encode_counts(np.array([1, -1, 2, 0]))  # -1: a cell not told
            conn.execute(
                sa.text(DELTA),
                {
                    "t": T0,
                    "b": uuid.uuid4().hex,
                    "c": confusion,
                    "i": np.array([0, 2], dtype="<i4").tobytes(),
                    "p": encode_counts(np.array([1, 0])),
                    "n": encode_counts(np.array([0, 2])),
                },
            )
            assert all(v.startswith(COUNTS_MAGIC) for v in _aggregates(conn)[1])

        command.downgrade(alembic_config(old_url), "0006")
        with engine.connect() as conn:
            assert (
                _aggregates(conn)
                == [(RAW.tobytes(), RAW.tobytes())]
                + [(NARROW[0].tobytes(), NARROW[1].tobytes())] * WINDOWS
            )
            delta = conn.execute(
                sa.text("SELECT confusion, bins, bin_positives, bin_negatives FROM batch_delta")
            ).one()
            assert bytes(delta[0]) == np.array([1, -1, 2, 0], dtype="<i8").tobytes()
            assert bytes(delta[1]) == np.array([0, 2], dtype="<i4").tobytes()  # not counts
            assert bytes(delta[2]) == np.array([1, 0], dtype="<i8").tobytes()
            assert bytes(delta[3]) == np.array([0, 2], dtype="<i8").tobytes()
    finally:
        engine.dispose()
