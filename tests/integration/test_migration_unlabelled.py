"""Migration 0004 (unlabelled rows) over data written through its predecessor 0003 (batch
deltas), on SQLite and Postgres."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from _migration_support import database_at
from alembic import command

from app.db.migrate import alembic_config, upgrade_to_head

T0 = datetime(2026, 11, 20, 10, tzinfo=UTC)
T1 = T0 + timedelta(hours=1)
T2 = T0 + timedelta(hours=2)
CONFUSION = np.array([1, 0, 0, 2], dtype="<i8").tobytes()
INSERT_DELTA = sa.text(
    "INSERT INTO batch_delta (model_id, segment, window_start, batch_id, received_at, n,"
    " positives, confusion) VALUES (1, '*', :t, :id, :t, :n, :p, :c)"
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def old_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at revision 0003 holding a model, a folded batch (aggregate and result)
    and an unfolded one (its delta, in a window whose aggregate is still empty)."""
    url, engine = database_at(request, tmp_path, "0003", T0)
    hist = np.arange(4, dtype="<i8").tobytes()
    with engine.begin() as conn:
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
        conn.execute(
            sa.text(
                "INSERT INTO batch (model_id, id, request_hash, kind, event_at, window_start, n,"
                " positives, response, received_at) VALUES (1, :id, 'h', 'scores', :t, :t, 3,"
                " 1, '{}', :t)"
            ),
            {"id": "00000000-0000-0000-0000-000000000004", "t": T1},
        )
        conn.execute(
            sa.text(
                "INSERT INTO window_aggregate (model_id, segment, window_start, n, positives,"
                " confusion, version, dirty, created_at, updated_at) VALUES (1, '*', :t, 0, 0,"
                " '[]', 0, false, :t, :t)"
            ),
            {"t": T1},
        )
        delta = {"t": T1, "id": "00000000-0000-0000-0000-000000000004", "n": 3, "p": 1}
        conn.execute(INSERT_DELTA, {**delta, "c": CONFUSION})
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
    assert tuple(_one(old_url, "SELECT n, positives, unlabelled FROM batch WHERE n = 6")) == (
        6,
        2,
        0,
    )
    row = _one(
        old_url,
        "SELECT n, n_unlabelled, hist_unlabelled, hist_positives FROM window_aggregate WHERE n = 6",
    )
    assert (row[0], row[1], row[2]) == (6, 0, None)
    assert np.frombuffer(row[3], dtype="<i8").tolist() == [0, 1, 2, 3]
    assert tuple(_one(old_url, "SELECT status, estimate FROM window_metrics")) == ("fresh", None)
    delta = _one(old_url, "SELECT n, positives, n_unlabelled, bin_unlabelled FROM batch_delta")
    assert tuple(delta) == (3, 1, 0, None)  # the unfolded delta has no unlabelled rows

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
            conn.execute(  # and so is its delta, in a window of unlabelled rows only
                sa.text(
                    "INSERT INTO window_aggregate (model_id, segment, window_start, n, positives,"
                    " confusion, version, dirty, created_at, updated_at) VALUES (1, '*', :t, 0,"
                    " 0, '[]', 0, false, :t, :t)"
                ),
                {"t": T2},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO batch_delta (model_id, segment, window_start, batch_id,"
                    " received_at, n, positives, confusion, bins, n_unlabelled, bin_unlabelled)"
                    " VALUES (1, '*', :t, :id, :t, 0, 0, :c, :b, 5, :u)"
                ),
                {
                    "t": T2,
                    "id": "00000000-0000-0000-0000-000000000002",
                    "c": np.zeros(4, dtype="<i8").tobytes(),
                    "b": np.array([1, 3], dtype="<i4").tobytes(),
                    "u": np.array([2, 3], dtype="<i8").tobytes(),
                },
            )
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # an empty one is not
            conn.execute(
                insert, {"id": "00000000-0000-0000-0000-000000000003", "t": T0, "n": 0, "u": 0}
            )
    finally:
        engine.dispose()

    command.downgrade(alembic_config(old_url), "0003")  # drops what the old schema cannot hold
    assert tuple(_one(old_url, "SELECT count(*), sum(n) FROM batch")) == (2, 9)
    # the unlabelled delta and its window go; the labelled delta and its (empty) aggregate stay
    assert tuple(_one(old_url, "SELECT count(*), sum(n) FROM batch_delta")) == (1, 3)
    assert tuple(_one(old_url, "SELECT count(*), sum(n) FROM window_aggregate")) == (2, 6)
    upgrade_to_head(old_url)
    assert tuple(_one(old_url, "SELECT count(*), sum(unlabelled) FROM batch")) == (2, 0)
    assert tuple(_one(old_url, "SELECT count(*), sum(n_unlabelled) FROM batch_delta")) == (1, 0)
