"""A batch whose admission can be checked in SQL is stored at once (app/db/queries.py
``read_admission`` with ``store``: one statement on PostgreSQL, one write
transaction on SQLite); anything else takes the full path, which answers as
before. PostgreSQL: pooled connections that the server closed are replaced
without a ping (app/db/session.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from conftest import Api

from app.db import queries
from app.db.models import ALL_SEGMENTS, Batch, BatchDelta
from app.db.session import make_engine
from app.services.ingest import batch as ingestion
from app.services.ingest.backpressure import UnfoldedCounts
from app.services.models.engine_cache import EngineCache


def _cm(tp: int, segment: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "timestamp": datetime.now(UTC).isoformat(),
        "confusion_matrix": {"tp": tp, "fp": 1, "fn": 0, "tn": 2},
    }
    if segment is not None:
        body["segment"] = segment
    return body


def test_batches_after_the_first_are_stored_at_once_and_counted_once(
    database_url: str, api_for: Callable[..., Api], monkeypatch: pytest.MonkeyPatch
) -> None:
    stored: list[bool | None] = []  # per admission: the one statement's outcome, None: a read
    read = queries.read_admission

    def spy(*args: Any, **kwargs: Any) -> queries.Admission:
        admission = read(*args, **kwargs)
        if kwargs.get("window") is not None:
            stored.append(admission.stored if kwargs.get("store") is not None else None)
        return admission

    monkeypatch.setattr(queries, "read_admission", spy)
    # fresh throughout: no clock in play
    for cache in ("MODEL_TOTAL_CACHE", "UNFOLDED_TOTAL_CACHE"):
        monkeypatch.setattr(ingestion, cache, EngineCache(ttl=3600.0))
    monkeypatch.setattr(ingestion, "UNFOLDED_COUNTS", UnfoldedCounts(ttl=3600.0))
    api = api_for(database_url)
    api.create_model("fraud", segments=["eu"])
    token = api.create_key("fraud", ("ingest",))
    first, second, third, fourth = _cm(1), _cm(2, "eu"), _cm(3), _cm(4, "eu")
    answers = [
        api.post_batch("fraud", token, first, key="a"),  # the window's first batch: in full
        api.post_batch("fraud", token, second, key="b"),  # the segment's first: in full
        api.post_batch("fraud", token, third),
        api.post_batch("fraud", token, fourth, key="c"),
        api.post_batch("fraud", token, second, key="b"),  # a replay
        api.post_batch("fraud", token, _cm(5), key="b"),  # the key with another body
        api.post_batch("fraud", token, fourth, key="c"),  # a replay of one stored at once
    ]
    assert [a.status_code for a in answers] == [202, 202, 202, 202, 202, 422, 202]
    for replay, first_answer in ((answers[4], answers[1]), (answers[6], answers[3])):
        assert replay.headers["Idempotent-Replayed"] == "true"
        assert replay.json() == first_answer.json()
    assert stored == [None, None, True, True, False, None, False, None, False, None]
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as c:
            batches = c.execute(sa.select(Batch.n, Batch.segment).order_by(Batch.n)).all()
            deltas = c.execute(sa.select(BatchDelta.n, BatchDelta.segment)).all()
    finally:
        engine.dispose()
    sent = [
        (b["confusion_matrix"]["tp"] + 3, b.get("segment")) for b in (first, second, third, fourth)
    ]
    assert [tuple(b) for b in batches] == sent
    per_aggregate = [(n, ALL_SEGMENTS) for n, _ in sent] + [
        (n, s) for n, s in sent if s is not None
    ]
    assert sorted(tuple(d) for d in deltas) == sorted(per_aggregate)


@pytest.mark.postgres
def test_a_pooled_connection_the_server_closed_is_replaced_without_an_error(
    pg_url: str,
) -> None:
    engine = make_engine(pg_url)
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as c:
            pid = c.scalar(sa.text("SELECT pg_backend_pid()"))
        with admin.connect() as c:
            assert c.scalar(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            for _ in range(100):  # bounded: until the server has ended that backend
                gone = c.scalar(
                    sa.text("SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = :pid"),
                    {"pid": pid},
                )
                if gone:
                    break
        with engine.connect() as c:  # the pooled one is closed: replaced on checkout
            assert c.scalar(sa.text("SELECT pg_backend_pid()")) != pid
    finally:
        engine.dispose()
        admin.dispose()
