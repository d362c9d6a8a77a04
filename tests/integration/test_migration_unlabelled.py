"""Migration 0003 (unlabelled rows) over data written through the old schema (SQLite, Postgres)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from alembic import command

from app.db.migrate import alembic_config, upgrade_to_head

T0 = datetime(2026, 11, 20, 10, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def old_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at revision 0002 holding a model, a batch, an aggregate and its result."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        url = request.getfixturevalue("empty_postgres_url")
    command.upgrade(alembic_config(url), "0002")
    engine = sa.create_engine(url)
    hist = np.arange(4, dtype="<i8").tobytes()
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                'INSERT INTO model (id, name, "window", thresholds, pi0, segments, sla, drift,'
                " n_bins, bin_edges, created_at, updated_at) VALUES (1, 'm', '1h', '[0.5]', 0.1,"
                " '[]', '[]', '{}', 4, :edges, :t, :t)"
            ),
            {"edges": np.linspace(0, 1, 5).astype("<f8").tobytes(), "t": T0},
        )
        conn.execute(
            sa.text(
                "INSERT INTO batch (model_id, id, request_hash, kind, event_at, window_start, n,"
                " positives, response, received_at) VALUES (1, :id, 'h', 'histogram', :t, :t, 6,"
                " 2, '{}', :t)"
            ),
            {"id": "00000000-0000-0000-0000-000000000001", "t": T0},
        )
        conn.execute(
            sa.text(
                "INSERT INTO window_aggregate (model_id, segment, window_start, n, positives,"
                " hist_positives, hist_negatives, confusion, version, dirty, created_at,"
                " updated_at) VALUES (1, '*', :t, 6, 2, :h, :h, '[]', 1, false, :t, :t)"
            ),
            {"t": T0, "h": hist},
        )
        conn.execute(
            sa.text(
                "INSERT INTO window_metrics (model_id, segment, window_start, aggregate_version,"
                " computed_at, status, metrics) VALUES (1, '*', :t, 1, :t, 'fresh', '{}')"
            ),
            {"t": T0},
        )
    engine.dispose()
    yield url


def _one(url: str, sql: str) -> sa.Row[object]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(sql)).one()
    finally:
        engine.dispose()


def test_upgrade_keeps_the_data_with_no_unlabelled_rows(old_url: str) -> None:
    upgrade_to_head(old_url)
    assert tuple(_one(old_url, "SELECT n, positives, unlabelled FROM batch")) == (6, 2, 0)
    row = _one(
        old_url, "SELECT n, n_unlabelled, hist_unlabelled, hist_positives FROM window_aggregate"
    )
    assert (row[0], row[1], row[2]) == (6, 0, None)
    assert np.frombuffer(row[3], dtype="<i8").tolist() == [0, 1, 2, 3]
    assert tuple(_one(old_url, "SELECT status, estimate FROM window_metrics")) == ("fresh", None)

    engine = sa.create_engine(old_url)
    insert = sa.text(
        "INSERT INTO batch (model_id, id, request_hash, kind, event_at, window_start, n,"
        " positives, unlabelled, response, received_at) VALUES (1, :id, 'h', 'scores', :t, :t,"
        " :n, 0, :u, '{}', :t)"
    )
    try:
        with engine.begin() as conn:  # an unlabelled batch is now storable
            conn.execute(
                insert, {"id": "00000000-0000-0000-0000-000000000002", "t": T0, "n": 0, "u": 5}
            )
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # an empty one is not
            conn.execute(
                insert, {"id": "00000000-0000-0000-0000-000000000003", "t": T0, "n": 0, "u": 0}
            )
    finally:
        engine.dispose()

    command.downgrade(alembic_config(old_url), "0002")  # drops what the old schema cannot hold
    assert tuple(_one(old_url, "SELECT count(*), sum(n) FROM batch")) == (1, 6)
    upgrade_to_head(old_url)
    assert tuple(_one(old_url, "SELECT count(*), sum(unlabelled) FROM batch")) == (1, 0)
