"""The worker loop over the real database (SQLite and PostgreSQL): every dirty
window ends fresh with the result compute_window_result gives for its stored
sums; reference windows, dependents and the embedded-mode thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import numpy as np
import pytest
from _worker_support import (
    aggregate_rows,
    metrics_rows,
    model_row,
    post_batch,
    register_model,
    session_factory_for,
    utcnow,
    window_starts,
)
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import queue
from app.db.models import ALL_SEGMENTS
from app.services.models.config import ModelConfig
from app.services.windows.compute import compute_window_result
from app.services.windows.reference import baseline_period
from app.services.windows.sums import WindowSums
from app.statuses import DriftVerdict
from app.timegrid import isoformat_z
from app.worker.runner import InProcessWorker
from app.worker.settings import WorkerSettings

WAIT_SECONDS = 60.0
FAST = WorkerSettings(
    _env_file=None,  # type: ignore[call-arg]
    poll_interval_seconds=0.02,
    lease_seconds=30.0,
    warm_up=False,
    detail_interval_seconds=0.0,  # every refresh full: results equal compute_window_result's
)


@pytest.fixture
def start_worker(factory: sessionmaker[Session]) -> Iterator[Callable[[], InProcessWorker]]:
    """Start the worker thread (after the models are registered: on SQLite the
    model registration reads then writes, which a concurrent writer can refuse)."""
    started: list[InProcessWorker] = []

    def start() -> InProcessWorker:
        started.append(InProcessWorker(factory, FAST).start())
        return started[-1]

    yield start
    for running in started:
        running.stop(WAIT_SECONDS)
        assert not running.thread.is_alive()


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {WAIT_SECONDS:.0f} s: {what}")
        time.sleep(0.02)


def queue_empty(factory: sessionmaker[Session]) -> bool:
    with factory() as session:
        return queue.queue_stats(session).dirty_windows == 0


def expected_result(
    factory: sessionmaker[Session], model: ModelConfig, segment: str, start: object
) -> dict[str, object]:
    rows = {(r.segment, r.window_start): r for r in aggregate_rows(factory, model.id)}
    period = baseline_period(model, start)  # type: ignore[arg-type]
    reference = None
    if period is not None and not period.contains_window:
        reference = WindowSums.merge(
            WindowSums.from_row(r)
            for (seg, s), r in rows.items()
            if seg == segment and period.start <= s < period.end
        )
    result = compute_window_result(
        model,
        WindowSums.from_row(rows[(segment, start)]),  # type: ignore[index]
        reference,
        in_baseline_period=period is not None and period.contains_window,
    )
    return {"metrics": result.metrics, "drift": result.drift, "curves": result.curves}


def test_every_dirty_window_ends_fresh_with_the_result_of_its_sums(
    factory: sessionmaker[Session], settings: Settings, start_worker: Callable[[], InProcessWorker]
) -> None:
    starts = window_starts(
        ModelConfig.from_row(model_row(factory, register_model(factory, "probe").id)), 4
    )
    model = register_model(
        factory,
        segments=["eu", "us"],
        thresholds=[0.5, 0.3],
        drift={"reference": {"from": isoformat_z(starts[0]), "to": isoformat_z(starts[2])}},
    )
    start_worker()
    rng = np.random.default_rng(21)
    for i, start in enumerate(starts):
        for segment in ("eu", "us"):
            post_batch(
                factory,
                model,
                settings,
                at=start + timedelta(minutes=i),
                rng=rng,
                segment=segment,
                prior=0.2 if i < 2 else 0.05,
            )
    wait_until(lambda: queue_empty(factory), "the queue drains")

    rows = aggregate_rows(factory, model.id)
    stored = metrics_rows(factory, model.id)
    assert len(rows) == len(stored) == 12  # 4 windows x (all, eu, us)
    for row in rows:
        result = stored[(row.segment, row.window_start)]
        assert (result.status, result.aggregate_version) == ("fresh", row.version)
        assert not row.dirty and row.lease_expires_at is None
        want = expected_result(factory, model, row.segment, row.window_start)
        assert {"metrics": result.metrics, "drift": result.drift, "curves": result.curves} == want
        in_reference = row.window_start < starts[2]
        assert (result.drift["verdict"] == DriftVerdict.REFERENCE) is in_reference
    assert stored[(ALL_SEGMENTS, starts[3])].drift["verdict"] in ("prior", "both")


def test_a_reference_window_change_recomputes_its_dependents(
    factory: sessionmaker[Session], settings: Settings, start_worker: Callable[[], InProcessWorker]
) -> None:
    probe = register_model(factory, "probe")
    starts = window_starts(probe, 3)
    model = register_model(
        factory, drift={"reference": {"from": isoformat_z(starts[0]), "to": isoformat_z(starts[1])}}
    )
    start_worker()
    rng = np.random.default_rng(22)
    for start in starts:
        post_batch(factory, model, settings, at=start, rng=rng)
    wait_until(lambda: queue_empty(factory), "the queue drains")
    before = metrics_rows(factory, model.id)[(ALL_SEGMENTS, starts[2])]

    post_batch(factory, model, settings, at=starts[0], rng=rng, prior=0.6)  # backfill
    wait_until(
        lambda: (
            metrics_rows(factory, model.id)[(ALL_SEGMENTS, starts[2])].computed_at
            > before.computed_at
        ),
        "the dependent window is recomputed",
    )
    wait_until(lambda: queue_empty(factory), "the queue drains")
    after = metrics_rows(factory, model.id)[(ALL_SEGMENTS, starts[2])]
    assert after.aggregate_version == before.aggregate_version == 1
    assert after.drift["prior"]["reference_prior"] != before.drift["prior"]["reference_prior"]
    assert after.drift == expected_result(factory, model, ALL_SEGMENTS, starts[2])["drift"]


def test_a_failing_window_is_stored_as_error_and_not_retried(
    factory: sessionmaker[Session],
    settings: Settings,
    start_worker: Callable[[], InProcessWorker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = register_model(factory)
    (start,) = window_starts(model, 1)
    calls = {"n": 0}
    real = compute_window_result

    def broken(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        raise FloatingPointError("boom")

    import app.services.refresh.groups as refresh

    monkeypatch.setattr(refresh, "compute_window_result", broken)
    start_worker()
    post_batch(factory, model, settings, at=start, rng=np.random.default_rng(23))
    wait_until(lambda: queue_empty(factory), "the failing window is settled")
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    assert stored.status == "error" and stored.error == "FloatingPointError: boom"
    time.sleep(0.2)  # several polls: the window must not be claimed again
    assert calls["n"] == 1

    monkeypatch.setattr(refresh, "compute_window_result", real)
    post_batch(factory, model, settings, at=start, rng=np.random.default_rng(24))
    wait_until(
        lambda: metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)].status == "fresh",
        "a new batch recomputes it",
    )


def test_serve_on_sqlite_runs_one_worker_thread(sqlite_url: str) -> None:
    from fastapi.testclient import TestClient

    from app.main import create_app

    before = {t.name for t in threading.enumerate()}
    app_settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=sqlite_url,
        admin_token="embedded-admin-token-0123456789",
        embedded_worker=True,
    )
    with session_factory_for(sqlite_url) as factory, TestClient(create_app(app_settings)):
        workers = [t for t in threading.enumerate() if t.name == "priorwatch-worker"]
        assert len(workers) == 1 and "priorwatch-worker" not in before
        model = register_model(factory)
        (start,) = window_starts(model, 1)
        post_batch(factory, model, app_settings, at=start, rng=np.random.default_rng(25))
        wait_until(
            lambda: (ALL_SEGMENTS, start) in metrics_rows(factory, model.id),
            "the embedded worker computes the window",
        )
    assert not any(t.name == "priorwatch-worker" for t in threading.enumerate())


def test_changing_pi0_recomputes_the_stored_windows(
    factory: sessionmaker[Session], settings: Settings, start_worker: Callable[[], InProcessWorker]
) -> None:
    from app.services.models.registry import get_model, update_model
    from app.services.models.settings import ModelUpdate

    model = register_model(factory, pi0=0.1)
    starts = window_starts(model, 2)
    rng = np.random.default_rng(26)
    for start in starts:
        post_batch(factory, model, settings, at=start, rng=rng)
    start_worker()
    wait_until(lambda: queue_empty(factory), "the queue drains")
    before = metrics_rows(factory, model.id)

    with factory() as session:
        update_model(session, get_model(session, model.name), ModelUpdate(pi0=0.5), utcnow())
    wait_until(lambda: queue_empty(factory), "the windows are recomputed")
    after = metrics_rows(factory, model.id)
    updated = ModelConfig.from_row(model_row(factory, model.id))
    for key, row in after.items():
        assert row.aggregate_version == before[key].aggregate_version
        assert row.metrics["calibrated_f1"] != before[key].metrics["calibrated_f1"]
        assert row.metrics == expected_result(factory, updated, *key)["metrics"]
