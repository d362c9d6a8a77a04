"""The model setting ``retention``: validated through the API, enforced by the worker's
housekeeping (old windows go with every row of theirs; the drift reference stays)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from _worker_support import fold_pending, post_batch, register_model, session_factory_for, utcnow
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import retention as db_retention
from app.db.models import Batch, BatchDelta, Model, WindowAggregate, WindowMetrics
from app.services.refresh.retention import delete_expired_windows
from app.timegrid import window_start
from app.worker.jobs import DatabaseJobs

PROBLEM = "application/problem+json"


def test_retention_is_a_setting(api: Any) -> None:
    assert api.create_model("fraud")["retention"] is None
    assert api.create_model("churn", retention="90d")["retention"] == "90d"
    r = api.client.patch("/v1/models/fraud", json={"retention": "36h"}, headers=api.admin)
    assert r.status_code == 200 and r.json()["retention"] == "36h"
    r = api.client.patch("/v1/models/fraud", json={"retention": None}, headers=api.admin)
    assert r.status_code == 200 and r.json()["retention"] is None
    assert api.client.get("/v1/models/churn", headers=api.admin).json()["retention"] == "90d"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"retention": "90 days"}, "pattern"),
        ({"retention": 90}, "string"),
        ({"window": "1w", "retention": "6d"}, "at least one window"),
    ],
)
def test_bad_retention_is_refused_naming_the_field(
    api: Any, body: dict[str, Any], reason: str
) -> None:
    r = api.client.post("/v1/models", json={"name": "m", "pi0": 0.1, **body}, headers=api.admin)
    assert r.status_code == 422 and r.headers["content-type"] == PROBLEM
    assert "retention" in r.text and reason in r.text
    assert api.client.get("/v1/models/m", headers=api.admin).status_code == 404


def test_bad_retention_update_changes_nothing(api: Any) -> None:
    api.create_model("fraud", window="1d", retention="30d")
    r = api.client.patch("/v1/models/fraud", json={"retention": "12h"}, headers=api.admin)
    assert r.status_code == 422 and "retention" in r.text
    assert api.client.get("/v1/models/fraud", headers=api.admin).json()["retention"] == "30d"


def _starts(factory: sessionmaker[Session], table: Any, model_id: int) -> set[datetime]:
    with factory() as session:
        return set(session.scalars(sa.select(table.window_start).where(table.model_id == model_id)))


def test_housekeeping_deletes_windows_past_the_retention_but_not_the_reference(
    database_url: str, settings: Settings
) -> None:
    now = utcnow()
    hour = timedelta(hours=1)
    ago = {h: window_start(now - h * hour, "1h") for h in (1, 2, 5, 9, 10, 12)}
    reference = {"from": ago[10].isoformat(), "to": (ago[10] + 2 * hour).isoformat()}
    with session_factory_for(database_url) as factory:
        model = register_model(factory, segments=["eu"], drift={"reference": reference})
        forever = register_model(factory, "forever")
        rng = np.random.default_rng(3)
        for h in ago:
            for m in (model, forever):
                post_batch(factory, m, settings, at=now - h * hour, rng=rng, n=50, segment=None)
            post_batch(factory, model, settings, at=now - h * hour, rng=rng, n=50, segment="eu")
        fold_pending(database_url)  # every window has its stored result
        assert _starts(factory, WindowMetrics, model.id) == set(ago.values())
        for h in (5, 12):  # and the expired ones unfolded deltas
            post_batch(factory, model, settings, at=now - h * hour, rng=rng, n=50, segment="eu")
        with factory() as session, session.begin():
            session.execute(sa.update(Model).where(Model.id == model.id).values(retention="3h"))

        jobs = DatabaseJobs(factory, lease_seconds=30)
        jobs.housekeeping()

        kept = {ago[1], ago[2], ago[9], ago[10]}  # recent, and the reference period
        for table in (WindowAggregate, WindowMetrics, Batch):
            assert _starts(factory, table, model.id) == kept, table
        assert _starts(factory, BatchDelta, model.id) == set()
        assert jobs.windows_deleted == 2
        assert _starts(factory, WindowAggregate, forever.id) == set(ago.values())
        assert jobs.housekeeping() == 0 and jobs.windows_deleted == 2  # nothing more to do


def test_a_model_deleted_while_the_housekeeping_runs_is_skipped(
    database_url: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listed with a retention, gone when its turn comes: nothing to delete, no error;
    the next model is still served, a transaction at a time (``limit``)."""
    with session_factory_for(database_url) as factory:
        models = [register_model(factory, name, retention="1h") for name in ("gone", "kept")]
        rng = np.random.default_rng(4)
        for model in models:
            for h in (5, 6, 7):
                post_batch(factory, model, settings, at=utcnow() - h * timedelta(hours=1), rng=rng)
        lock_model = db_retention.lock_model

        def vanished(session: Session, model_id: int) -> Model | None:
            return None if model_id == models[0].id else lock_model(session, model_id)

        monkeypatch.setattr(db_retention, "lock_model", vanished)
        assert delete_expired_windows(factory, limit=2) == 3
        assert len(_starts(factory, WindowAggregate, models[0].id)) == 3
        assert _starts(factory, WindowAggregate, models[1].id) == set()
