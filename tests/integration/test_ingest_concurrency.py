"""Concurrent batches into one window never lose an increment and never deadlock.

16 client threads post through the real app at once (the handlers run in the
server's thread pool, each with its own session and connection): on
PostgreSQL the window's rows are locked with SELECT ... FOR UPDATE in segment
order; on SQLite writes are serialised.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from app.db.models import Batch, WindowAggregate
from app.metrics.binning import histogram_counts
from app.services.aggregates import confusion_counts

THREADS = 16
BATCHES_PER_THREAD = 6
ROWS = 50


def _run_clients(
    api: Any, token: str, threads: int, per_thread: int
) -> tuple[np.ndarray, np.ndarray, list[str | None], list[int]]:
    now = datetime.now(UTC).isoformat()
    rng = np.random.default_rng(123)
    jobs = []
    for i in range(threads * per_thread):
        y = rng.random(ROWS) < 0.3
        s = rng.random(ROWS)
        segment = [None, "eu", "us"][i % 3]  # mixed: lock sets {*}, {*, eu}, {*, us}
        body: dict[str, Any] = {
            "timestamp": now,
            "scores": s.tolist(),
            "labels": y.astype(int).tolist(),
        }
        if segment:
            body["segment"] = segment
        jobs.append((body, f"key-{i}", s, y, segment))

    def post(job: tuple[Any, ...]) -> int:
        body, key = job[0], job[1]
        return int(api.post_batch("fraud", token, body, key=key).status_code)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        statuses = list(pool.map(post, jobs))
    scores = np.concatenate([j[2] for j in jobs])
    labels = np.concatenate([j[3] for j in jobs])
    segments = [j[4] for j in jobs for _ in range(ROWS)]
    return scores, labels, segments, statuses


def _check_totals(
    db_engine: sa.Engine,
    edges: np.ndarray,
    scores: np.ndarray,
    labels: np.ndarray,
    segments: list[str | None],
    n_batches: int,
) -> None:
    with Session(db_engine) as s:
        aggs = {a.segment: a for a in s.scalars(sa.select(WindowAggregate))}
        assert s.scalar(sa.select(sa.func.count()).select_from(Batch)) == n_batches
    seg = np.array([x or "" for x in segments])
    for key, mask in [("*", np.ones(seg.size, bool)), ("eu", seg == "eu"), ("us", seg == "us")]:
        agg = aggs[key]
        assert agg.n == mask.sum() and agg.positives == labels[mask].sum()
        expected_batches = n_batches if key == "*" else n_batches // 3
        assert agg.version == expected_batches
        pos, neg = histogram_counts(scores[mask], labels[mask], edges)
        np.testing.assert_array_equal(agg.hist_positives, pos)
        np.testing.assert_array_equal(agg.hist_negatives, neg)
        cm = confusion_counts(agg, 0)
        pred = scores[mask] >= 0.5
        assert cm.tp == np.sum(pred & labels[mask]) and cm.tn == np.sum(~pred & ~labels[mask])
        assert agg.sums_positives == labels[mask].sum()


@pytest.mark.postgres
@pytest.mark.slow
def test_sixteen_concurrent_clients_on_postgres(pg_url: str, api_for: Callable[..., Any]) -> None:
    _concurrent(pg_url, api_for, THREADS, BATCHES_PER_THREAD)


def test_concurrent_clients_on_sqlite(sqlite_url: str, api_for: Callable[..., Any]) -> None:
    _concurrent(sqlite_url, api_for, 4, 3)


def _concurrent(url: str, api_for: Callable[..., Any], threads: int, per_thread: int) -> None:
    api = api_for(url)
    api.create_model("fraud", segments=["eu", "us"], n_bins=500)
    token = api.create_key("fraud", ("ingest",))
    edges = np.array(api.client.get("/v1/models/fraud/bins", headers=api.admin).json()["edges"])
    scores, labels, segments, statuses = _run_clients(api, token, threads, per_thread)
    assert statuses == [202] * (threads * per_thread)
    from app.db.session import make_engine

    engine = make_engine(url)
    try:
        _check_totals(engine, edges, scores, labels, segments, threads * per_thread)
    finally:
        engine.dispose()
