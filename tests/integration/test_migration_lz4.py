"""Migration 0006 (lz4 for the array columns) over data written through 0005: on
PostgreSQL every bytea column gets lz4 where the server has it, stored values read back
identical before and after, and the downgrade gives the columns back to the default."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from _migration_support import database_at
from alembic import command

from app.db.migrate import alembic_config, upgrade_to_head

T0 = datetime(2026, 11, 20, 10, tzinfo=UTC)
N_BINS = 10_000

# every bytea column of the schema, from the catalog
ATTRIBUTES = (
    "SELECT c.relname, a.attname, a.attcompression FROM pg_attribute a"
    " JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = current_schema() AND c.relkind = 'r' AND a.attnum > 0"
    " AND NOT a.attisdropped AND a.atttypid = 'bytea'::regtype"
)
READ = "SELECT hist_positives, hist_negatives FROM window_aggregate ORDER BY window_start"


def _histograms(seed: int) -> tuple[bytes, bytes]:
    """Two histograms of 10,000 bins, as stored (80 KB each: compressed and out of line)."""
    rng = np.random.default_rng(seed)
    positives, negatives = rng.poisson(3.0, (2, N_BINS)).astype("<i8")
    return positives.tobytes(), negatives.tobytes()


def _insert(conn: sa.Connection, start: datetime, seed: int) -> None:
    positives, negatives = _histograms(seed)
    conn.execute(
        sa.text(
            "INSERT INTO window_aggregate (model_id, segment, window_start, n, positives,"
            " hist_positives, hist_negatives, confusion, version, dirty, created_at,"
            " updated_at) VALUES (1, '*', :t, 1, 1, :p, :n, '[]', 1, false, :t, :t)"
        ),
        {"t": start, "p": positives, "n": negatives},
    )


def _lz4_available(engine: sa.Engine) -> bool:
    with engine.connect() as conn:
        try:
            conn.execute(sa.text("CREATE TEMPORARY TABLE probe (x bytea COMPRESSION lz4)"))
        except sa.exc.DBAPIError:
            return False
    return True


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def old_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at revision 0005 holding one window with two large histograms."""
    url, engine = database_at(request, tmp_path, "0005", T0)
    with engine.begin() as conn:
        _insert(conn, T0, seed=1)
    engine.dispose()
    yield url


def test_upgrade_and_downgrade_keep_the_arrays(old_url: str) -> None:
    engine = sa.create_engine(old_url)
    try:
        upgrade_to_head(old_url)
        with engine.begin() as conn:
            assert conn.execute(sa.text(READ)).one() == _histograms(1)
            _insert(conn, T0.replace(hour=11), seed=2)
        command.downgrade(alembic_config(old_url), "0005")
        with engine.connect() as conn:
            assert conn.execute(sa.text(READ)).all() == [_histograms(1), _histograms(2)]
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_array_columns_get_lz4(empty_postgres_url: str) -> None:
    command.upgrade(alembic_config(empty_postgres_url), "0005")
    engine = sa.create_engine(empty_postgres_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    'INSERT INTO model (id, name, "window", thresholds, pi0, segments, sla,'
                    " drift, n_bins, bin_edges, created_at, updated_at) VALUES (1, 'm', '1h',"
                    " '[0.5]', 0.1, '[]', '[]', '{}', 4, :edges, :t, :t)"
                ),
                {"edges": np.linspace(0, 1, 5).astype("<f8").tobytes(), "t": T0},
            )
            _insert(conn, T0, seed=1)
            before = {(t, c): m for t, c, m in conn.execute(sa.text(ATTRIBUTES))}
        assert len(before) == 10 and set(before.values()) == {""}  # the server's default
        lz4 = _lz4_available(engine)
        upgrade_to_head(empty_postgres_url)
        method = "COALESCE(pg_column_compression(hist_positives), '-')"
        with engine.begin() as conn:
            after = {(t, c): m for t, c, m in conn.execute(sa.text(ATTRIBUTES))}
            assert after == {key: "l" if lz4 else "" for key in before}
            # the value written before keeps its method and reads back as it was
            assert conn.execute(sa.text(f"SELECT {method} FROM window_aggregate")).scalar() == (
                "pglz"
            )
            assert conn.execute(sa.text(READ)).one() == _histograms(1)
            _insert(conn, T0.replace(hour=11), seed=2)
            written = conn.execute(
                sa.text(f"SELECT {method} FROM window_aggregate WHERE window_start > :t"),
                {"t": T0},
            ).scalar()
        assert written == ("lz4" if lz4 else "pglz")
        command.downgrade(alembic_config(empty_postgres_url), "0005")
        with engine.connect() as conn:
            assert {(t, c): m for t, c, m in conn.execute(sa.text(ATTRIBUTES))} == before
            assert conn.execute(sa.text(READ)).all() == [_histograms(1), _histograms(2)]
    finally:
        engine.dispose()
