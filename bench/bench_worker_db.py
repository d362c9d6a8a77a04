"""The worker's database time per window: claims and completions, grouped or not.

A backlog of ``--windows`` windows (one 2,000-row batch each, PostgreSQL) is
marked dirty ``--rounds`` times and drained in this process by the worker's
job source, with the computation replaced by a stored result: what is left
is the claim (claim statement, deltas, models) and the completion (lock,
fold, result upsert) of every window. Printed per group size: milliseconds
of claim and of completion per window, and the ratio of the total to group
size 1 (the baseline, same run).

Usage: ``python bench/bench_worker_db.py [--windows 40] [--rounds 5] [--groups 1 4 8 16]``.
Needs the PostgreSQL server of PRIORWATCH_TEST_POSTGRES_URL; prints a notice and
exits 0 when it is unreachable.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from _common import migrated_postgres_database, model_on
from bench_worker import now, post
from sqlalchemy.orm import Session, sessionmaker

from app.db import queue
from app.db.session import write_transaction
from app.services.models.config import ModelConfig
from app.services.refresh import groups as window_refresh
from app.services.windows.compute import WindowResult
from app.timegrid import window_length, window_start
from app.worker.jobs import DatabaseJobs


def drain(jobs: DatabaseJobs) -> tuple[float, float, int]:
    """Claim and run until the queue is empty: (claim seconds, run seconds, windows)."""
    claiming = running = 0.0
    windows = 0
    while True:
        started = time.perf_counter()
        group = jobs.claim()
        claimed = time.perf_counter()
        claiming += claimed - started
        if group is None:
            return claiming, running, windows
        windows += jobs.run(group)
        running += time.perf_counter() - claimed


def measure(
    factory: sessionmaker[Session], model: ModelConfig, group_size: int, rounds: int
) -> tuple[float, float]:
    """Claim and completion seconds per window with groups of ``group_size``."""
    jobs = DatabaseJobs(factory, lease_seconds=60, claim_group_size=group_size)
    claiming = running = 0.0
    windows = 0
    for _ in range(rounds):
        with factory() as session, write_transaction(session):
            queue.invalidate_windows(session, model.id, now=now())
        c, r, n = drain(jobs)
        claiming, running, windows = claiming + c, running + r, windows + n
    return claiming / windows, running / windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--groups", type=int, nargs="+", default=[1, 4, 8, 16])
    args = parser.parse_args()
    with migrated_postgres_database() as url:
        if url is None:
            return
        spec = {"name": "bench", "pi0": 0.05, "cost_ratio": 0.8, "window": "5m"}
        settings, engine, factory, model = model_on(url, spec, now())
        rng = np.random.default_rng(1)
        last = window_start(now(), model.window)
        for k in range(args.windows):
            post(factory, model, settings, last - k * window_length(model.window), rng, n=2_000)
        drain(DatabaseJobs(factory, lease_seconds=60))  # fold the batches, store real results
        real = window_refresh.compute_window_result
        stored: list[WindowResult] = []

        def stored_result(*a: Any, **kw: Any) -> WindowResult:
            if not stored:
                stored.append(real(*a, **kw))
            return stored[0]

        window_refresh.compute_window_result = stored_result  # type: ignore[assignment]
        print(
            f"database time per window, {args.windows} windows x {args.rounds} rounds "
            "(computation replaced by a stored result):"
        )
        baseline = 0.0
        for group_size in [1, *[g for g in args.groups if g != 1]]:
            claim, complete = measure(factory, model, group_size, args.rounds)
            total = claim + complete
            baseline = baseline or total
            print(
                f"  group size {group_size:3d}: claim {claim * 1e3:6.2f} ms, completion "
                f"{complete * 1e3:6.2f} ms, total {total * 1e3:6.2f} ms per window "
                f"(x{baseline / total:.2f} less than group size 1)"
            )
        engine.dispose()


if __name__ == "__main__":
    main()
