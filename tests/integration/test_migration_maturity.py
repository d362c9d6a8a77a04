"""Migration 0010 (label maturity) over a model and a window result written at 0009, on
SQLite and Postgres: the existing model reads ``label_missingness`` "none" (its windows
are read as before), a model registered after it "class"; down and up keep every row."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from _migration_support import database_at
from _worker_support import register_model, session_factory_for
from alembic import command

from app.db.migrate import alembic_config, upgrade_to_head
from app.services.models.config import ModelConfig
from app.services.models.registry import get_model

T0 = datetime(2026, 11, 20, 10, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def old_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at revision 0009 holding model 1 with a stored window result."""
    url, engine = database_at(request, tmp_path, "0009", T0)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO window_aggregate (model_id, segment, window_start, n, positives,"
                " confusion, version, dirty, created_at, updated_at)"
                " VALUES (1, '*', :t, 6, 2, '[]', 1, false, :t, :t)"
            ),
            {"t": T0},
        )
        conn.execute(
            sa.text(
                "INSERT INTO window_metrics (model_id, segment, window_start, aggregate_version,"
                " computed_at, status, metrics) VALUES (1, '*', :t, 1, :t, 'fresh', '{}')"
            ),
            {"t": T0},
        )
        if engine.dialect.name == "postgresql":  # model 1 was given its id explicitly
            conn.execute(sa.text("SELECT setval(pg_get_serial_sequence('model', 'id'), 1)"))
    engine.dispose()
    yield url


def _columns(engine: sa.Engine, table: str) -> set[str]:
    with engine.connect() as connection:
        return {c["name"] for c in sa.inspect(connection).get_columns(table)}


def test_existing_models_read_none_and_new_ones_class(old_url: str) -> None:
    upgrade_to_head(old_url)
    with session_factory_for(old_url) as factory:
        with factory() as session:
            old = ModelConfig.from_row(get_model(session, "m"))
        assert (old.label_missingness, old.label_horizon) == ("none", None)
        new = register_model(factory, "new", label_horizon="90d")
        assert (new.label_missingness, new.label_horizon) == ("class", "90d")
        engine = factory.kw["bind"]
        with engine.connect() as connection:
            assert connection.scalar(sa.text("SELECT maturity FROM window_metrics")) is None


def test_downgrade_and_upgrade_keep_every_row(old_url: str) -> None:
    upgrade_to_head(old_url)
    with session_factory_for(old_url) as factory:
        register_model(factory, "scored", label_missingness="score")
        engine = factory.kw["bind"]
        command.downgrade(alembic_config(old_url), "0009")
        assert not {"label_missingness", "label_horizon"} & _columns(engine, "model")
        assert "maturity" not in _columns(engine, "window_metrics")
        with engine.connect() as connection:
            assert connection.scalar(sa.text("SELECT count(*) FROM model")) == 2
            assert connection.scalar(sa.text("SELECT count(*) FROM window_metrics")) == 1
        upgrade_to_head(old_url)
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text("SELECT name, label_missingness FROM model ORDER BY name")
            ).all()
        # the downgrade forgot the setting: every model is read as before again
        assert [tuple(r) for r in rows] == [("m", "none"), ("scored", "none")]
