"""Housekeeping: batch rows past the idempotency retention go; counts and recent keys stay."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import orjson
import sqlalchemy as sa
from _worker_support import fold_pending, register_model, session_factory_for, utcnow
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db.models import Batch
from app.exporter.reads import read_models
from app.services.ingest.batch import ingest_batch
from app.services.models.config import ModelConfig
from app.worker.jobs import DatabaseJobs

AT = utcnow()


def _post(factory: sessionmaker[Session], model: ModelConfig, settings: Settings, key: str) -> bool:
    """Post one 10-row batch with ``key`` (the same body for the same key); True on a replay."""
    rng = np.random.default_rng(int.from_bytes(key.encode(), "little"))
    body = {
        "timestamp": AT.isoformat(),
        "scores": rng.random(10).tolist(),
        "labels": (rng.random(10) < 0.5).astype(int).tolist(),
    }
    with factory() as session:
        outcome = ingest_batch(
            session,
            model,
            orjson.dumps(body),
            idempotency_key=key,
            settings=settings,
            now=utcnow(),
        )
    return outcome.replayed


def test_housekeeping_deletes_only_batches_past_the_retention(
    database_url: str, settings: Settings
) -> None:
    with session_factory_for(database_url) as factory:
        model = register_model(factory)
        for key in ("old-1", "old-2", "new-1"):
            assert not _post(factory, model, settings, key)
        with factory() as session, session.begin():
            session.execute(
                sa.update(Batch)
                .where(Batch.idempotency_key.like("old-%"))
                .values(received_at=utcnow() - timedelta(hours=25))
            )
        fold_pending(database_url)
        jobs = DatabaseJobs(factory, lease_seconds=30, batch_retention_hours=24)
        assert jobs.housekeeping() == 2
        with factory() as session:
            keys = session.scalars(sa.select(Batch.idempotency_key)).all()
            (counted,) = read_models(session)
        assert keys == ["new-1"]
        assert (counted.batches, counted.rows) == (3, 30)  # the counts outlive the rows
        assert _post(factory, model, settings, "new-1")  # a key within the retention replays
        assert jobs.housekeeping() == 0
