"""Batch ingestion through the real HTTP app, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import orjson
import pytest
import sqlalchemy as sa
from _worker_support import fold_pending
from sqlalchemy.orm import Session

from app.db.models import Batch, BatchDelta, WindowAggregate
from app.db.queue import queue_stats
from app.metrics.binning import histogram_counts
from app.metrics.probability import ProbabilitySums
from app.services.ingest import idempotency
from app.services.windows.aggregate_row import confusion_counts, probability_sums
from app.timegrid import window_start

PROBLEM = "application/problem+json"


def _aggregates(engine: sa.Engine) -> dict[str, WindowAggregate]:
    """The window aggregates once the worker has folded every delta."""
    fold_pending(engine.url.render_as_string(hide_password=False))
    with Session(engine) as s:
        return {a.segment: a for a in s.scalars(sa.select(WindowAggregate))}


def _counts(engine: sa.Engine) -> tuple[int, int]:
    with engine.connect() as c:
        batches = c.scalar(sa.select(sa.func.count()).select_from(Batch))
        aggregates = c.scalar(sa.select(sa.func.count()).select_from(WindowAggregate))
    return int(batches or 0), int(aggregates or 0)


@pytest.fixture
def setup(api: Any) -> tuple[Any, dict[str, Any], str]:
    model = api.create_model("fraud", thresholds=[0.5, 0.2], segments=["eu", "us"], n_bins=400)
    return api, model, api.create_key("fraud", ("ingest",))


def _data(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.2
    s = np.clip(rng.beta(2 + 3 * y, 4), 0.0, 1.0)
    s[:2] = [0.5, 0.2]  # on the thresholds
    return s, y


def test_three_kinds_sum_into_the_window(setup: Any, db_engine: sa.Engine) -> None:
    api, _, token = setup
    now = datetime.now(UTC)
    start = window_start(now, "1h")
    s1, y1 = _data(1, 300)
    r = api.post_batch(
        "fraud",
        token,
        {
            "timestamp": now.isoformat(),
            "segment": "eu",
            "scores": s1.tolist(),
            "labels": y1.astype(int).tolist(),
        },
    )
    assert r.status_code == 202, r.text
    accepted = r.json()
    assert accepted["count"] == 300
    assert accepted["window_start"] == start.isoformat().replace("+00:00", "Z")
    edges = np.array(api.client.get("/v1/models/fraud/bins", headers=api.admin).json()["edges"])
    s2, y2 = _data(2, 200)
    hp, hn = histogram_counts(s2, y2, edges)
    r = api.post_batch(
        "fraud",
        token,
        {
            "timestamp": now.isoformat(),
            "histogram": {"positives": hp.tolist(), "negatives": hn.tolist()},
        },
    )
    assert r.status_code == 202, r.text
    r = api.post_batch(
        "fraud",
        token,
        {
            "timestamp": now.isoformat(),
            "segment": "eu",
            "confusion_matrix": {"tp": 3, "fp": 1, "fn": 2, "tn": 4},
        },
    )
    assert r.status_code == 202, r.text
    with Session(db_engine) as s:
        waiting = queue_stats(s)
        deltas = s.scalars(sa.select(BatchDelta.segment)).all()
    assert waiting.dirty_windows == 2 and waiting.oldest_dirty_since is not None
    assert sorted(deltas) == ["*", "*", "*", "eu", "eu"]  # one per batch and aggregate

    aggs = _aggregates(db_engine)
    assert set(aggs) == {"*", "eu"}
    everything, eu = aggs["*"], aggs["eu"]
    assert everything.window_start == start and everything.model_id == eu.model_id
    assert (everything.n, everything.positives) == (300 + 200 + 10, y1.sum() + y2.sum() + 5)
    assert (eu.n, eu.positives) == (310, y1.sum() + 5)
    assert (everything.batches, eu.batches) == (3, 2)
    assert (everything.version, eu.version) == (1, 1)  # one fold each
    assert not everything.dirty and not eu.dirty
    h1p, h1n = histogram_counts(s1, y1, edges)
    assert everything.hist_positives is not None and everything.hist_negatives is not None
    np.testing.assert_array_equal(everything.hist_positives, h1p + hp)
    np.testing.assert_array_equal(everything.hist_negatives, h1n + hn)
    np.testing.assert_array_equal(eu.hist_positives, h1p)
    # confusion: primary threshold covers every row, the second one the histogram rows
    s12, y12 = np.concatenate([s1, s2]), np.concatenate([y1, y2])
    for index, t in enumerate([0.5, 0.2]):
        cm = confusion_counts(everything, index)
        pred = s12 >= t
        extra = (3, 1, 2, 4) if index == 0 else (0, 0, 0, 0)
        assert (cm.tp, cm.fp, cm.fn, cm.tn) == (
            np.sum(pred & y12) + extra[0],
            np.sum(pred & ~y12) + extra[1],
            np.sum(~pred & y12) + extra[2],
            np.sum(~pred & ~y12) + extra[3],
        )
    # probability sums: the scores batch only
    sums = probability_sums(everything)
    expected = ProbabilitySums.from_predictions(s1, y1)
    assert sums is not None
    assert (sums.positives, sums.negatives) == (expected.positives, expected.negatives)
    assert sums.brier_sum == pytest.approx(expected.brier_sum, rel=1e-12)
    assert sums.log_loss_sum == pytest.approx(expected.log_loss_sum, rel=1e-12)
    assert probability_sums(aggs["eu"]) is not None
    assert _counts(db_engine) == (3, 2)


def test_batches_in_other_windows_and_segments(setup: Any, db_engine: sa.Engine) -> None:
    api, _, token = setup
    now = datetime.now(UTC)
    earlier = now - timedelta(days=3)
    for ts, segment in [(now, "us"), (earlier, None), (earlier, "eu")]:
        body = {"timestamp": ts.isoformat(), "scores": [0.7], "labels": [1]}
        if segment:
            body["segment"] = segment
        assert api.post_batch("fraud", token, body).status_code == 202
    fold_pending(db_engine.url.render_as_string(hide_password=False))
    with Session(db_engine) as s:
        keys = {(a.segment, a.window_start, a.n) for a in s.scalars(sa.select(WindowAggregate))}
    h_now, h_then = window_start(now, "1h"), window_start(earlier, "1h")
    assert keys == {("*", h_now, 1), ("us", h_now, 1), ("*", h_then, 2), ("eu", h_then, 1)}


BAD_BODIES: list[tuple[str, bytes, int, str | None]] = [
    (
        "score above 1",
        b'{"timestamp": "%s", "scores": [0.2, 1.5], "labels": [0, 1]}',
        422,
        "scores",
    ),
    ("non-finite", b'{"timestamp": "%s", "scores": [0.2, 1e999], "labels": [0, 1]}', 400, None),
    ("label 2", b'{"timestamp": "%s", "scores": [0.2, 0.5], "labels": [0, 2]}', 422, "labels"),
    ("lengths", b'{"timestamp": "%s", "scores": [0.2, 0.5], "labels": [0]}', 422, "labels"),
    ("empty", b'{"timestamp": "%s", "scores": [], "labels": []}', 422, "scores"),
    (
        "too many rows",
        b'{"timestamp": "%s", "scores": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], '
        b'"labels": [0, 0, 0, 0, 0, 1]}',
        422,
        "scores",
    ),
    ("malformed", b'{"timestamp": "%s", "scores": [0.2, ', 400, None),
    ("not an object", b'["%s"]', 400, None),
    (
        "segment",
        b'{"timestamp": "%s", "segment": "apac", "scores": [0.2], "labels": [0]}',
        422,
        "segment",
    ),
    (
        "future",
        b'{"timestamp": "2099-01-01T00:00:00Z", "scores": [0.2], "labels": [0]}',
        422,
        "timestamp",
    ),
    (
        "too old",
        b'{"timestamp": "2001-01-01T00:00:00Z", "scores": [0.2], "labels": [0]}',
        422,
        "timestamp",
    ),
    (
        "naive",
        b'{"timestamp": "2026-01-01T00:00:00", "scores": [0.2], "labels": [0]}',
        422,
        "timestamp",
    ),
    (
        "histogram bins",
        b'{"timestamp": "%s", "histogram": {"positives": [1], "negatives": [1]}}',
        422,
        "histogram.positives",
    ),
    (
        "cm negative",
        b'{"timestamp": "%s", "confusion_matrix": {"tp": -1, "fp": 0, "fn": 0, "tn": 2}}',
        422,
        "confusion_matrix.tp",
    ),
]


@pytest.mark.parametrize(
    ("case", "template", "status", "field"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES]
)
def test_bad_input_is_a_problem_and_stores_nothing(
    api_factory: Callable[..., Any],
    db_engine: sa.Engine,
    case: str,
    template: bytes,
    status: int,
    field: str | None,
) -> None:
    api = api_factory(max_batch_rows=5)
    api.create_model("fraud", segments=["eu"])
    token = api.create_key("fraud")
    body = (
        template.replace(b"%s", datetime.now(UTC).isoformat().encode())
        if b"%s" in template
        else template
    )
    r = api.client.post(
        "/v1/models/fraud/batches",
        content=body,
        headers={
            **api.bearer(token),
            "Content-Type": "application/json",
            "Idempotency-Key": f"bad-{case.replace(' ', '-')}",
        },
    )
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == PROBLEM
    problem = r.json()
    assert set(problem) == {"type", "title", "status", "detail", "instance", "errors"}
    assert problem["status"] == status and problem["instance"] == "/v1/models/fraud/batches"
    if field is not None:
        assert problem["errors"][0]["field"] == field
    assert _counts(db_engine) == (0, 0)
    # a rejected request leaves no key behind: the same key with a good body is accepted
    good = {"timestamp": datetime.now(UTC).isoformat(), "scores": [0.3], "labels": [1]}
    assert (
        api.post_batch("fraud", token, good, key=f"bad-{case.replace(' ', '-')}").status_code == 202
    )


def test_body_size_limit(api_factory: Callable[..., Any], db_engine: sa.Engine) -> None:
    api = api_factory(max_body_bytes=2000)
    api.create_model("fraud")
    token = api.create_key("fraud")
    body = orjson.dumps(
        {
            "timestamp": datetime.now(UTC).isoformat(),
            "scores": [0.123456789] * 300,
            "labels": [1] * 300,
        }
    )
    assert len(body) > 2000
    headers = {**api.bearer(token), "Content-Type": "application/json"}
    r = api.client.post("/v1/models/fraud/batches", content=body, headers=headers)
    assert r.status_code == 413 and r.json()["type"].endswith("body-too-large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: the streamed size is checked
        for i in range(0, len(body), 500):
            yield body[i : i + 500]

    r = api.client.post("/v1/models/fraud/batches", content=chunks(), headers=headers)
    assert r.status_code == 413 and r.json()["type"].endswith("body-too-large")
    assert _counts(db_engine) == (0, 0)
    small = {"timestamp": datetime.now(UTC).isoformat(), "scores": [0.5], "labels": [1]}
    assert api.post_batch("fraud", token, small).status_code == 202


def test_ingest_needs_the_ingest_scope_of_that_model(setup: Any) -> None:
    api, _, token = setup
    api.create_model("other")
    read_only = api.create_key("fraud", ("read",))
    other = api.create_key("other", ("ingest",))
    body = {"timestamp": datetime.now(UTC).isoformat(), "scores": [0.5], "labels": [1]}
    assert api.client.post("/v1/models/fraud/batches", json=body).status_code == 401
    assert api.post_batch("fraud", read_only, body).status_code == 403
    assert api.post_batch("fraud", other, body).status_code == 403
    assert api.post_batch("nope", token, body).status_code == 404
    assert api.post_batch("fraud", token, body).status_code == 202
    r = api.client.post(
        "/v1/models/fraud/batches",
        content=orjson.dumps(body),
        headers={**api.bearer(token), "Content-Type": "text/csv"},
    )
    assert r.status_code == 415


def test_replay_and_conflict(setup: Any, db_engine: sa.Engine) -> None:
    api, _, token = setup
    body = {"timestamp": datetime.now(UTC).isoformat(), "scores": [0.9, 0.1], "labels": [1, 0]}
    first = api.post_batch("fraud", token, body, key="k-1")
    assert first.status_code == 202 and "idempotent-replayed" not in first.headers
    again = api.post_batch("fraud", token, body, key="k-1")
    assert again.status_code == 202 and again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert _counts(db_engine) == (1, 1) and _aggregates(db_engine)["*"].n == 2
    other = api.post_batch("fraud", token, {**body, "labels": [1, 1]}, key="k-1")
    assert other.status_code == 422 and other.json()["type"].endswith("idempotency-key-reused")
    assert _counts(db_engine) == (1, 1) and _aggregates(db_engine)["*"].version == 1
    # keys are per model: another model may use the same key
    api.create_model("other")
    other_token = api.create_key("other", ("ingest",))
    assert api.post_batch("other", other_token, body, key="k-1").status_code == 202
    bad_key = api.post_batch("fraud", token, body, key="x" * 256)
    assert bad_key.status_code == 422 and bad_key.json()["errors"][0]["field"] == "Idempotency-Key"


@pytest.mark.parametrize("values", [("k-1", "k-2"), ("k-1", "k-1")])
def test_a_repeated_idempotency_key_is_refused(
    setup: Any, db_engine: sa.Engine, values: tuple[str, str]
) -> None:
    api, _, token = setup
    body = {"timestamp": datetime.now(UTC).isoformat(), "scores": [0.9, 0.1], "labels": [1, 0]}
    headers = [
        *api.bearer(token).items(),
        ("Content-Type", "application/json"),
        *(("Idempotency-Key", v) for v in values),
    ]
    r = api.client.post("/v1/models/fraud/batches", content=orjson.dumps(body), headers=headers)
    assert r.status_code == 422, r.text
    assert r.json()["errors"] == [
        {"field": "Idempotency-Key", "reason": "is sent 2 times; send it once"}
    ]
    assert _counts(db_engine) == (0, 0)
    assert api.post_batch("fraud", token, body, key=values[1]).status_code == 202  # once: fine


@contextmanager
def _hold_key(url: str, model_id: int, key: str) -> Iterator[None]:
    """Simulate a first request still in flight with ``key``."""
    if url.startswith("postgresql"):
        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                conn.execute(
                    sa.text("SELECT pg_advisory_xact_lock(:id)"),
                    {"id": idempotency.advisory_lock_id(model_id, key)},
                )
                yield
        finally:
            engine.dispose()
    else:
        from app.db.session import make_engine

        engine = make_engine(url)
        with idempotency.IN_FLIGHT.hold(str(engine.url), model_id, key):
            yield
        engine.dispose()


def test_in_flight_duplicate_gets_409(setup: Any, database_url: str, db_engine: sa.Engine) -> None:
    api, _, token = setup
    with Session(db_engine) as s:
        model_id = s.scalar(sa.text("SELECT id FROM model WHERE name = 'fraud'"))
    body = {"timestamp": datetime.now(UTC).isoformat(), "scores": [0.9], "labels": [1]}
    with _hold_key(database_url, model_id, "k-busy"):
        r = api.post_batch("fraud", token, body, key="k-busy")
        assert r.status_code == 409, r.text
        assert r.headers["retry-after"] == "1" and r.json()["type"].endswith("request-in-flight")
        assert api.post_batch("fraud", token, body, key="k-free").status_code == 202
    assert _counts(db_engine) == (1, 1)
    assert api.post_batch("fraud", token, body, key="k-busy").status_code == 202
