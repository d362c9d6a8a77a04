"""Migration 0009 (``model.retention``, AUTOINCREMENT model ids on SQLite): down and up
again, no row of a model is lost; a deleted model's id is not given again."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import sqlalchemy as sa
from _worker_support import post_batch, register_model, session_factory_for, utcnow
from alembic import command

from app.config import Settings
from app.db import retention as db_retention
from app.db.migrate import alembic_config, upgrade_to_head
from app.db.session import write_transaction


def _counts(engine: sa.Engine) -> dict[str, int]:
    with engine.connect() as connection:
        return {
            t: int(connection.scalar(sa.text(f"SELECT count(*) FROM {t}")))
            for t in ("model", "batch", "batch_delta", "window_aggregate")
        }


def test_downgrade_and_upgrade_keep_every_row(database_url: str, settings: Settings) -> None:
    with session_factory_for(database_url) as factory:
        model = register_model(factory, retention="90d")
        post_batch(
            factory, model, settings, at=utcnow() - timedelta(hours=1), rng=np.random.default_rng(1)
        )
        engine = factory.kw["bind"]
        before = _counts(engine)
        assert before["batch_delta"] == 1
        command.downgrade(alembic_config(database_url), "0008")
        with engine.connect() as connection:
            assert "retention" not in {
                c["name"] for c in sa.inspect(connection).get_columns("model")
            }
        assert _counts(engine) == before
        upgrade_to_head(database_url)
        assert _counts(engine) == before
        with engine.connect() as connection:
            assert connection.scalar(sa.text("SELECT retention FROM model")) is None


def test_a_deleted_model_id_is_never_given_again(database_url: str) -> None:
    with session_factory_for(database_url) as factory:
        first = register_model(factory, "first")
        last = register_model(factory, "last")
        with factory() as session, write_transaction(session):
            assert db_retention.delete_model(session, last.id)
        again = register_model(factory, "last")
        assert again.id > last.id > first.id
