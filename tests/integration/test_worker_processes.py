"""Real ``priorwatch worker`` processes on PostgreSQL: two in parallel, one
SIGKILLed in the middle of a window, a database outage, graceful SIGTERM.

Every wait is bounded. Worker processes get their own database ``application_name``
so that the test can see, in ``pg_stat_activity``, which one is doing what.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from _worker_support import (
    aggregate_rows,
    metrics_rows,
    post_batch,
    register_model,
    window_starts,
)
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import queue
from app.db.models import ALL_SEGMENTS, WindowMetrics

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

WAIT_SECONDS = 90.0
"""Bound of every wait (start-up includes building the OPS reference curves)."""
LEASE_SECONDS = 2.0
"""The workers' lease: a killed worker's window is taken over after about this."""
APP_PREFIX = "pw-test-worker-"


def _worker_command() -> list[str]:
    exe = Path(sys.executable).with_name("priorwatch")
    if exe.exists():
        return [str(exe), "worker"]
    found = shutil.which("priorwatch")
    assert found, "the priorwatch command is not installed"
    return [found, "worker"]


@dataclass
class WorkerProcess:
    """A ``priorwatch worker`` subprocess and the lines it logged."""

    name: str
    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def log(self) -> str:
        return "".join(self.lines)

    def wait_for_line(self, pattern: str) -> re.Match[str]:
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            for line in list(self.lines):
                found = re.search(pattern, line)
                if found:
                    return found
            if self.proc.poll() is not None and self.reader is not None:
                self.reader.join(1)
            time.sleep(0.05)
        pytest.fail(f"{self.name} never logged {pattern!r}:\n{self.log()[-3000:]}")


def _read_lines(worker: WorkerProcess) -> None:
    assert worker.proc.stderr is not None
    for line in worker.proc.stderr:
        worker.lines.append(line)


@pytest.fixture
def start_worker(pg_url: str, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(name: str, **settings: str) -> WorkerProcess:
        """A worker process; ``settings`` add ``PRIORWATCH_WORKER_<NAME>`` variables."""
        url = make_url(pg_url).update_query_dict({"application_name": APP_PREFIX + name})
        env = {
            **os.environ,
            "PRIORWATCH_DATABASE_URL": url.render_as_string(hide_password=False),
            "PRIORWATCH_WORKER_LEASE_SECONDS": str(LEASE_SECONDS),
            "PRIORWATCH_WORKER_POLL_INTERVAL_SECONDS": "0.05",
            "PRIORWATCH_WORKER_BACKOFF_MAX_SECONDS": "0.5",
            **{f"PRIORWATCH_WORKER_{k.upper()}": v for k, v in settings.items()},
        }
        proc = subprocess.Popen(
            _worker_command(),
            env=env,
            cwd=tmp_path,  # no .env file from the source tree
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        worker = WorkerProcess(name, proc)
        worker.reader = threading.Thread(target=_read_lines, args=(worker,), daemon=True)
        worker.reader.start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.proc.poll() is None:
            worker.proc.kill()
        worker.proc.wait(WAIT_SECONDS)
        if worker.reader is not None:
            worker.reader.join(WAIT_SECONDS)
        assert worker.proc.stderr is not None
        worker.proc.stderr.close()


@pytest.fixture
def database_url(pg_url: str) -> str:
    """PostgreSQL only (``factory`` and ``settings`` of conftest.py are built on it)."""
    return pg_url


@pytest.fixture
def admin(pg_url: str) -> Iterator[sa.Engine]:
    """A connection to the server's maintenance database (outside the test database)."""
    engine = sa.create_engine(
        make_url(pg_url).set(database="postgres"), isolation_level="AUTOCOMMIT"
    )
    yield engine
    engine.dispose()


def wait_until(condition: Callable[[], bool], what: str, workers: list[WorkerProcess]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {w.name}\n{w.log()[-2000:]}" for w in workers)
            pytest.fail(f"not within {WAIT_SECONDS:.0f} s: {what}\n{logs}")
        time.sleep(0.05)


def drained(factory: sessionmaker[Session]) -> bool:
    with factory() as session:
        return queue.queue_stats(session).dirty_windows == 0


def assert_all_fresh(factory: sessionmaker[Session], model_id: int) -> None:
    rows = aggregate_rows(factory, model_id)
    stored = metrics_rows(factory, model_id)
    assert len(stored) == len(rows)
    for row in rows:
        result = stored[(row.segment, row.window_start)]
        assert (result.status, result.aggregate_version) == ("fresh", row.version)
        assert not row.dirty and row.lease_expires_at is None


def stop_gracefully(worker: WorkerProcess) -> int:
    """SIGTERM, wait for a clean exit; returns the jobs the worker reported."""
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.wait(WAIT_SECONDS) == 0, worker.log()[-2000:]
    assert worker.reader is not None
    worker.reader.join(WAIT_SECONDS)
    return int(worker.wait_for_line(r"worker loop stopped: (\d+) jobs run").group(1))


def test_two_workers_share_the_backlog_and_never_compute_a_window_twice(
    factory: sessionmaker[Session], settings: Settings, start_worker: Callable[..., WorkerProcess]
) -> None:
    # every refresh full: one claim per window (summary first would claim a closed
    # window a second time for its detail, test_tiered_refresh.py). No worker dies here,
    # so the lease is long: a first refresh builds its prior's OPS nodes, which on a
    # loaded machine outlasted the 2 s lease and the window was rightly claimed again.
    workers = [
        start_worker(name, detail_interval_seconds="0", lease_seconds="30") for name in ("a", "b")
    ]
    for w in workers:
        w.wait_for_line("worker ready")
    model = register_model(factory, segments=["eu"])
    rng = np.random.default_rng(31)
    for start in window_starts(model, 24):
        post_batch(factory, model, settings, at=start, rng=rng, segment="eu", n=300)
    wait_until(lambda: drained(factory), "the backlog drains", workers)

    assert_all_fresh(factory, model.id)
    rows = aggregate_rows(factory, model.id)
    assert len(rows) == 48
    assert {r.claim_attempt for r in rows} == {1}  # each window claimed exactly once
    jobs = [stop_gracefully(w) for w in workers]
    assert sum(jobs) == 48
    assert min(jobs) > 0, f"one worker did nothing: {jobs}"


def _backend_waiting_on_a_lock(admin: sa.Engine, database: str) -> str | None:
    with admin.connect() as conn:
        return conn.execute(
            sa.text(
                "SELECT application_name FROM pg_stat_activity WHERE datname = :db "
                "AND application_name LIKE :prefix AND wait_event_type = 'Lock'"
            ),
            {"db": database, "prefix": APP_PREFIX + "%"},
        ).scalar()


def test_sigkill_in_the_middle_of_a_window_loses_nothing(
    factory: sessionmaker[Session],
    settings: Settings,
    start_worker: Callable[[str], WorkerProcess],
    admin: sa.Engine,
    pg_url: str,
) -> None:
    workers = {name: start_worker(name) for name in ("a", "b")}
    for w in workers.values():
        w.wait_for_line("worker ready")
    model = register_model(factory)
    (start,) = window_starts(model, 1)
    rng = np.random.default_rng(32)
    post_batch(factory, model, settings, at=start, rng=rng)
    wait_until(lambda: drained(factory), "the first version is computed", list(workers.values()))

    # Hold the stored result's row: the next completion blocks inside its
    # transaction, after claiming, computing and fencing -- mid-window.
    with factory() as blocker:
        blocker.execute(
            sa.select(WindowMetrics).where(WindowMetrics.model_id == model.id).with_for_update()
        ).all()
        post_batch(factory, model, settings, at=start, rng=rng)
        database = make_url(pg_url).database
        assert database is not None
        blocked: list[str] = []

        def someone_blocked() -> bool:
            app = _backend_waiting_on_a_lock(admin, database)
            if app:
                blocked.append(app)
            return bool(app)

        wait_until(
            someone_blocked, "a worker blocks while completing the window", [*workers.values()]
        )
        victim = workers[blocked[0].removeprefix(APP_PREFIX)]
        (held,) = aggregate_rows(factory, model.id)
        victim.proc.send_signal(signal.SIGKILL)
        assert victim.proc.wait(WAIT_SECONDS) == -signal.SIGKILL
        blocker.rollback()

    survivor = next(w for w in workers.values() if w is not victim)
    wait_until(lambda: drained(factory), "the survivor finishes the window", [survivor])
    (row,) = aggregate_rows(factory, model.id)
    assert row.version == 2 and row.claim_attempt == held.claim_attempt + 1
    assert_all_fresh(factory, model.id)
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    assert stored.metrics["prior"] == pytest.approx(row.positives / row.n)
    assert survivor.proc.poll() is None
    stop_gracefully(survivor)


def test_workers_wait_through_a_database_outage_and_resume(
    factory: sessionmaker[Session],
    settings: Settings,
    start_worker: Callable[[str], WorkerProcess],
    admin: sa.Engine,
    pg_url: str,
) -> None:
    workers = [start_worker("a"), start_worker("b")]
    for w in workers:
        w.wait_for_line("worker ready")
    model = register_model(factory)
    starts = window_starts(model, 4)
    rng = np.random.default_rng(33)
    post_batch(factory, model, settings, at=starts[0], rng=rng)
    wait_until(lambda: drained(factory), "the first window is computed", workers)

    database = make_url(pg_url).database
    # The "restart": refuse new connections and terminate every backend of the
    # test database (the workers' pooled connections die), for a while.
    with admin.connect() as conn:
        conn.execute(sa.text(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false'))
        conn.execute(
            sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :db AND pid <> pg_backend_pid()"
            ),
            {"db": database},
        )
    try:
        for w in workers:
            w.wait_for_line(r"worker error #\d+, retrying")
        assert all(w.proc.poll() is None for w in workers)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true'))

    factory.kw["bind"].dispose()  # the test's own pooled connections died too
    for start in starts[1:]:
        post_batch(factory, model, settings, at=start, rng=rng)
    wait_until(lambda: drained(factory), "the workers resume", workers)
    assert_all_fresh(factory, model.id)
    for w in workers:
        w.wait_for_line("worker resumed after")
        assert w.proc.poll() is None
        stop_gracefully(w)
