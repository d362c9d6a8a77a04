"""Admission of a batch (the key, the replay, the count ceilings) on both backends.

The body is parsed before the key is looked up, and on PostgreSQL the lookup and
the count-ceiling read share the advisory lock's round trip: the answers must
be those of the documented order (key first, then the body, then the ceilings).
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import orjson
import pytest
import sqlalchemy as sa
from _worker_support import (
    TEST_N_BINS,
    fold_pending,
    post_batch,
    register_model,
    session_factory_for,
    utcnow,
)
from sqlalchemy.orm import Session, sessionmaker
from test_api_batches import _hold_key

from app.config import Settings
from app.db import queries
from app.db.models import ALL_SEGMENTS, ApiKey, Batch, BatchDelta, Model, WindowAggregate
from app.errors import IdempotencyKeyReused, ModelNotFound
from app.services.ingest import idempotency
from app.services.ingest.batch import INLINE_HASH_BYTES, _hash_body, ingest_batch
from app.services.models.auth_cache import AUTH_CACHE
from app.services.windows.limits import MAX_WINDOW_COUNT
from app.timegrid import window_start


def _stored(engine: sa.Engine) -> tuple[int, int]:
    with engine.connect() as c:
        batches = c.scalar(sa.select(sa.func.count()).select_from(Batch))
        deltas = c.scalar(sa.select(sa.func.count()).select_from(BatchDelta))
    return int(batches or 0), int(deltas or 0)


def _cm(tp: int, *, at: datetime | None = None) -> dict[str, Any]:
    moment = at or datetime.now(UTC)
    return {
        "timestamp": moment.isoformat(),
        "confusion_matrix": {"tp": tp, "fp": 0, "fn": 0, "tn": 0},
    }


def test_the_totals_read_with_the_key_and_without(
    factory: sessionmaker[Session], settings: Settings, database_url: str
) -> None:
    model = register_model(factory, segments=["eu", "us"])
    rng = np.random.default_rng(11)
    now = utcnow()
    start = window_start(now, model.window)
    post_batch(factory, model, settings, at=now, rng=rng, n=50, segment="eu")
    post_batch(factory, model, settings, at=start - timedelta(seconds=1), rng=rng, n=20)
    fold_pending(database_url)  # aggregates, then unfolded deltas on top
    post_batch(factory, model, settings, at=now, rng=rng, n=30, segment="eu")
    post_batch(factory, model, settings, at=now, rng=rng, n=7)
    windows = [
        queries.BatchTarget(start, "eu"),  # both aggregates exist, deltas unfolded
        queries.BatchTarget(start, "us"),  # the segment's aggregate is missing
        queries.BatchTarget(start, None),
        queries.BatchTarget(start + timedelta(days=30), "eu"),  # nothing there yet
    ]
    for window in windows:
        with factory() as session:
            plain = queries.read_admission(session, model.id, window=window).totals
        with factory() as session:
            key = uuid.uuid4().hex
            with idempotency.in_flight_guard(session, model.id, key, window) as read:
                assert read.answer is None and read.locked and read.credential_holds
                assert read.totals == plain
    with factory() as session:
        eu, us, _, later = (
            queries.read_admission(session, model.id, window=w).totals for w in windows
        )
    assert eu is not None and us is not None and later is not None
    assert eu.window_counts == [87, 80] and eu.missing == []
    assert (eu.model_folded, eu.model_unfolded, eu.model_total) == (70.0, 37.0, 107.0)
    with factory() as session:  # a caller that knows the folded total: only the rest is read
        given = queries.read_admission(session, model.id, window=windows[0], model_folded=1e6)
    assert given.totals is not None
    assert (given.totals.model_folded, given.totals.model_unfolded) == (1e6, 37.0)
    assert (given.totals.window_counts, given.totals.missing) == (eu.window_counts, eu.missing)
    assert us.window_counts == [87, 0] and us.missing == ["us"]
    assert later.window_counts == [0, 0] and later.missing == [ALL_SEGMENTS, "eu"]


def test_a_refused_body_lets_the_key_decide_first(
    api: Any, database_url: str, db_engine: sa.Engine
) -> None:
    api.create_model("fraud", n_bins=TEST_N_BINS)
    token = api.create_key("fraud", ("ingest",))
    assert api.post_batch("fraud", token, _cm(3), key="k-used").status_code == 202
    bad = {"timestamp": datetime.now(UTC).isoformat(), "scores": [2.0], "labels": [1]}
    r = api.post_batch("fraud", token, bad, key="k-used")
    assert r.status_code == 422 and r.json()["type"].endswith("idempotency-key-reused"), r.text
    with Session(db_engine) as s:
        model_id = s.scalar(sa.text("SELECT id FROM model WHERE name = 'fraud'"))
    with _hold_key(database_url, model_id, "k-busy"):
        r = api.post_batch("fraud", token, bad, key="k-busy")
        assert r.status_code == 409 and r.json()["type"].endswith("request-in-flight"), r.text
    r = api.post_batch("fraud", token, bad, key="k-busy")
    assert r.status_code == 422 and r.json()["type"].endswith("invalid-input"), r.text
    assert r.json()["errors"][0]["field"] == "scores"
    assert _stored(db_engine) == (1, 1)


def test_a_replay_is_answered_after_its_window_left_the_backfill_range(
    factory: sessionmaker[Session], settings: Settings, db_engine: sa.Engine
) -> None:
    model = register_model(factory)
    sent = utcnow()
    body = orjson.dumps(_cm(5, at=sent))
    with factory() as session:
        first = ingest_batch(session, model, body, idempotency_key="k", settings=settings, now=sent)
    much_later = sent + settings.backfill_max_age + timedelta(days=1)
    with factory() as session:  # the body itself is now refused: the key answers first
        again = ingest_batch(
            session, model, body, idempotency_key="k", settings=settings, now=much_later
        )
    assert again.replayed and again.response == first.response
    other = orjson.dumps(_cm(6, at=sent))
    with factory() as session, pytest.raises(IdempotencyKeyReused):
        ingest_batch(session, model, other, idempotency_key="k", settings=settings, now=much_later)
    assert _stored(db_engine) == (1, 1)


def test_a_ceiling_read_with_a_key_refuses_and_frees_the_key(
    api: Any, db_engine: sa.Engine, database_url: str
) -> None:
    api.create_model("fraud", n_bins=TEST_N_BINS, segments=["eu"])
    token = api.create_key("fraud", ("ingest",))
    assert api.post_batch("fraud", token, {**_cm(1), "segment": "eu"}, key="a").status_code == 202
    fold_pending(database_url)
    with db_engine.begin() as c:  # the segment's window 10 short of the ceiling
        c.execute(
            sa.update(WindowAggregate)
            .where(WindowAggregate.segment == "eu")
            .values(n=MAX_WINDOW_COUNT - 10, positives=MAX_WINDOW_COUNT - 10)
        )
    r = api.post_batch("fraud", token, {**_cm(11), "segment": "eu"}, key="b")
    assert r.status_code == 422 and "(10 left)" in r.json()["errors"][0]["reason"], r.text
    assert _stored(db_engine) == (1, 0)  # the first batch's row; its deltas folded
    assert api.post_batch("fraud", token, {**_cm(10), "segment": "eu"}, key="b").status_code == 202
    assert _stored(db_engine) == (2, 2)  # one delta per aggregate


@pytest.mark.postgres
def test_a_driver_error_in_the_pipeline_is_raised_as_sqlalchemy_does(pg_url: str) -> None:
    with session_factory_for(pg_url) as factory:
        model = register_model(factory)
        window = queries.BatchTarget(utcnow(), None)
        with factory() as session, pytest.raises(sa.exc.DataError):  # NUL: psycopg refuses it
            queries.read_admission(session, model.id, lock_id=1, key="nul\x00key", window=window)


def test_bodies_are_hashed_inline_or_beside() -> None:
    for body in (b"x" * INLINE_HASH_BYTES, b"x" * (INLINE_HASH_BYTES + 1)):
        assert _hash_body(body).result() == idempotency.request_hash(body)


def _as_another_process(engine: sa.Engine, statement: Any) -> None:
    """A change this process's cache is not told of (another replica, a script)."""
    with engine.begin() as c:
        c.execute(statement)


def test_a_key_revoked_elsewhere_is_refused_at_once(
    api: Any, db_engine: sa.Engine, database_url: str
) -> None:
    api.create_model("fraud", n_bins=TEST_N_BINS)
    token = api.create_key("fraud", ("ingest",))
    for i in range(2):  # the second is authorised from the cache
        assert api.post_batch("fraud", token, _cm(1), key=f"k{i}").status_code == 202
    _as_another_process(db_engine, sa.update(ApiKey).values(revoked_at=utcnow()))
    first_after = {"postgresql": 401, "sqlite": 409}[db_engine.dialect.name]
    with _hold_key(database_url, _model_id(db_engine), "k3"):  # PostgreSQL: 401 before 409
        assert api.post_batch("fraud", token, _cm(1), key="k3").status_code == first_after
    _as_another_process(db_engine, sa.update(ApiKey).values(revoked_at=None))
    assert api.post_batch("fraud", token, _cm(1), key="k2").status_code == 202  # cached again
    _as_another_process(db_engine, sa.update(ApiKey).values(revoked_at=utcnow()))
    for body, key in ((_cm(1), "k0"), (_cm(1), "k4"), (_cm(1), None), ({"scores": [1]}, "k5")):
        r = api.post_batch("fraud", token, body, key=key)  # no replay, no batch, no 422
        assert r.status_code == 401 and r.json()["type"].endswith("not-authenticated"), r.text
    assert _stored(db_engine)[0] == 3


def test_a_model_changed_elsewhere_is_read_again(api: Any, db_engine: sa.Engine) -> None:
    api.create_model("fraud", n_bins=TEST_N_BINS, segments=["eu"])
    token = api.create_key("fraud", ("ingest",))
    for _ in range(2):  # the second is authorised from the cache
        assert api.post_batch("fraud", token, {**_cm(1), "segment": "eu"}).status_code == 202
    _as_another_process(
        db_engine,
        sa.update(Model).values(segments=["eu", "us"], updated_at=utcnow()),
    )
    assert api.post_batch("fraud", token, {**_cm(1), "segment": "us"}).status_code == 202
    _as_another_process(db_engine, sa.update(Model).values(segments=[], updated_at=utcnow()))
    r = api.post_batch("fraud", token, {**_cm(1), "segment": "eu"}, key="k")
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "segment", r.text
    assert _stored(db_engine)[0] == 3


def _model_id(engine: sa.Engine) -> int:
    with engine.connect() as c:
        return int(c.scalar(sa.text("SELECT id FROM model WHERE name = 'fraud'")) or 0)


def test_a_cached_credential_that_holds_is_used_as_is(api: Any, db_engine: sa.Engine) -> None:
    api.create_model("fraud", n_bins=TEST_N_BINS)
    token = api.create_key("fraud", ("ingest",))
    admin_token = api.admin["Authorization"].removeprefix("Bearer ")
    for caller in (token, admin_token):
        assert api.post_batch("fraud", caller, _cm(1)).status_code == 202  # fills the cache
        generation = AUTH_CACHE.generation
        for key in (None, f"{caller[:6]}-k"):
            assert api.post_batch("fraud", caller, _cm(1), key=key).status_code == 202
        assert AUTH_CACHE.generation == generation  # never found stale, never cleared
    assert _stored(db_engine)[0] == 6


def test_a_key_stored_between_the_read_and_the_write_is_answered_as_a_replay(
    factory: sessionmaker[Session],
    settings: Settings,
    db_engine: sa.Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = register_model(factory)
    now = utcnow()
    body = orjson.dumps(_cm(2, at=now))
    with factory() as session:
        first = ingest_batch(session, model, body, idempotency_key="k", settings=settings, now=now)
    read_admission = queries.read_admission

    def read_before_the_other_commit(*args: Any, **kwargs: Any) -> queries.Admission:
        read = read_admission(*args, **kwargs)
        return queries.Admission(read.locked, None, read.totals, read.credential_holds)

    monkeypatch.setattr(queries, "read_admission", read_before_the_other_commit)
    with factory() as session:  # the insert meets the stored key: the replay answers
        again = ingest_batch(session, model, body, idempotency_key="k", settings=settings, now=now)
    assert again.replayed and again.response == first.response
    other = orjson.dumps(_cm(3, at=now))
    with factory() as session, pytest.raises(IdempotencyKeyReused):
        ingest_batch(session, model, other, idempotency_key="k", settings=settings, now=now)
    gone = dataclasses.replace(model, id=model.id + 1)  # deleted meanwhile: the insert fails
    with factory() as session, pytest.raises(ModelNotFound):
        ingest_batch(session, gone, body, idempotency_key=None, settings=settings, now=now)
    assert _stored(db_engine) == (1, 1)
