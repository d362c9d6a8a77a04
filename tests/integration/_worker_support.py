"""Helpers of the worker's integration tests: models and batches through the real services."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import orjson
import sqlalchemy as sa
from builders import sample
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db.models import Model, WindowAggregate, WindowMetrics
from app.db.session import make_engine, make_session_factory
from app.services.ingest.batch import ingest_batch
from app.services.models.config import ModelConfig
from app.services.models.registry import create_model
from app.services.models.settings import ModelCreate
from app.services.refresh.groups import (
    ClaimedWindow,
    Computed,
    Outcome,
    claim_windows,
    persist_group,
)
from app.services.windows.compute import WindowResult
from app.timegrid import window_length, window_start

TEST_N_BINS = 500
"""Fewer bins than the default: the tests are about the protocol, not the resolution."""


def utcnow() -> datetime:
    return datetime.now(UTC)


@contextmanager
def session_factory_for(url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(url, Settings(_env_file=None, database_url=url))  # type: ignore[call-arg]
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()


def register_model(
    factory: sessionmaker[Session], name: str = "fraud", **fields: Any
) -> ModelConfig:
    body: dict[str, Any] = {"name": name, "pi0": 0.1, "cost_ratio": 0.7, "n_bins": TEST_N_BINS}
    body.update(fields)
    with factory() as session:
        model = create_model(session, ModelCreate.model_validate(body), utcnow())
        return ModelConfig.from_row(model)


def post_batch(
    factory: sessionmaker[Session],
    model: ModelConfig,
    settings: Settings,
    *,
    at: datetime,
    rng: np.random.Generator,
    n: int = 400,
    prior: float = 0.2,
    segment: str | None = None,
    separation: float = 1.5,
) -> datetime:
    """Ingest one scores batch with event time ``at``; returns its window start."""
    scores, labels = sample(rng, n, prior, separation)
    body: dict[str, Any] = {
        "timestamp": at.isoformat(),
        "scores": scores.tolist(),
        "labels": labels.tolist(),
    }
    if segment is not None:
        body["segment"] = segment
    with factory() as session:
        ingest_batch(
            session,
            model,
            orjson.dumps(body),
            idempotency_key=None,
            settings=settings,
            now=utcnow(),
        )
    return window_start(at, model.window)


def window_starts(model: ModelConfig, count: int, *, end: datetime | None = None) -> list[datetime]:
    """``count`` consecutive window starts of ``model`` ending with the current window."""
    last = window_start(end or utcnow(), model.window)
    length = window_length(model.window)
    return [last - (count - 1 - i) * length for i in range(count)]


def claim_one(factory: sessionmaker[Session], lease_seconds: float = 30.0) -> ClaimedWindow | None:
    """Claim the waiting window with the oldest change (a group of one), or None."""
    with factory() as session:
        group = claim_windows(session, lease_seconds=lease_seconds)
    assert len(group) <= 1
    return group[0] if group else None


def persist_one(
    factory: sessionmaker[Session], claimed: ClaimedWindow, result: WindowResult
) -> Outcome:
    """Store ``result`` for one claimed window (its own completion transaction)."""
    with factory() as session:
        (outcome,) = persist_group(session, [Computed(claimed, result)])
    return outcome


def aggregate_rows(factory: sessionmaker[Session], model_id: int) -> list[WindowAggregate]:
    with factory() as session:
        return list(
            session.scalars(
                sa.select(WindowAggregate)
                .where(WindowAggregate.model_id == model_id)
                .order_by(WindowAggregate.segment, WindowAggregate.window_start)
            )
        )


def metrics_rows(
    factory: sessionmaker[Session], model_id: int
) -> dict[tuple[str, datetime], WindowMetrics]:
    with factory() as session:
        rows = session.scalars(sa.select(WindowMetrics).where(WindowMetrics.model_id == model_id))
        return {(r.segment, r.window_start): r for r in rows}


def model_row(factory: sessionmaker[Session], model_id: int) -> Model:
    with factory() as session:
        row = session.get(Model, model_id)
        assert row is not None
        return row


def minutes_ago(minutes: float) -> datetime:
    return utcnow() - timedelta(minutes=minutes)


def fold_pending(url: str) -> int:
    """Run the worker's jobs until no window waits (deltas folded); returns the windows run."""
    from app.worker.jobs import DatabaseJobs

    with session_factory_for(url) as factory:
        jobs = DatabaseJobs(factory, lease_seconds=60)
        runs = 0
        while (job := jobs.claim()) is not None:
            jobs.run(job)
            runs += 1
        return runs
