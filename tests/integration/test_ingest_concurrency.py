"""Concurrent batches into one window never lose an increment and never deadlock.

16 client threads post 50 small batches each through the real app at once (the
handlers run in the server's thread pool, each with its own session and
connection) while workers fold the deltas (two worker threads on PostgreSQL,
one on SQLite, as in embedded mode): every batch appends its own deltas, the
workers fold them under the fence, and at the end the window holds exactly
one aggregate of all rows, and its metrics are those of all rows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from _metric_compare import assert_matches_evaluate
from _worker_support import fold_pending, session_factory_for
from sqlalchemy.orm import Session

from app.db.models import Batch, BatchDelta, WindowAggregate
from app.db.session import make_engine
from app.metrics import evaluate
from app.metrics.binning import histogram_counts
from app.metrics.probability import ProbabilitySums
from app.services.windows.aggregate_row import confusion_counts
from app.worker.runner import build_loop
from app.worker.settings import WorkerSettings

THREADS = 16
BATCHES_PER_THREAD = 50
ROWS = 20


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
        assert s.scalar(sa.select(sa.func.count()).select_from(BatchDelta)) == 0
    seg = np.array([x or "" for x in segments])
    for key, mask in [("*", np.ones(seg.size, bool)), ("eu", seg == "eu"), ("us", seg == "us")]:
        agg = aggs[key]
        assert agg.n == mask.sum() and agg.positives == labels[mask].sum()
        expected_batches = int(mask.sum()) // ROWS
        assert agg.batches == expected_batches and 1 <= agg.version <= expected_batches
        pos, neg = histogram_counts(scores[mask], labels[mask], edges)
        np.testing.assert_array_equal(agg.hist_positives, pos)
        np.testing.assert_array_equal(agg.hist_negatives, neg)
        cm = confusion_counts(agg, 0)
        pred = scores[mask] >= 0.5
        assert cm.tp == np.sum(pred & labels[mask]) and cm.tn == np.sum(~pred & ~labels[mask])
        assert agg.sums_positives == labels[mask].sum()
        expected = ProbabilitySums.from_predictions(scores[mask], labels[mask])
        assert agg.brier_sum == pytest.approx(expected.brier_sum, rel=1e-12)
        assert agg.log_loss_sum == pytest.approx(expected.log_loss_sum, rel=1e-12)


def _check_metrics(api: Any, token: str, scores: np.ndarray, labels: np.ndarray) -> None:
    """The stored all-traffic window's metrics are those of one evaluation of every row."""
    read = api.client.get("/v1/models/fraud/windows", headers=api.bearer(token)).json()
    (window,) = [w for w in read["windows"] if w["segment"] is None]
    assert window["status"] == "fresh" and window["n"] == scores.size
    expected = evaluate(scores, labels.astype(int), threshold=0.5, pi0=0.1, cost_ratio=0.7)
    assert_matches_evaluate(window["metrics"], expected, same_names=False)


@pytest.mark.postgres
@pytest.mark.slow
def test_sixteen_concurrent_clients_on_postgres(pg_url: str, api_for: Callable[..., Any]) -> None:
    _concurrent(pg_url, api_for, THREADS, BATCHES_PER_THREAD, workers=2)


def test_concurrent_clients_on_sqlite(sqlite_url: str, api_for: Callable[..., Any]) -> None:
    _concurrent(sqlite_url, api_for, 4, 5, workers=1)


def _concurrent(
    url: str, api_for: Callable[..., Any], threads: int, per_thread: int, *, workers: int
) -> None:
    api = api_for(url)
    api.create_model("fraud", segments=["eu", "us"], pi0=0.1, cost_ratio=0.7)
    token = api.create_key("fraud", ("ingest", "read"))
    edges = np.array(api.client.get("/v1/models/fraud/bins", headers=api.admin).json()["edges"])
    stop = threading.Event()
    with session_factory_for(url) as factory:
        loops = [
            build_loop(factory, WorkerSettings(_env_file=None, poll_interval_seconds=0.01), stop)  # type: ignore[call-arg]
            for _ in range(workers)
        ]
        running = [threading.Thread(target=loop.run) for loop in loops]
        for thread in running:
            thread.start()
        try:
            scores, labels, segments, statuses = _run_clients(api, token, threads, per_thread)
        finally:
            stop.set()
            for thread in running:
                thread.join()
    assert statuses == [202] * (threads * per_thread)
    assert all(loop.stats.errors == 0 for loop in loops)
    fold_pending(url)  # what the workers had not folded yet when the clients stopped
    engine = make_engine(url)
    try:
        _check_totals(engine, edges, scores, labels, segments, threads * per_thread)
    finally:
        engine.dispose()
    _check_metrics(api, token, scores, labels)
