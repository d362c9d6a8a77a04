"""Helpers of the migration tests: a database at an old revision holding one model."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from alembic import command

from app.db.migrate import alembic_config


def database_at(
    request: pytest.FixtureRequest, tmp_path: Path, revision: str, created_at: datetime
) -> tuple[str, sa.Engine]:
    """A database (``request.param``: "sqlite" or "postgres") migrated to ``revision``
    holding model 1 (window 1h, threshold 0.5, 4 bins); returns its URL and an engine
    the caller disposes of."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        url = request.getfixturevalue("empty_postgres_url")
    command.upgrade(alembic_config(url), revision)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                'INSERT INTO model (id, name, "window", thresholds, pi0, segments, sla, drift,'
                " n_bins, bin_edges, created_at, updated_at) VALUES (1, 'm', '1h', '[0.5]', 0.1,"
                " '[]', '[]', '{}', 4, :edges, :t, :t)"
            ),
            {"edges": np.linspace(0, 1, 5).astype("<f8").tobytes(), "t": created_at},
        )
    return url, engine
