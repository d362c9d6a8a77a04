"""Backpressure on both backends: a model's unfolded deltas are bounded by
``PRIORWATCH_MAX_UNFOLDED_DELTAS``; past it a batch gets 429 with Retry-After and
stores nothing, until a worker folds (docs/api.md, "Backpressure")."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from _worker_support import fold_pending
from conftest import Api
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.orm import Session, sessionmaker

from app.db import queries
from app.db.models import Batch, BatchDelta, Model
from app.services.ingest import batch as ingestion
from app.services.ingest.backpressure import UnfoldedCounts

BOUND = 5


def _body(tp: int, segment: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "timestamp": datetime.now(UTC).isoformat(),
        "confusion_matrix": {"tp": tp, "fp": 1, "fn": 0, "tn": 2},
    }
    if segment is not None:
        body["segment"] = segment
    return body


def _stored(engine: sa.Engine) -> tuple[int, int]:
    with engine.connect() as c:
        batches = c.scalar(sa.select(sa.func.count()).select_from(Batch))
        deltas = c.scalar(sa.select(sa.func.count()).select_from(BatchDelta))
    return int(batches or 0), int(deltas or 0)


def _scrape(api: Api) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    r = api.client.get("/metrics")
    assert r.status_code == 200, r.text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def test_past_the_bound_a_batch_gets_429_stores_nothing_until_a_worker_folds(
    api_factory: Callable[..., Api], database_url: str, db_engine: sa.Engine
) -> None:
    api = api_factory(max_unfolded_deltas=BOUND)
    api.create_model("fraud", segments=["eu"])
    api.create_model("churn")
    token = api.create_key("fraud", ("ingest",))
    other = api.create_key("churn", ("ingest",))
    # a batch with a segment appends two deltas, but waits as one batch
    bodies = [_body(i + 1, segment="eu" if i % 2 else None) for i in range(BOUND + 1)]
    for i, body in enumerate(bodies[:BOUND]):
        r = api.post_batch("fraud", token, body, key=f"k{i}")
        assert r.status_code == 202, r.text
    assert _stored(db_engine) == (BOUND, BOUND + BOUND // 2)

    refused = api.post_batch("fraud", token, bodies[BOUND], key=f"k{BOUND}")
    assert refused.status_code == 429, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.headers["retry-after"] == "5"
    problem = refused.json()
    assert problem["type"] == "urn:priorwatch:problem:too-many-unfolded-deltas"
    assert "PRIORWATCH_MAX_UNFOLDED_DELTAS = 5" in problem["detail"]
    assert _stored(db_engine) == (BOUND, BOUND + BOUND // 2)  # nothing of it stored

    replay = api.post_batch("fraud", token, bodies[0], key="k0")  # answered as before
    assert replay.status_code == 202 and replay.headers["idempotent-replayed"] == "true"
    assert api.post_batch("churn", other, _body(1), key="c0").status_code == 202  # unaffected

    samples = _scrape(api)
    rejected = (
        "priorwatch_batches_rejected_total",
        frozenset({("reason", "too_many_unfolded_deltas")}),
    )
    assert samples[rejected] == 1
    assert samples[("priorwatch_unfolded_deltas", frozenset({("model", "fraud")}))] == BOUND
    assert samples[("priorwatch_unfolded_deltas", frozenset({("model", "churn")}))] == 1
    assert samples[("priorwatch_unfolded_deltas_limit", frozenset())] == BOUND

    assert fold_pending(database_url) > 0
    again = api.post_batch("fraud", token, bodies[BOUND], key=f"k{BOUND}")
    assert again.status_code == 202, again.text
    samples = _scrape(api)
    assert samples[("priorwatch_unfolded_deltas", frozenset({("model", "fraud")}))] == 1
    assert samples[rejected] == 1


def test_the_count_stops_at_its_cap(factory: sessionmaker[Session], api: Api) -> None:
    api.create_model("fraud")
    token = api.create_key("fraud", ("ingest",))
    for i in range(7):
        assert api.post_batch("fraud", token, _body(i + 1)).status_code == 202
    with factory() as session:
        model_id = session.scalar(sa.select(Model.id).where(Model.name == "fraud"))
        assert model_id is not None
        counts = [
            queries.read_admission(session, model_id, count_unfolded_up_to=cap).unfolded_deltas
            for cap in (5, 7, 100)
        ]
        plain = queries.read_admission(session, model_id, key="k").unfolded_deltas
    assert counts == [5, 7, 7]
    assert plain is None  # not asked: not counted


@pytest.mark.parametrize(("bound", "counted"), [(3, [3, None, None, 3, 3]), (0, [None] * 5)])
def test_a_process_counts_again_only_when_its_tally_is_stale_or_at_the_bound(
    api_factory: Callable[..., Api],
    monkeypatch: pytest.MonkeyPatch,
    bound: int,
    counted: list[int | None],
) -> None:
    """Below the bound, a batch's read counts nothing if this process counted the
    model a moment ago (the batches it accepted since are added); at the bound,
    every batch counts again. Bound 0: never counted, never refused."""
    caps: list[int | None] = []
    read = queries.read_admission

    def spy(session: Session, model_id: int, **kwargs: Any) -> queries.Admission:
        if kwargs.get("window") is not None:  # the admission read of a parsed batch
            caps.append(kwargs.get("count_unfolded_up_to"))
        return read(session, model_id, **kwargs)

    monkeypatch.setattr(queries, "read_admission", spy)
    monkeypatch.setattr(ingestion, "UNFOLDED_COUNTS", UnfoldedCounts(ttl=3600.0))  # no expiry
    api = api_factory(max_unfolded_deltas=bound)
    api.create_model("fraud")
    token = api.create_key("fraud", ("ingest",))
    statuses = [api.post_batch("fraud", token, _body(i + 1)).status_code for i in range(5)]
    assert caps == counted
    assert statuses == ([202, 202, 202, 429, 429] if bound else [202] * 5)
