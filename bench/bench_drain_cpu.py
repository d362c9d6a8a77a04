"""The worker's CPU per refresh outside the computation, in one process (issue 23 part 2).

A closed-window backlog as ``bench_fleet.py --drain`` builds it (``--models``
models x ``--segments`` segments, one ``--rows`` batch per segment into a past
day, the drift reference the day before, which holds no data) is stored once
in a template database; each of ``--runs`` runs drains a copy of it
(``CREATE DATABASE ... TEMPLATE``) in this process with the worker's job
source at the worker's default settings (summaries first, then the details),
after the worker's start (its allocator's thresholds, its warm-up). Printed
per run, in CPU time of this process per refresh (summary or detail): all of
it, the computation (``compute_window_result``), and what is outside it: the claim
(``DatabaseJobs.claim``: claim statement, deltas, models, fold, drift
references), the persist (``persist_group``: lock, fold, result upsert,
dependents) and the rest of a run (reference look-ups, the read transaction's
end); beside them, the CPU of the database's PostgreSQL backends (from /proc:
the server must run on this machine); and the CPU outside the computation
per refresh of the groups of summaries and of the groups holding a detail
apart. The first group of a run is reported apart: it builds and compiles
the queue's statements, once per process.

To compare two versions of the code, run the script alternately with each on
``PYTHONPATH`` (e.g. an older commit extracted with ``git archive``): the
figures move with the machine's load, so compare runs made close together and
note the load average printed beside them.

Usage: ``python bench/bench_drain_cpu.py [--models 20] [--segments 10] [--rows 2000]
[--runs 1]``. Needs the PostgreSQL server of PRIORWATCH_TEST_POSTGRES_URL; prints a
notice and exits 0 when it is unreachable.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import sqlalchemy as sa
from _common import batch_body, cpu_seconds, ingest_once, migrated_postgres_database

from app.config import Settings
from app.db.session import make_engine, make_session_factory
from app.services.models.config import ModelConfig
from app.services.models.registry import create_model
from app.services.models.settings import ModelCreate
from app.services.refresh import groups
from app.services.windows.compute import Tier
from app.timegrid import window_start
from app.worker.allocator import tune_allocator
from app.worker.jobs import DatabaseJobs
from app.worker.runner import warm_up
from app.worker.settings import WorkerSettings

DAYS_BACK = 3
"""The drained windows' day: closed, its reference day (the day before) empty."""


def build_backlog(url: str, args: argparse.Namespace) -> int:
    """The models and one batch per (model, segment) in the closed day; the windows."""
    settings = Settings(_env_file=None, database_url=url)  # type: ignore[call-arg]
    engine = make_engine(url, settings)
    factory = make_session_factory(engine)
    now = datetime.now(UTC)
    day = window_start(now, "1d") - timedelta(days=DAYS_BACK)
    rng = np.random.default_rng(1)
    segments = [f"seg-{j}" for j in range(args.segments)]
    for i in range(args.models):
        spec = {
            "name": f"fleet-{i:05d}",
            "pi0": 0.1,
            "cost_ratio": 0.8,
            "window": "1d",
            "segments": segments,
            "drift": {"reference": {"trailing_windows": 1}},
        }
        with factory() as session:
            model = ModelConfig.from_row(
                create_model(session, ModelCreate.model_validate(spec), now)
            )
        for segment in segments:
            body = batch_body(rng, args.rows, day, segment=segment)
            ingest_once(factory, model, body, settings, now)
    engine.dispose()
    return args.models * (args.segments + 1)


@contextmanager
def database_copy(template_url: str, name: str) -> Iterator[str]:
    """A copy of the database of ``template_url`` (no connection may be open to it)."""
    template = sa.make_url(template_url)
    admin = sa.create_engine(template.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}" TEMPLATE "{template.database}"'))
        yield template.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@dataclass
class Clock:
    """CPU seconds of this process spent in some calls (nested calls counted once)."""

    seconds: float = 0.0
    calls: int = 0
    results: list[Any] = field(default_factory=list)
    """What the calls returned (the computed results' tiers are read from them)."""
    _depth: int = field(default=0, repr=False)

    def around(self, func: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._depth += 1
            started = time.process_time()
            try:
                result = func(*args, **kwargs)
                self.results.append(result)
                return result
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.seconds += time.process_time() - started
                    self.calls += 1

        return timed


BACKEND_PIDS = sa.text("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")


def backend_cpu(engine: sa.Engine) -> dict[int, float]:
    """CPU seconds of the PostgreSQL backends serving ``engine``'s database, by pid
    (from /proc: empty when the server runs on another machine)."""
    with engine.connect() as conn:
        pids = conn.execute(BACKEND_PIDS).scalars().all()
    found = {}
    for pid in pids:
        with suppress(OSError, IndexError, ValueError):
            found[int(pid)] = cpu_seconds(int(pid))
    return found


@dataclass
class Drain:
    refreshes: int
    first_refreshes: int
    first_outside: float
    total: float
    compute: float
    claim: float
    persist: float
    postgres: float | None
    """CPU seconds of the database's backends after the first group (None: not seen)."""
    by_tier: dict[Tier, tuple[int, float]]
    """Refreshes and CPU seconds outside the computation of the groups of one tier."""


def drain_copy(url: str) -> Drain:
    """Drain the database of ``url`` in this process; CPU seconds after the first group."""
    worker = WorkerSettings()
    engine = make_engine(url, Settings(_env_file=None, database_url=url))  # type: ignore[call-arg]
    jobs = DatabaseJobs(
        make_session_factory(engine),
        lease_seconds=worker.lease_seconds,
        claim_group_size=worker.claim_group_size,
        detail_interval_seconds=worker.detail_interval_seconds,
        detail_share=worker.detail_share,
        housekeeping_interval_seconds=1e9,
    )
    compute, persist = Clock(), Clock()
    real_compute, real_persist = groups.compute_window_result, groups.persist_group
    groups.compute_window_result = compute.around(real_compute)  # type: ignore[assignment]
    groups.persist_group = persist.around(real_persist)  # type: ignore[assignment]
    try:
        started = time.process_time()
        first = jobs.claim()
        if first is None:
            raise SystemExit("nothing to drain")
        jobs.run(first)
        first_outside = time.process_time() - started - compute.seconds
        first_refreshes = compute.calls
        compute.seconds = persist.seconds = 0.0
        claiming = 0.0
        backends = backend_cpu(engine)
        by_tier = dict.fromkeys(Tier, (0, 0.0))
        started = time.process_time()
        while True:
            before, computing = time.process_time(), compute.seconds
            job = jobs.claim()
            claiming += time.process_time() - before
            if job is None:
                break
            compute.results.clear()
            jobs.run(job)
            if not compute.results:
                continue
            tier = min((r.tier for r in compute.results), key=lambda t: t is Tier.SUMMARY)
            outside = time.process_time() - before - (compute.seconds - computing)
            count, seconds = by_tier[tier]
            by_tier[tier] = (count + len(compute.results), seconds + outside)
        total = time.process_time() - started
        after = backend_cpu(engine)
        postgres = sum(v - backends.get(p, 0.0) for p, v in after.items()) if after else None
    finally:
        groups.compute_window_result, groups.persist_group = real_compute, real_persist  # type: ignore[assignment]
        engine.dispose()
    refreshes = compute.calls - first_refreshes
    return Drain(
        refreshes,
        first_refreshes,
        first_outside,
        total,
        compute.seconds,
        claiming,
        persist.seconds,
        postgres,
        by_tier,
    )


def report(run: int, d: Drain) -> None:
    def ms(seconds: float) -> str:
        return f"{seconds / d.refreshes * 1e3:.2f}"

    outside = d.total - d.compute
    rest = outside - d.claim - d.persist
    print(
        f"  run {run}: {d.refreshes} refreshes after the first group; CPU per refresh "
        f"{ms(d.total)} ms = computation {ms(d.compute)} + outside {ms(outside)} ms "
        f"(claim {ms(d.claim)}, persist {ms(d.persist)}, rest {ms(rest)}); PostgreSQL "
        f"{'n/a' if d.postgres is None else ms(d.postgres)} ms; the first group "
        f"({d.first_refreshes} refreshes) {d.first_outside * 1e3:.0f} ms outside the "
        f"computation; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    tiers = [
        f"{tier.name.lower()} refreshes {seconds / count * 1e3:.2f} ms ({count})"
        for tier, (count, seconds) in d.by_tier.items()
        if count
    ]
    print(f"    outside the computation, by the groups' tier: {'; '.join(tiers)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--segments", type=int, default=10)
    parser.add_argument("--rows", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with migrated_postgres_database() as url:
        if url is None:
            return
        windows = build_backlog(url, args)
        print(
            f"drain of {windows:,} closed windows ({args.models} models x {args.segments} "
            f"segments + all traffic, {args.rows:,} rows each) by one worker in this process:",
            flush=True,
        )
        tune_allocator()  # as the worker does at start
        warm_up()
        for run in range(1, args.runs + 1):
            with database_copy(url, f"{sa.make_url(url).database}_run") as copy:
                report(run, drain_copy(copy))


if __name__ == "__main__":
    main()
