"""DELETE /v1/models/{name}: every row of the model goes, on SQLite and PostgreSQL;
caches and claims of other processes notice at once (404/401, fenced), never a 500."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from typing import Any

import numpy as np
import orjson
import pytest
import sqlalchemy as sa
from _worker_support import (
    fold_pending,
    metrics_rows,
    post_batch,
    register_model,
    session_factory_for,
    utcnow,
)
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import retention as db_retention
from app.db.base import Base
from app.db.models import QuarantinedDelta
from app.db.session import write_transaction
from app.errors import ModelNotFound
from app.services.ingest.batch import ingest_batch
from app.services.models.api_keys import create_key
from app.services.models.registry import delete_model, get_model, update_model
from app.services.models.settings import ModelUpdate
from app.services.refresh.groups import Outcome, claim_windows, refresh_group
from app.services.windows.reference_cache import ReferenceCache

PROBLEM = "application/problem+json"


def _rows_of(factory: sessionmaker[Session], model_id: int) -> dict[str, int]:
    """Rows referring to the model in every table of the schema (by ``model_id``, or ``id``
    for ``model`` itself)."""
    counts = {}
    with factory() as session:
        for table in Base.metadata.sorted_tables:
            column = table.c.id if table.name == "model" else table.c.model_id
            counts[table.name] = session.scalar(
                sa.select(sa.func.count()).select_from(table).where(column == model_id)
            )
    return counts


def _scores(at: str, segment: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"timestamp": at, "scores": [0.2, 0.7, 0.9], "labels": [0, 1, 1]}
    if segment is not None:
        body["segment"] = segment
    return body


def _quarantine_one(factory: sessionmaker[Session], model_id: int, at: Any) -> None:
    with factory() as session, write_transaction(session):
        session.add(
            QuarantinedDelta(
                model_id=model_id,
                segment="*",
                window_start=at,
                batch_id=uuid.uuid4(),
                received_at=at,
                quarantined_at=at,
                n=1,
                n_unlabelled=0,
                reason="OverflowError: test",
            )
        )


def test_delete_leaves_no_row_of_the_model_and_keeps_the_others(
    api: Any, database_url: str
) -> None:
    tokens = {}
    for name in ("fraud", "churn"):
        api.create_model(name, segments=["eu"], n_bins=50)
        tokens[name] = api.create_key(name)
        for hours in (0, 1, 2):
            at = (utcnow() - timedelta(hours=hours)).isoformat()
            r = api.post_batch(name, tokens[name], _scores(at, "eu"), key=f"k{hours}")
            assert r.status_code == 202
    fold_pending(database_url)
    for name in ("fraud", "churn"):  # and unfolded deltas
        assert api.post_batch(name, tokens[name], _scores(utcnow().isoformat())).status_code == 202
    with session_factory_for(database_url) as factory:
        ids = {}
        for name in ("fraud", "churn"):
            with factory() as session:
                ids[name] = session.scalar(
                    sa.text("SELECT id FROM model WHERE name = :n"), {"n": name}
                )
            _quarantine_one(factory, ids[name], utcnow())
        before = _rows_of(factory, ids["fraud"])
        assert all(n > 0 for n in before.values()), before  # every table holds a row of it
        kept = _rows_of(factory, ids["churn"])

        r = api.client.delete("/v1/models/fraud", headers=api.admin)
        assert r.status_code == 204 and r.content == b""

        assert set(_rows_of(factory, ids["fraud"]).values()) == {0}
        assert _rows_of(factory, ids["churn"]) == kept
    again = api.client.delete("/v1/models/fraud", headers=api.admin)
    assert again.status_code == 404 and again.headers["content-type"] == PROBLEM
    assert again.json()["type"].endswith("model-not-found")
    assert api.client.get("/v1/models/fraud", headers=api.admin).status_code == 404
    assert api.client.get("/v1/models/churn", headers=api.admin).status_code == 200


def test_delete_needs_the_admin_token(api: Any) -> None:
    api.create_model("fraud")
    token = api.create_key("fraud")
    r = api.client.delete("/v1/models/fraud", headers=api.bearer(token))
    assert r.status_code == 403 and r.headers["content-type"] == PROBLEM
    assert api.client.get("/v1/models/fraud", headers=api.admin).status_code == 200


def test_cached_credentials_of_a_model_deleted_elsewhere_answer_401_and_404(
    api: Any, database_url: str
) -> None:
    """Another replica deletes the model: this one's cached key and model are checked
    against the database on their next use (no foreign-key 500)."""
    api.create_model("fraud", n_bins=50)
    token = api.create_key("fraud")
    at = utcnow().isoformat()
    assert api.post_batch("fraud", token, _scores(at)).status_code == 202  # caches both
    assert api.post_batch("fraud", api.admin["Authorization"][7:], _scores(at)).status_code == 202
    with session_factory_for(database_url) as factory, factory() as session:
        model_id = session.scalar(sa.text("SELECT id FROM model WHERE name = 'fraud'"))
        with write_transaction(session):  # as another process would: this cache is not told
            assert db_retention.delete_model(session, model_id)
    by_key = api.post_batch("fraud", token, _scores(at))
    assert by_key.status_code == 401 and by_key.headers["content-type"] == PROBLEM
    by_admin = api.post_batch("fraud", api.admin["Authorization"][7:], _scores(at))
    assert by_admin.status_code == 404 and by_admin.headers["content-type"] == PROBLEM


def test_a_batch_whose_model_is_deleted_before_its_write_is_model_not_found(
    database_url: str, settings: Settings
) -> None:
    """The model was read (or cached) before the deletion and the batch's rows fail their
    foreign key: ModelNotFound (404), not an IntegrityError (500)."""
    with session_factory_for(database_url) as factory:
        model = register_model(factory)
        with factory() as session, write_transaction(session):
            assert db_retention.delete_model(session, model.id)
        body = orjson.dumps(_scores(utcnow().isoformat()))
        with factory() as session, pytest.raises(ModelNotFound):
            ingest_batch(session, model, body, idempotency_key="k", settings=settings, now=utcnow())


def test_batches_racing_a_deletion_never_get_500(api: Any) -> None:
    api.create_model("fraud", n_bins=50)
    admin_token = api.admin["Authorization"][7:]
    statuses: list[int] = []
    started = threading.Event()

    def post() -> None:
        for _ in range(40):
            r = api.post_batch("fraud", admin_token, _scores(utcnow().isoformat()))
            statuses.append(r.status_code)
            started.set()

    thread = threading.Thread(target=post)
    thread.start()
    started.wait(30)
    assert api.client.delete("/v1/models/fraud", headers=api.admin).status_code == 204
    thread.join(60)
    assert statuses and set(statuses) <= {202, 404}, statuses
    assert statuses[-1] == 404


def test_a_claimed_group_with_a_deleted_model_stores_its_other_windows(
    database_url: str, settings: Settings
) -> None:
    with session_factory_for(database_url) as factory:
        gone = register_model(factory, "gone")
        kept = register_model(factory, "kept")
        rng = np.random.default_rng(5)
        for hours in (1, 2, 3):  # changes interleaved: the claim takes both models' windows
            for model in (gone, kept):
                post_batch(factory, model, settings, at=utcnow() - timedelta(hours=hours), rng=rng)
        with factory() as session:
            group = claim_windows(session, lease_seconds=60, group_size=10)
        assert {c.model.id for c in group} == {gone.id, kept.id}
        with factory() as session, write_transaction(session):
            assert db_retention.delete_model(session, gone.id)
        with factory() as session:
            outcomes = refresh_group(session, group, ReferenceCache())
        by_model = {(c.model.id, o) for c, o in zip(group, outcomes, strict=True)}
        assert by_model == {(gone.id, Outcome.FENCED_OUT), (kept.id, Outcome.STORED)}
        assert len(metrics_rows(factory, kept.id)) == sum(c.model.id == kept.id for c in group)
        assert set(_rows_of(factory, gone.id).values()) == {0}


def test_updates_deletions_and_new_keys_of_a_model_deleted_meanwhile_are_model_not_found(
    database_url: str,
) -> None:
    """The admin's request read the model, another one deleted it: 404, not a 500."""
    with session_factory_for(database_url) as factory:
        register_model(factory)
        with factory() as updating, factory() as keying, factory() as deleting:
            stale, also_stale = get_model(updating, "fraud"), get_model(keying, "fraud")
            deleted_twice = get_model(deleting, "fraud")
            with factory() as other:
                delete_model(other, get_model(other, "fraud"))
            with pytest.raises(ModelNotFound):
                delete_model(deleting, deleted_twice)
            with pytest.raises(ModelNotFound):
                update_model(updating, stale, ModelUpdate(pi0=0.2), utcnow())
            with pytest.raises(ModelNotFound):
                create_key(keying, also_stale, ["read"], utcnow())
