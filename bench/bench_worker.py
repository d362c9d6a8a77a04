"""Worker throughput (1 vs 2 worker processes) and freshness, on PostgreSQL.

* Throughput: real ``priorwatch worker`` processes are started and warmed up;
  then every window of a backlog (``--windows`` windows with the default
  10,000 bins) is marked dirty in one transaction and the script times how
  long the queue takes to drain. Printed: windows/s for 1 and 2 workers and
  their ratio (the baseline is 1 worker, same run), for two backlogs:
  *closed* windows (past windows of one model: every refresh is full) and
  *open* windows (the current window of ``--windows`` models: every refresh
  is a summary, the detail not being due; docs/worker.md, "Tiered refresh"),
  and the ratio open / closed. ``--open-only`` / ``--closed-only`` run one.
* Freshness: with one idle worker, ``--batches`` single batches are ingested
  one after another (light load); for each, the time from the batch's commit
  until the window's stored result carries the new aggregate version.
  Printed: median, 95th percentile and maximum (target: under 2 s).
* Compute: the time of ``compute_window_result`` alone for one such window,
  in this process, full (metrics, intervals, drift, curves) and summary only,
  as a reference.

Usage: ``python bench/bench_worker.py [--windows 60] [--batches 20] [--rounds 3]
[--open-only | --closed-only]``.
Needs the PostgreSQL server of PRIORWATCH_TEST_POSTGRES_URL (default
postgresql+psycopg://postgres@127.0.0.1:5432/postgres); prints a notice and
exits 0 when it is unreachable. Every wait is bounded; the worker processes
are stopped (SIGTERM) and the temporary database is dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import orjson
import sqlalchemy as sa
from _common import cpu_seconds, migrated_postgres_database, wait_drained, worker_processes
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import queue
from app.db.models import WindowMetrics
from app.db.session import make_engine, make_session_factory, write_transaction
from app.services.ingest.batch import ingest_batch
from app.services.models.config import ModelConfig
from app.services.models.registry import create_model
from app.services.models.settings import ModelCreate
from app.services.windows.compute import Tier, compute_window_result
from app.services.windows.sums import WindowSums
from app.timegrid import window_length, window_start
from app.worker.jobs import DatabaseJobs

WAIT_SECONDS = 300.0


def now() -> datetime:
    return datetime.now(UTC)


def post(
    factory: sessionmaker[Session],
    model: ModelConfig,
    settings: Settings,
    at: datetime,
    rng: np.random.Generator,
    n: int = 5_000,
) -> None:
    labels = (rng.random(n) < 0.05).astype(int)
    scores = 1.0 / (1.0 + np.exp(-(rng.normal(size=n) + 2.0 * labels - 3.0)))
    body = orjson.dumps(
        {"timestamp": at.isoformat(), "scores": scores.tolist(), "labels": labels.tolist()}
    )
    with factory() as session:
        ingest_batch(session, model, body, idempotency_key=None, settings=settings, now=now())


def throughput(
    url: str,
    engine: sa.Engine,
    factory: sessionmaker[Session],
    models: list[ModelConfig],
    count: int,
    workdir: Path,
    rounds: int,
) -> float:
    """Best-of-``rounds`` windows/s of ``count`` workers on the whole backlog."""
    best = 0.0
    with worker_processes(url, count, workdir, WAIT_SECONDS) as procs:
        wait_drained(engine, WAIT_SECONDS)
        for _ in range(rounds):
            with factory() as session, write_transaction(session):
                at = now()
                marked = sum(queue.invalidate_windows(session, m.id, now=at) for m in models)
            cpu_before = sum(cpu_seconds(p.pid) for p in procs)
            started = time.perf_counter()
            wait_drained(engine, WAIT_SECONDS)
            elapsed = time.perf_counter() - started
            cpu = sum(cpu_seconds(p.pid) for p in procs) - cpu_before
            rate = marked / elapsed
            best = max(best, rate)
            print(
                f"  {count} worker(s): {marked} windows in {elapsed:6.2f} s = {rate:6.1f} "
                f"windows/s; worker CPU {cpu / marked * 1e3:5.1f} ms per window; "
                f"load average {os.getloadavg()[0]:.1f}"
            )
    return best


def freshness(
    url: str,
    engine: sa.Engine,
    factory: sessionmaker[Session],
    model: ModelConfig,
    settings: Settings,
    batches: int,
    workdir: Path,
) -> list[float]:
    rng = np.random.default_rng(2)
    at = now() - timedelta(minutes=1)
    start = window_start(at, model.window)
    delays = []
    with worker_processes(url, 1, workdir, WAIT_SECONDS):
        wait_drained(engine, WAIT_SECONDS)
        for _ in range(batches):
            post(factory, model, settings, at, rng)
            committed = time.perf_counter()
            with factory() as session:
                folded = session.scalar(
                    sa.text(
                        "SELECT version FROM window_aggregate WHERE model_id = :m "
                        "AND segment = '*' AND window_start = :s"
                    ),
                    {"m": model.id, "s": start},
                )
            target = int(folded or 0) + 1  # the fold of this batch's delta (one at a time)
            deadline = time.monotonic() + WAIT_SECONDS
            while time.monotonic() < deadline:
                with factory() as session:
                    version = session.scalar(
                        sa.select(WindowMetrics.aggregate_version).where(
                            WindowMetrics.model_id == model.id,
                            WindowMetrics.window_start == start,
                        )
                    )
                if version is not None and version >= target:
                    break
                time.sleep(0.005)
            delays.append(time.perf_counter() - committed)
            time.sleep(0.3)  # light load: one batch at a time
    return delays


def compute_only(factory: sessionmaker[Session], model: ModelConfig, tier: Tier) -> float:
    from app.db.models import WindowAggregate

    with factory() as session:
        row = session.scalars(
            sa.select(WindowAggregate).where(WindowAggregate.model_id == model.id).limit(1)
        ).one()
        sums = WindowSums.from_row(row)
    compute_window_result(model, sums, None, tier=tier)  # warm caches
    runs = 10
    started = time.perf_counter()
    for _ in range(runs):
        compute_window_result(model, sums, None, tier=tier)
    return (time.perf_counter() - started) / runs


def register(factory: sessionmaker[Session], name: str, window: str) -> ModelConfig:
    with factory() as session:
        row = create_model(
            session,
            ModelCreate.model_validate(
                {"name": name, "pi0": 0.05, "cost_ratio": 0.8, "window": window}
            ),
            now(),
        )
        return ModelConfig.from_row(row)


def fold_all(factory: sessionmaker[Session]) -> None:
    jobs = DatabaseJobs(factory, lease_seconds=60)  # fold the batches' deltas (full results)
    while (job := jobs.claim()) is not None:
        jobs.run(job)


def backlogs(
    factory: sessionmaker[Session], settings: Settings, windows: int, *, closed: bool, opened: bool
) -> dict[str, list[ModelConfig]]:
    """The closed backlog (past windows of one "5m" model) and the open one (the current
    window of ``windows`` "1w" models, open through the run), each folded once."""
    rng = np.random.default_rng(1)
    out: dict[str, list[ModelConfig]] = {}
    if closed:
        model = register(factory, "bench", "5m")
        length = window_length(model.window)
        last = window_start(now(), model.window)
        for k in range(1, windows + 1):
            post(factory, model, settings, last - k * length, rng)
        out["closed"] = [model]
    if opened:
        out["open"] = [register(factory, f"bench-open-{k}", "1w") for k in range(windows)]
        for model in out["open"]:
            post(factory, model, settings, now(), rng)
    fold_all(factory)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=60)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--open-only", action="store_true", help="only the open-window backlog")
    only.add_argument("--closed-only", action="store_true", help="only the closed backlog")
    args = parser.parse_args()
    with migrated_postgres_database() as url, tempfile.TemporaryDirectory() as tmp:
        if url is None:
            return
        settings = Settings(_env_file=None, database_url=url)  # type: ignore[call-arg]
        engine = make_engine(url, settings)
        factory = make_session_factory(engine)
        models = backlogs(
            factory, settings, args.windows, closed=not args.open_only, opened=not args.closed_only
        )
        model = next(iter(models.values()))[0]
        print(f"backlogs of {args.windows} windows of {model.n_bins} bins, 5,000 rows each")
        full = compute_only(factory, model, Tier.FULL)
        summary = compute_only(factory, model, Tier.SUMMARY)
        print(
            f"compute_window_result alone: full {full * 1e3:.1f} ms per window "
            f"(= {1 / full:.1f} windows/s in one process), summary {summary * 1e3:.1f} ms "
            f"(= {1 / summary:.1f} windows/s); ratio full / summary {full / summary:.1f}"
        )
        workdir = Path(tmp)
        best: dict[str, float] = {}
        for case, backlog in models.items():
            tier = "full refreshes" if case == "closed" else "summary refreshes"
            print(f"throughput, {case} windows ({tier}; marked dirty at once, workers warm):")
            one = throughput(url, engine, factory, backlog, 1, workdir, args.rounds)
            two = throughput(url, engine, factory, backlog, 2, workdir, args.rounds)
            best[case] = one
            print(
                f"  ratio 2 workers / 1 worker (best rounds): {two / one:.2f} "
                f"(machine: {os.cpu_count()} cores shared with other work)"
            )
        if len(best) == 2:
            print(
                "  ratio open / closed windows, 1 worker (best rounds): "
                f"{best['open'] / best['closed']:.2f}"
            )
        model = models.get("closed", models.get("open", []))[0]
        delays = freshness(url, engine, factory, model, settings, args.batches, workdir)
        delays.sort()
        p95 = delays[min(len(delays) - 1, round(0.95 * (len(delays) - 1)))]
        print(
            f"freshness over {len(delays)} batches (1 idle worker, poll 0.25 s): median "
            f"{statistics.median(delays):.3f} s, p95 {p95:.3f} s, max {delays[-1]:.3f} s "
            f"(target < 2 s)"
        )
        engine.dispose()


if __name__ == "__main__":
    main()
