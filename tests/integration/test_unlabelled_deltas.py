"""Unlabelled rows on the append-then-fold path: through a delta, folded exactly once.

Labelled and unlabelled batches are posted at once into one window (and its
segments) while workers fold; at the end no delta is left, and every
aggregate holds exactly the labelled rows in ``n``/histograms and the
unlabelled rows in ``n_unlabelled``/``hist_unlabelled`` (each batch once).
A window holding only unlabelled rows is claimed, folded and becomes fresh.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from _worker_support import fold_pending, session_factory_for
from sqlalchemy.orm import Session

from app.db.models import ALL_SEGMENTS, BatchDelta, WindowAggregate, WindowMetrics
from app.db.session import make_engine
from app.exporter.reads import read_models
from app.metrics.binning import histogram_counts
from app.worker.runner import build_loop
from app.worker.settings import WorkerSettings

ROWS = 20


def _jobs(count: int, rng: np.random.Generator) -> list[tuple[dict[str, Any], Any, Any, Any]]:
    """Alternately labelled and unlabelled scores batches over the segments (None, eu, us)."""
    now = datetime.now(UTC).isoformat()
    jobs = []
    for i in range(count):
        s = rng.random(ROWS)
        y = (rng.random(ROWS) < 0.3).astype(int) if i % 2 == 0 else None
        segment = [None, "eu", "us"][(i // 2) % 3]
        body: dict[str, Any] = {"timestamp": now, "scores": s.tolist()}
        if y is not None:
            body["labels"] = y.tolist()
        if segment is not None:
            body["segment"] = segment
        jobs.append((body, s, y, segment))
    return jobs


def _rows(db: sa.Engine) -> tuple[dict[str, WindowAggregate], int]:
    with Session(db) as s:
        aggregates = {a.segment: a for a in s.scalars(sa.select(WindowAggregate))}
        deltas = s.scalar(sa.select(sa.func.count()).select_from(BatchDelta))
    return aggregates, int(deltas or 0)


def _concurrent(url: str, api_for: Callable[..., Any], count: int, *, workers: int) -> None:
    api = api_for(url)
    api.create_model("fraud", segments=["eu", "us"], pi0=0.1, cost_ratio=0.7)
    token = api.create_key("fraud", ("ingest", "read"))
    edges = np.array(api.client.get("/v1/models/fraud/bins", headers=api.admin).json()["edges"])
    jobs = _jobs(count, np.random.default_rng(7))
    stop = threading.Event()
    with session_factory_for(url) as factory:
        settings = WorkerSettings(_env_file=None, poll_interval_seconds=0.01, settle_seconds=0)  # type: ignore[call-arg]
        loops = [build_loop(factory, settings, stop) for _ in range(workers)]
        running = [threading.Thread(target=loop.run) for loop in loops]
        for thread in running:
            thread.start()
        try:
            with ThreadPoolExecutor(max_workers=8) as pool:
                statuses = list(
                    pool.map(
                        lambda job: api.post_batch("fraud", token, job[0]).status_code,
                        jobs,
                    )
                )
        finally:
            stop.set()
            for thread in running:
                thread.join()
    assert statuses == [202] * count
    assert all(loop.stats.errors == 0 for loop in loops)
    fold_pending(url)
    assert fold_pending(url) == 0  # nothing left to claim: each delta was folded once

    db = make_engine(url)
    try:
        aggregates, deltas = _rows(db)
        assert deltas == 0
        for key in (ALL_SEGMENTS, "eu", "us"):
            mine = [j for j in jobs if key == ALL_SEGMENTS or j[3] == key]
            labelled = [j for j in mine if j[2] is not None]
            unlabelled = [j for j in mine if j[2] is None]
            agg = aggregates[key]
            assert agg.batches == len(mine)
            s = np.concatenate([j[1] for j in labelled])
            y = np.concatenate([j[2] for j in labelled])
            assert (agg.n, agg.positives) == (s.size, int(y.sum()))
            pos, neg = histogram_counts(s, y, edges)
            np.testing.assert_array_equal(agg.hist_positives, pos)
            np.testing.assert_array_equal(agg.hist_negatives, neg)
            u = np.concatenate([j[1] for j in unlabelled])
            assert agg.n_unlabelled == u.size
            expected, _ = histogram_counts(u, np.ones(u.size, dtype=int), edges)
            np.testing.assert_array_equal(agg.hist_unlabelled, expected)
        with Session(db) as s:
            ((_, batches, rows),) = [(m.name, m.batches, m.rows) for m in read_models(s)]
            assert (batches, rows) == (count, count * ROWS)
            statuses_stored = set(s.scalars(sa.select(WindowMetrics.status)))
            assert statuses_stored == {"fresh"}
    finally:
        db.dispose()
    read = api.client.get("/v1/models/fraud/windows", headers=api.bearer(token)).json()
    (window,) = [w for w in read["windows"] if w["segment"] is None]
    assert window["status"] == "fresh"
    assert (window["n"], window["n_unlabelled"]) == (count // 2 * ROWS, count // 2 * ROWS)


@pytest.mark.postgres
def test_concurrent_labelled_and_unlabelled_batches_fold_once_on_postgres(
    pg_url: str, api_for: Callable[..., Any]
) -> None:
    _concurrent(pg_url, api_for, 120, workers=2)


def test_concurrent_labelled_and_unlabelled_batches_fold_once_on_sqlite(
    sqlite_url: str, api_for: Callable[..., Any]
) -> None:
    _concurrent(sqlite_url, api_for, 24, workers=1)


def test_a_window_of_unlabelled_rows_only_is_folded_and_fresh(
    database_url: str, api_for: Callable[..., Any]
) -> None:
    api = api_for(database_url)
    api.create_model("fraud", pi0=0.1)
    token = api.create_key("fraud", ("ingest", "read"))
    at = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    body = {"timestamp": at, "histogram": {"unlabelled": {"bins": [3, 90], "counts": [4, 5]}}}
    r = api.post_batch("fraud", token, body)
    assert r.status_code == 202, r.text
    assert r.json()["count"] == 9

    db = make_engine(database_url)
    try:
        aggregates, deltas = _rows(db)
        assert deltas == 1 and aggregates[ALL_SEGMENTS].n_unlabelled == 0  # not folded yet
        with Session(db) as s:
            (delta,) = s.scalars(sa.select(BatchDelta))
            assert (delta.n, delta.n_unlabelled) == (0, 9)
            assert delta.bins.tolist() == [3, 90] and delta.bin_unlabelled.tolist() == [4, 5]
            assert delta.bin_positives is None and delta.bin_negatives is None
            assert [(m.batches, m.rows) for m in read_models(s)] == [(1, 9.0)]
        (window,) = api.client.get("/v1/models/fraud/windows", headers=api.bearer(token)).json()[
            "windows"
        ]
        assert (window["status"], window["n"], window["n_unlabelled"]) == ("pending", 0, 9)

        assert fold_pending(database_url) == 1  # claimed although it has no labelled row
        assert fold_pending(database_url) == 0

        aggregates, deltas = _rows(db)
        agg = aggregates[ALL_SEGMENTS]
        assert deltas == 0
        assert (agg.n, agg.n_unlabelled, agg.batches, agg.version) == (0, 9, 1, 1)
        assert agg.hist_positives is None and agg.hist_negatives is None
        expected = np.zeros(agg.hist_unlabelled.size, dtype=np.int64)
        expected[[3, 90]] = [4, 5]
        np.testing.assert_array_equal(agg.hist_unlabelled, expected)
        with Session(db) as s:
            assert [(m.batches, m.rows) for m in read_models(s)] == [(1, 9.0)]
    finally:
        db.dispose()
    (window,) = api.client.get("/v1/models/fraud/windows", headers=api.bearer(token)).json()[
        "windows"
    ]
    assert (window["status"], window["n"], window["n_unlabelled"]) == ("fresh", 0, 9)
