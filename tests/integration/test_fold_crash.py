"""A worker that dies while folding loses nothing and folds nothing twice.

The fold (the aggregate's new sums, the claimed deltas deleted) and the
stored result share one transaction. These tests stop a worker after the
fold's statements ran and before its commit: by an exception in the same
process, and by SIGKILL of a worker process (the database sees the
connection vanish mid-transaction). Another worker then claims the window
once the lease expires and folds every delta exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from _worker_support import (
    aggregate_rows,
    claim_one,
    persist_one,
    post_batch,
    register_model,
    session_factory_for,
    window_starts,
)
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import queue
from app.db.models import BatchDelta
from app.services.refresh.groups import Outcome
from app.services.windows.compute import WindowResult

LEASE_SECONDS = 0.3
BATCHES = 3
ROWS = 400

DUMMY = WindowResult(metrics={"f1": 0.5}, reasons={}, intervals={}, drift=None, curves=None)


def _deltas(factory: sessionmaker[Session]) -> int:
    with factory() as session:
        return int(session.scalar(sa.select(sa.func.count()).select_from(BatchDelta)) or 0)


def _fill(factory: sessionmaker[Session], settings: Settings) -> int:
    model = register_model(factory)
    (start,) = window_starts(model, 1)
    rng = np.random.default_rng(11)
    for _ in range(BATCHES):
        post_batch(factory, model, settings, at=start, rng=rng, n=ROWS)
    return model.id


def _recover_and_check(factory: sessionmaker[Session], model_id: int) -> None:
    """Nothing was folded by the dead worker; the next claim folds each delta once."""
    (row,) = aggregate_rows(factory, model_id)
    assert (row.n, row.batches, row.version) == (0, 0, 0)
    assert _deltas(factory) == BATCHES
    time.sleep(LEASE_SECONDS * 2)  # the dead worker's lease expires
    claimed = claim_one(factory)
    assert claimed is not None and len(claimed.batch_ids) == BATCHES
    assert persist_one(factory, claimed, DUMMY) is Outcome.STORED
    (row,) = aggregate_rows(factory, model_id)
    assert (row.n, row.batches, row.version) == (BATCHES * ROWS, BATCHES, 1)
    assert _deltas(factory) == 0
    assert claim_one(factory) is None


class _Crash(Exception):
    pass


def test_an_error_between_fold_and_commit_rolls_the_fold_back(
    database_url: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with session_factory_for(database_url) as factory:
        model_id = _fill(factory, settings)
        claimed = claim_one(factory, LEASE_SECONDS)
        assert claimed is not None and len(claimed.batch_ids) == BATCHES

        def crash(*_args: object, **_kwargs: object) -> None:
            raise _Crash  # the fold's UPDATE and DELETE ran; the commit does not

        monkeypatch.setattr(queue, "upsert_window_metrics", crash)
        with pytest.raises(_Crash):
            persist_one(factory, claimed, DUMMY)
        monkeypatch.undo()
        _recover_and_check(factory, model_id)


_KILLED_WORKER = textwrap.dedent(
    """
    import os, signal, sys
    from sqlalchemy import text
    from app.config import Settings
    from app.db import queue
    from app.db.session import make_engine, make_session_factory
    from app.services.windows.compute import WindowResult
    from app.services.refresh.groups import Computed, claim_windows, persist_group

    url, lease = sys.argv[1], float(sys.argv[2])
    factory = make_session_factory(make_engine(url, Settings(_env_file=None, database_url=url)))
    with factory() as session:
        (claimed,) = claim_windows(session, lease_seconds=lease)
    assert claimed.batch_ids

    def die(session, *args, **kwargs):
        left = session.execute(text("SELECT count(*) FROM batch_delta")).scalar_one()
        print(f"folded, not committed; deltas left in the transaction: {left}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    queue.upsert_window_metrics = die
    with factory() as session:
        persist_group(session, [Computed(claimed, WindowResult({}, {}, {}, None, None))])
    """
)


def test_a_worker_killed_between_fold_and_commit_folds_nothing(
    database_url: str, settings: Settings, tmp_path: Path
) -> None:
    with session_factory_for(database_url) as factory:
        model_id = _fill(factory, settings)
        script = tmp_path / "killed_worker.py"
        script.write_text(_KILLED_WORKER)
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        done = subprocess.run(
            [sys.executable, str(script), database_url, str(LEASE_SECONDS)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert done.returncode == -signal.SIGKILL, done.stderr
        assert "deltas left in the transaction: 0" in done.stdout  # killed after the fold
        _recover_and_check(factory, model_id)


def test_a_claimed_delta_gone_at_fold_time_rolls_the_fold_back(
    database_url: str, settings: Settings
) -> None:
    """The fold deletes every claimed delta or nothing (a delta is never folded twice)."""
    with session_factory_for(database_url) as factory:
        model_id = _fill(factory, settings)
        claimed = claim_one(factory)
        assert claimed is not None
        with factory() as session, session.begin():  # as if another fold had taken one
            session.execute(
                sa.delete(BatchDelta).where(BatchDelta.batch_id == claimed.batch_ids[0])
            )
        with pytest.raises(queue.DoubleFold):
            persist_one(factory, claimed, DUMMY)
        (row,) = aggregate_rows(factory, model_id)
        assert (row.n, row.batches, row.version) == (0, 0, 0)  # nothing folded
        assert _deltas(factory) == BATCHES - 1
