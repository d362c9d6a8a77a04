"""Worker throughput and freshness at fleet scale (issue 10), on PostgreSQL.

The fleet: ``--models`` models (default 1,000) with ``--segments`` segments
each (default 10), one-day windows (so that the active windows stay open for
the whole run), 10,000 bins, the drift reference the previous window
(``trailing_windows: 1``), so drift runs on every window. A batch that names
a segment counts in the segment's window and in the model's all-traffic
window, so the active windows (the current day) are models x (segments + 1):
11,000 by default. Phases, each printed as it goes:

* Setup: the models are created through ``app.services.models.registry.create_model``;
  one ``--reference-rows`` batch per (model, segment) goes into the previous
  window (the reference) and one ``--rows`` batch into the current one. All
  batches go through ``app.services.ingest.batch.ingest_batch`` in-process (no
  HTTP) from ``--setup-processes`` processes: about 5 ms of one core a
  100-row batch, where the HTTP API would add a server process competing
  with the workers for the two cores (bench_ingest.py measures the API).
  The largest worker count of ``--workers`` folds the initial backlog.
* Backlog, for each worker count N of ``--workers`` (default 1 and 2): a
  fresh ``--rows`` batch goes to every active (model, segment) window while
  no worker runs (the fold of new deltas is part of the work timed); then N
  real ``priorwatch worker`` processes start, and once all have logged
  "worker ready" (after their warm-up) the waiting windows are counted and
  timed until none waits. Printed: windows/s, worker CPU and PostgreSQL CPU
  (the backends of this database, from /proc: the server must run on this
  machine) per window, and the ratio to the first worker count. The set-up
  and backlog workers run with a detail interval longer than the window, so
  every one of these refreshes is a summary refresh (docs/worker.md,
  "Tiered refresh") and the worker counts are compared on the same work;
  bench_worker.py compares full and summary refreshes.
* Continuous load, for each worker count of ``--load-workers`` (default the
  largest of ``--workers``), after its backlog, with new workers at the
  worker's default settings (``--detail-seconds`` sets their detail
  interval: a window's detail is due that long after its first change, so a
  shorter load shows summary refreshes only; default 300 s):
  ``--load-processes`` processes post ``--rows`` batches (with an
  idempotency key, as a client would) to random active (model, segment)
  windows, at most ``--rate`` batches/s in all (default: one batch per
  segment window every 3 s, more than two cores can offer at full size, so
  the load runs as fast as it can), for ``--load-seconds``. Every second the
  script reads the age of the stalest window: now minus the oldest change
  not yet folded (the oldest ``batch_delta.received_at``, or the
  ``dirty_since`` of a window marked dirty). Printed: its maximum, 95th
  percentile and final value against the target of 60 s (the age cannot
  exceed the load's duration, so a load under 120 s shows no verdict), the
  windows still waiting at the end, the batches/s offered, the windows
  refreshed/s (folds: the growth of ``sum(window_aggregate.version)``) and
  how many windows were refreshed in full, CPU per refresh, the stalest age
  once every active window waits (estimated: active windows / windows
  refreshed per s), and how long the queue takes to drain once the load
  stops.

* Closed-window drain (``--drain``, instead of the phases above; issue 23):
  ``--models`` models (default 100) x ``--segments`` (default 10), one
  ``--drain-rows`` batch (default 2,000) per segment into a closed window
  (a past day) while no worker runs; then ``--workers`` (default 2) real
  ``priorwatch worker`` processes start, and the time runs from their start
  (start-up included, as an operator's drain) until every window's summary
  is fresh (no window waits), then until every window's detail is of its
  data (the detail lag). Twice in the same run, on two past days: workers
  that refresh every window in full (``PRIORWATCH_WORKER_DETAIL_INTERVAL_SECONDS=0``,
  the behaviour before summary first) and workers at the default settings
  (summary first, the details after). Printed: windows/s, the detail lag,
  worker CPU per window (start-up apart), and in this process the CPU per
  window of the numpy floor (the main metrics from the two histograms with
  cumulative sums, checked against the stored values), of a summary and of
  a full computation; ``--profile`` adds the top functions of a full one.

Usage: ``python bench/bench_fleet.py --quick`` (50 models x 4 segments,
short phases: a few minutes; what ``make bench`` runs) or ``python
bench/bench_fleet.py`` for the full fleet (1,000 x 10, a 420 s load: long on
two cores, the initial fold alone computes 22,000 windows); ``python
bench/bench_fleet.py --drain`` for the closed-window drain (about a minute
of set-up, then two drains); every size is a flag, see ``--help``. Needs the PostgreSQL server of
PRIORWATCH_TEST_POSTGRES_URL (default
postgresql+psycopg://postgres@127.0.0.1:5432/postgres); prints a notice and
exits 0 when it is unreachable. The script reads the queue with plain SQL on
``window_aggregate``, ``batch_delta`` and ``window_metrics`` and drives the
workers through the command line and their environment. Every wait is
bounded (``--max-wait``); the worker and load processes are stopped and the
temporary database is dropped at the end, also after Ctrl-C or an error.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa
from _common import (
    batch_body,
    cpu_seconds,
    ingest_once,
    migrated_postgres_database,
    wait_drained,
    waiting_windows,
    worker_processes,
)

from app.config import Settings
from app.db.models import ALL_SEGMENTS, WindowAggregate, WindowMetrics
from app.db.queries import list_models
from app.db.session import make_engine, make_session_factory
from app.services.models.config import ModelConfig
from app.services.models.registry import create_model
from app.services.models.settings import ModelCreate
from app.services.windows.compute import Tier, compute_window_result
from app.services.windows.sums import WindowSums
from app.timegrid import window_start

WINDOW = "1d"
"""Day windows: the active windows stay open for the whole run (unless it spans
midnight UTC, which the script reports), so no refresh becomes a closed window's."""
SUMMARY_ONLY = {"PRIORWATCH_WORKER_DETAIL_INTERVAL_SECONDS": "1000000"}
"""Worker environment of the set-up and backlog phases: the detail tier of an
open window is not due before the window's end, so every refresh of an active
window is a summary refresh (docs/worker.md, "Tiered refresh") in every
backlog, whatever its length."""
BODY_VARIANTS = 4
"""Pre-serialised bodies per segment (the load cycles through them)."""
PROGRESS_SECONDS = 30.0
TARGET_SECONDS = 60.0
"""Every active window refreshed at least once a minute (issue 10)."""

STALEST_AGE = sa.text(
    "SELECT extract(epoch FROM clock_timestamp() - least("
    "(SELECT min(received_at) FROM batch_delta), "
    "(SELECT min(dirty_since) FROM window_aggregate WHERE dirty)))"
)
"""Seconds since the oldest change no worker has folded yet (NULL when none)."""
FOLDS = sa.text("SELECT coalesce(sum(version), 0) FROM window_aggregate")
"""Folds so far over every window (each fold adds 1 to its window's version)."""
DETAILS_SINCE = sa.text("SELECT count(*) FROM window_metrics WHERE detail_computed_at >= :since")
"""Windows whose detail tier (curves, bootstrap intervals) was computed since ``:since``."""
DATABASE_NOW = sa.text("SELECT clock_timestamp()")
BACKEND_PIDS = sa.text("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")


def segment_names(count: int) -> list[str]:
    return [f"seg-{j}" for j in range(count)]


# --- load processes (``--child``) ---------------------------------------------


def child(spec: dict[str, Any]) -> None:
    """Post batches as ``spec`` says; print what was done as one JSON line.

    ``spec["mode"]`` is ``"sweep"`` (one batch to every segment of the models
    ``spec["models"]``) or ``"random"`` (batches to random (model, segment)
    pairs of every model, at most ``spec["rate"]`` a second, for
    ``spec["seconds"]``).
    """
    url = spec["url"]
    settings = Settings(_env_file=None, database_url=url)  # type: ignore[call-arg]
    engine = make_engine(url, settings)
    factory = make_session_factory(engine)
    with factory() as session:
        models = [ModelConfig.from_row(row) for row in list_models(session)]
    if spec["mode"] == "sweep":
        wanted = set(spec["models"])
        models = [m for m in models if m.id in wanted]
    rng = np.random.default_rng(spec["seed"])
    at = datetime.fromisoformat(spec["at"])
    names = segment_names(spec["segments"])
    bodies = [
        [batch_body(rng, spec["rows"], at, segment=name) for _ in range(BODY_VARIANTS)]
        for name in names
    ]

    def post(model: ModelConfig, segment: int, variant: int) -> None:
        ingest_once(factory, model, bodies[segment][variant], settings, datetime.now(UTC))

    posted = 0
    cpu = time.process_time()  # what posting costs, without start-up and imports
    started = time.perf_counter()
    if spec["mode"] == "sweep":
        for model in models:
            for segment in range(len(names)):
                post(model, segment, model.id % BODY_VARIANTS)
                posted += 1
    else:
        deadline = started + spec["seconds"]
        while (now := time.perf_counter()) < deadline:
            due = started + posted / spec["rate"]
            if due > now:
                time.sleep(min(due, deadline) - now)
                continue
            post(
                models[int(rng.integers(len(models)))],
                int(rng.integers(len(names))),
                posted % BODY_VARIANTS,
            )
            posted += 1
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    engine.dispose()
    print(json.dumps({"batches": posted, "seconds": elapsed, "cpu": cpu}))


@dataclass
class ChildrenResult:
    batches: int
    seconds: float
    """Wall time of the slowest child."""
    cpu: float


def run_children(
    specs: list[dict[str, Any]],
    timeout_seconds: float,
    tick: Callable[[], object] | None = None,
) -> ChildrenResult:
    """Run one load process per spec to completion (bounded); ``tick()`` about once a second."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child"]
    procs: list[subprocess.Popen[str]] = []
    try:
        for spec in specs:
            procs.append(
                subprocess.Popen([*command, json.dumps(spec)], stdout=subprocess.PIPE, text=True)
            )
        deadline = time.monotonic() + timeout_seconds
        while any(p.poll() is None for p in procs):
            if time.monotonic() > deadline:
                raise SystemExit(f"the load processes did not finish within {timeout_seconds} s")
            if tick is not None:
                tick()
            time.sleep(1.0)
        reports = []
        for p in procs:
            out, _ = p.communicate()
            if p.returncode != 0:
                raise SystemExit(f"a load process failed (exit {p.returncode})")
            reports.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return ChildrenResult(
        sum(r["batches"] for r in reports),
        max(r["seconds"] for r in reports),
        sum(r["cpu"] for r in reports),
    )


# --- measurements ----------------------------------------------------------------


class BackendCpu:
    """CPU seconds of the PostgreSQL backends serving this database since ``start()``.

    Reads /proc of the backends listed in ``pg_stat_activity``: only when the
    server runs on this machine (``seconds()`` is None otherwise). Backends
    that start later count from zero; one that exits counts up to its last
    ``sample()``.
    """

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.base: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.sampled_at = 0.0

    def _read(self) -> dict[int, float]:
        with self.engine.connect() as conn:
            pids = conn.execute(BACKEND_PIDS).scalars().all()
        found = {}
        for pid in pids:
            with suppress(OSError, IndexError, ValueError):  # not on this machine, or gone
                found[int(pid)] = cpu_seconds(int(pid))
        return found

    def start(self) -> None:
        self.base = self._read()
        self.last = dict(self.base)

    def sample(self, every_seconds: float = 1.0) -> None:
        if time.monotonic() - self.sampled_at >= every_seconds:
            self.sampled_at = time.monotonic()
            self.last.update(self._read())

    def seconds(self) -> float | None:
        self.last.update(self._read())
        if not self.last:
            return None
        return sum(v - self.base.get(pid, 0.0) for pid, v in self.last.items())


def stalest_age(engine: sa.Engine) -> float:
    with engine.connect() as conn:
        age = conn.execute(STALEST_AGE).scalar_one()
    return 0.0 if age is None else float(age)


def folds(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(FOLDS).scalar_one())


def per_unit(total: float | None, count: int) -> str:
    return "n/a" if total is None or count == 0 else f"{total / count * 1e3:.1f} ms"


class Progress:
    """Prints the queue depth every PROGRESS_SECONDS while a wait lasts."""

    def __init__(self, engine: sa.Engine, cpu: BackendCpu | None = None) -> None:
        self.engine = engine
        self.cpu = cpu
        self.started = self.printed = time.monotonic()

    def __call__(self) -> None:
        if self.cpu is not None:
            self.cpu.sample()
        if time.monotonic() - self.printed >= PROGRESS_SECONDS:
            self.printed = time.monotonic()
            print(
                f"    ... {waiting_windows(self.engine):,} windows waiting after "
                f"{self.printed - self.started:.0f} s",
                flush=True,
            )


# --- the benchmark ----------------------------------------------------------------


@dataclass
class Fleet:
    url: str
    engine: sa.Engine
    model_ids: list[int]
    args: argparse.Namespace
    active_at: datetime
    """Event time of every batch into an active window (the start of the current day)."""
    logdir: Path

    @property
    def active_windows(self) -> int:
        return len(self.model_ids) * (self.args.segments + 1)

    def sweep(self, at: datetime, rows: int) -> ChildrenResult:
        """One ``rows`` batch to every (model, segment) at event time ``at``."""
        processes = self.args.setup_processes
        specs = [
            {
                "url": self.url,
                "mode": "sweep",
                "models": self.model_ids[k::processes],
                "segments": self.args.segments,
                "rows": rows,
                "at": at.isoformat(),
                "seed": k,
            }
            for k in range(processes)
        ]
        result = run_children(specs, self.args.max_wait)
        print(
            f"    {result.batches:,} batches of {rows:,} rows in {result.seconds:.1f} s "
            f"({result.batches / result.seconds:.0f} batches/s, {processes} processes, "
            f"{per_unit(result.cpu, result.batches)} CPU per batch)",
            flush=True,
        )
        return result

    def drain(self, cpu: BackendCpu | None = None) -> float:
        """Wait until no window waits; the seconds it took."""
        started = time.perf_counter()
        wait_drained(self.engine, self.args.max_wait, 0.05, Progress(self.engine, cpu))
        return time.perf_counter() - started

    def workers(
        self, count: int, env: dict[str, str]
    ) -> AbstractContextManager[list[subprocess.Popen[bytes]]]:
        return worker_processes(self.url, count, self.logdir, self.args.max_wait, env)


def create_models(engine: sa.Engine, args: argparse.Namespace) -> list[int]:
    """The fleet's ``--models`` models (``--segments`` segments each); their ids."""
    factory = make_session_factory(engine)
    started = time.perf_counter()
    ids = []
    for i in range(args.models):
        with factory() as session:
            spec = {
                "name": f"fleet-{i:05d}",
                "pi0": 0.1,
                "cost_ratio": 0.8,
                "window": WINDOW,
                "segments": segment_names(args.segments),
                "drift": {"reference": {"trailing_windows": 1}},
            }
            ids.append(create_model(session, ModelCreate.model_validate(spec), now()).id)
    print(f"  {args.models:,} models created in {time.perf_counter() - started:.1f} s", flush=True)
    return ids


def setup(url: str, engine: sa.Engine, args: argparse.Namespace, logdir: Path) -> Fleet:
    started = time.perf_counter()
    ids = create_models(engine, args)
    current = window_start(now(), WINDOW)
    fleet = Fleet(url, engine, ids, args, current, logdir)
    windows = fleet.active_windows
    print(f"  reference windows (previous day, {windows:,} windows):", flush=True)
    with fleet.workers(max(args.workers), SUMMARY_ONLY):
        fleet.sweep(current - timedelta(days=1), args.reference_rows)
        print(f"  active windows (current day, {windows:,} windows):", flush=True)
        fleet.sweep(current, args.rows)
        print(f"  initial fold by {max(args.workers)} worker(s)...", flush=True)
        seconds = fleet.drain(BackendCpu(engine))
    print(f"  setup done in {time.perf_counter() - started:.0f} s (last drain {seconds:.0f} s)")
    return fleet


def now() -> datetime:
    return datetime.now(UTC)


def backlog(fleet: Fleet, count: int) -> float:
    """Windows/s of ``count`` workers on a fresh batch in every active window."""
    print(f"backlog, {count} worker(s): a fresh batch to every active window", flush=True)
    fleet.sweep(fleet.active_at, fleet.args.rows)
    cpu = BackendCpu(fleet.engine)
    with fleet.workers(count, SUMMARY_ONLY) as procs:
        waiting = waiting_windows(fleet.engine)
        cpu.start()
        worker_cpu = sum(cpu_seconds(p.pid) for p in procs)
        elapsed = fleet.drain(cpu)
        worker_cpu = sum(cpu_seconds(p.pid) for p in procs) - worker_cpu
        pg_cpu = cpu.seconds()
        rate = waiting / elapsed
        print(
            f"  {count} worker(s): {waiting:,} windows in {elapsed:.1f} s = {rate:.1f} "
            f"windows/s; per window: worker CPU {per_unit(worker_cpu, waiting)}, "
            f"PostgreSQL CPU {per_unit(pg_cpu, waiting)}; load average "
            f"{os.getloadavg()[0]:.1f}",
            flush=True,
        )
    return rate


def load(fleet: Fleet, count: int) -> None:
    """Continuous small-batch load on random active windows, ``count`` workers working."""
    args = fleet.args
    processes = args.load_processes
    rate = args.rate or len(fleet.model_ids) * args.segments / 3.0
    detail = (
        {}
        if args.detail_seconds is None
        else {"PRIORWATCH_WORKER_DETAIL_INTERVAL_SECONDS": str(args.detail_seconds)}
    )
    print(
        f"continuous load, {count} worker(s): {processes} load process(es), "
        f"{args.rows} rows per batch, at most {rate:.0f} batches/s, {args.load_seconds:.0f} s; "
        f"detail interval {args.detail_seconds if detail else 'the worker default'}",
        flush=True,
    )
    with fleet.workers(count, detail) as procs:
        measure_load(fleet, procs, rate)


def measure_load(fleet: Fleet, procs: list[subprocess.Popen[bytes]], rate: float) -> None:
    args = fleet.args
    processes = args.load_processes
    specs = [
        {
            "url": fleet.url,
            "mode": "random",
            "segments": args.segments,
            "rows": args.rows,
            "at": fleet.active_at.isoformat(),
            "seed": 100 + k,
            "rate": rate / processes,
            "seconds": args.load_seconds,
        }
        for k in range(processes)
    ]
    ages: list[float] = []
    cpu = BackendCpu(fleet.engine)
    cpu.start()
    folds_before = folds(fleet.engine)
    with fleet.engine.connect() as conn:
        since = conn.execute(DATABASE_NOW).scalar_one()
    worker_cpu = sum(cpu_seconds(p.pid) for p in procs)
    started = time.monotonic()

    def tick() -> None:
        ages.append(stalest_age(fleet.engine))
        cpu.sample()
        if len(ages) % int(PROGRESS_SECONDS) == 0:
            print(
                f"    ... {time.monotonic() - started:.0f} s: stalest window {ages[-1]:.1f} s, "
                f"{waiting_windows(fleet.engine):,} windows waiting",
                flush=True,
            )

    offered = run_children(specs, args.load_seconds + args.max_wait, tick)
    final = stalest_age(fleet.engine)
    ages.append(final)
    refreshed = folds(fleet.engine) - folds_before
    with fleet.engine.connect() as conn:
        details = int(conn.execute(DETAILS_SINCE, {"since": since}).scalar_one())
    worker_cpu = sum(cpu_seconds(p.pid) for p in procs) - worker_cpu
    pg_cpu = cpu.seconds()
    duration = offered.seconds
    print(
        f"  offered {offered.batches / duration:.1f} batches/s ({offered.batches:,} batches, "
        f"{per_unit(offered.cpu, offered.batches)} load CPU per batch); refreshed "
        f"{refreshed / duration:.1f} windows/s ({refreshed:,} folds, {details:,} windows "
        f"refreshed in full); per refresh: worker CPU "
        f"{per_unit(worker_cpu, refreshed)}, PostgreSQL CPU {per_unit(pg_cpu, refreshed)}",
        flush=True,
    )
    worst = max(ages)
    waiting = waiting_windows(fleet.engine)
    print(
        f"  stalest window over {len(ages)} samples: max {worst:.1f} s, "
        f"p95 {float(np.percentile(ages, 95)):.1f} s, final {final:.1f} s "
        f"(target < {TARGET_SECONDS:.0f} s: {verdict(worst, duration)}); {waiting:,} of "
        f"{fleet.active_windows:,} active windows waiting at the end",
        flush=True,
    )
    if refreshed:
        print(
            f"  every active window waiting, the stalest would be about "
            f"{fleet.active_windows / (refreshed / duration):.0f} s old "
            "(active windows / windows refreshed per s: an estimate)",
            flush=True,
        )
    print(f"  after the load: drained in {fleet.drain(BackendCpu(fleet.engine)):.1f} s", flush=True)


def verdict(worst: float, duration: float) -> str:
    """Whether the stalest age stayed under the target; a short load cannot tell."""
    if worst >= TARGET_SECONDS:
        return "NOT met"
    if duration < 2 * TARGET_SECONDS:
        return f"not shown, the load lasted {duration:.0f} s"
    return "met"


# --- the closed-window drain (``--drain``) -------------------------------------------

FULL_ONLY = {"PRIORWATCH_WORKER_DETAIL_INTERVAL_SECONDS": "0"}
"""Worker environment of the baseline drain: every refresh full (before summary first)."""
DRAINS = (("every refresh full", FULL_ONLY, 3), ("summary first", {}, 1))
"""(label, worker environment, days back of the closed windows drained): two past days
whose drift references (the day before each) hold no data, so both drains compute alike."""
DETAILS_BEHIND = sa.text(
    "SELECT count(*) FROM window_metrics WHERE window_start = :start "
    "AND (detail_version IS NULL OR detail_version <> aggregate_version)"
)
"""Windows of day ``:start`` whose detail (curves, intervals) is not of their data."""


@dataclass
class Drained:
    windows: int
    summaries: float
    """Seconds from the workers' start until every summary was fresh."""
    details: float
    """Seconds from the workers' start until every detail was of its data."""
    startup_cpu: float
    """Worker CPU seconds (all workers) until each logged "worker ready"."""
    summary_cpu: float
    """Worker CPU seconds after start-up until every summary was fresh."""
    detail_cpu: float
    """Worker CPU seconds after that until every detail was stored."""


def details_behind(engine: sa.Engine, day: datetime) -> int:
    with engine.connect() as conn:
        return int(conn.execute(DETAILS_BEHIND, {"start": day}).scalar_one())


def drain_closed(fleet: Fleet, env: dict[str, str], day: datetime) -> Drained:
    """One ``--drain-rows`` batch per (model, segment) into the closed windows of ``day``
    while no worker runs, then ``--workers`` workers drain it, start-up included."""
    args = fleet.args
    fleet.sweep(day, args.drain_rows)
    waiting = waiting_windows(fleet.engine)
    if args.node_dir:  # a cold directory of OPS nodes, shared by this drain's workers
        nodes = fleet.logdir / f"ops-nodes-{day:%Y%m%d}"
        env = {**env, "PRIORWATCH_WORKER_OPS_NODE_DIR": str(nodes)}
    started = time.perf_counter()
    with fleet.workers(max(args.workers), env) as procs:
        startup = sum(cpu_seconds(p.pid) for p in procs)
        fleet.drain()
        summaries = time.perf_counter() - started
        at_summaries = sum(cpu_seconds(p.pid) for p in procs)
        deadline = time.monotonic() + args.max_wait
        while details_behind(fleet.engine, day):
            if time.monotonic() > deadline:
                raise SystemExit(f"the details did not follow within {args.max_wait:.0f} s")
            time.sleep(0.05)
        details = time.perf_counter() - started
        at_details = sum(cpu_seconds(p.pid) for p in procs)
    return Drained(
        waiting,
        summaries,
        details,
        startup,
        at_summaries - startup,
        at_details - at_summaries,
    )


def report_drain(label: str, d: Drained, workers: int) -> None:
    rate = d.windows / d.summaries
    print(
        f"  {label}: {d.windows:,} windows, every summary fresh {d.summaries:.1f} s after "
        f"the start of {workers} worker(s) = {rate:.1f} windows/s (start-up included); "
        f"every detail {d.details - d.summaries:.1f} s later (detail lag); worker CPU per "
        f"window {per_unit(d.summary_cpu, d.windows)} to the summaries + "
        f"{per_unit(d.detail_cpu, d.windows)} after, start-up {d.startup_cpu / workers:.2f} s "
        "per worker",
        flush=True,
    )


def floor_metrics(
    pos: np.ndarray[Any, Any], neg: np.ndarray[Any, Any], at: int
) -> tuple[float, float, float]:
    """(auc_roc, recall, precision) of two histograms with cumulative sums: the
    arithmetic floor. ``at``: the primary threshold's bin (bins from it up are
    predicted positive)."""
    tps = np.concatenate(([0], np.cumsum(pos[::-1])))
    fps = np.concatenate(([0], np.cumsum(neg[::-1])))
    tpr, fpr = tps / tps[-1], fps / fps[-1]
    auc = float(np.sum((fpr[1:] - fpr[:-1]) * (tpr[1:] + tpr[:-1])) / 2.0)
    k = len(pos) - at
    return auc, float(tps[k] / tps[-1]), float(tps[k] / (tps[k] + fps[k]))


def cpu_per_call(func: Callable[[], object], repeat: int) -> float:
    """Median process CPU time of ``func()`` over ``repeat`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        func()
        times.append(time.process_time() - start)
    return float(np.median(times))


def per_window_costs(fleet: Fleet, day: datetime, profile: bool) -> None:
    """In this process: the CPU of the floor, a summary and a full computation of one
    drained window (an all-traffic one: the largest), the floor checked against its
    stored metrics."""
    factory = make_session_factory(fleet.engine)
    with factory() as session:
        model = ModelConfig.from_row(list_models(session)[0])
        row = session.scalars(
            sa.select(WindowAggregate).where(
                WindowAggregate.model_id == model.id,
                WindowAggregate.segment == ALL_SEGMENTS,
                WindowAggregate.window_start == day,
            )
        ).one()
        stored = session.scalars(
            sa.select(WindowMetrics).where(
                WindowMetrics.model_id == model.id,
                WindowMetrics.segment == ALL_SEGMENTS,
                WindowMetrics.window_start == day,
            )
        ).one()
        sums = WindowSums.from_row(row)
    pos, neg = sums.hist_positives, sums.hist_negatives
    assert pos is not None and neg is not None
    at = int(np.searchsorted(model.bin_edges, model.primary_threshold))
    floor = floor_metrics(pos, neg, at)
    names = ("auc_roc", "recall", "precision")
    gap = max(abs(v - stored.metrics[k]) for k, v in zip(names, floor, strict=True))
    costs = {
        "floor (numpy cumsums)": cpu_per_call(lambda: floor_metrics(pos, neg, at), 200),
        "summary": cpu_per_call(lambda: summary(model, sums), 20),
        "full": cpu_per_call(lambda: compute_window_result(model, sums, None), 10),
    }
    base = costs["floor (numpy cumsums)"]
    print(
        f"  per window, CPU in this process ({sums.n:,} rows): "
        + "; ".join(f"{k} {v * 1e3:.2f} ms (x{v / base:.0f})" for k, v in costs.items())
        + f"; the floor's {', '.join(names)} differ from the stored by at most {gap:.1e}",
        flush=True,
    )
    if profile:
        for label, call in (("summary", summary), ("full", compute_window_result)):
            profiler = cProfile.Profile(time.process_time)
            profiler.runcall(lambda call=call: [call(model, sums, None) for _ in range(10)])
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
            print(f"  profile of 10 {label} computations:\n{out.getvalue()}", flush=True)


def summary(model: ModelConfig, sums: WindowSums, reference: WindowSums | None = None) -> object:
    """The summary tier of a window, as a drain computes it first."""
    return compute_window_result(model, sums, reference, tier=Tier.SUMMARY)


def drain(url: str, engine: sa.Engine, args: argparse.Namespace, logdir: Path) -> None:
    ids = create_models(engine, args)
    fleet = Fleet(url, engine, ids, args, window_start(now(), WINDOW), logdir)
    workers = max(args.workers)
    results = {}
    for label, env, days in DRAINS:
        print(f"closed-window drain, {label}:", flush=True)
        day = fleet.active_at - timedelta(days=days)
        results[label] = drained = drain_closed(fleet, env, day)
        report_drain(label, drained, workers)
    (base, before), (_, after) = ((label, results[label]) for label, _, _ in DRAINS)
    ratio = (after.windows / after.summaries) / (before.windows / before.summaries)
    print(f"drain summary: summary first x{ratio:.2f} windows/s of {base} (same run)")
    per_window_costs(fleet, fleet.active_at - timedelta(days=DRAINS[-1][2]), args.profile)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="50 models x 4 segments, 20 s load")
    parser.add_argument("--models", type=int, help="default 1000 (--quick: 50)")
    parser.add_argument("--segments", type=int, help="segments per model, default 10 (--quick: 4)")
    parser.add_argument("--rows", type=int, default=100, help="rows per small batch")
    parser.add_argument(
        "--reference-rows", type=int, default=2_000, help="rows per reference-window batch"
    )
    parser.add_argument("--workers", default="1,2", help="worker counts of the backlog phase")
    parser.add_argument(
        "--load-workers",
        help="worker counts of the load phase, among --workers (default: the largest)",
    )
    parser.add_argument("--load-seconds", type=float, help="default 420 (--quick: 20)")
    parser.add_argument("--load-processes", type=int, default=1)
    parser.add_argument(
        "--rate", type=float, help="batches/s cap of the load (default: segment windows / 3 s)"
    )
    parser.add_argument(
        "--detail-seconds",
        type=float,
        help="the workers' detail interval during the load (default: the worker's, 300 s)",
    )
    parser.add_argument("--setup-processes", type=int, default=2)
    parser.add_argument(
        "--drain",
        action="store_true",
        help="the closed-window drain instead (default 100 models x 10 segments, 2 workers)",
    )
    parser.add_argument("--drain-rows", type=int, default=2_000, help="rows per batch of the drain")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="with --drain: profiles of a summary and a full computation",
    )
    parser.add_argument(
        "--no-node-dir",
        dest="node_dir",
        action="store_false",
        help="with --drain: every worker builds its own OPS nodes (default: the workers "
        "of each drain share a new, empty PRIORWATCH_WORKER_OPS_NODE_DIR)",
    )
    parser.add_argument("--max-wait", type=float, help="bound of every wait, seconds")
    args = parser.parse_args()
    if args.child:
        return args
    quick = args.quick
    args.models = args.models or (50 if quick else 100 if args.drain else 1_000)
    args.segments = args.segments or (4 if quick else 10)
    if args.drain and args.workers == "1,2":
        args.workers = "2"
    args.load_seconds = args.load_seconds or (20.0 if quick else 420.0)
    args.workers = [int(n) for n in args.workers.split(",")]
    args.load_workers = (
        [int(n) for n in args.load_workers.split(",")] if args.load_workers else [max(args.workers)]
    )
    if not set(args.load_workers) <= set(args.workers):
        parser.error("every count of --load-workers must be one of --workers")
    windows = args.models * (args.segments + 1)
    args.max_wait = args.max_wait or 300.0 + 0.5 * windows  # 2 windows/s at the least
    return args


def stop_on_sigterm(signum: int, _frame: object) -> None:
    """SIGTERM (``timeout``, a job runner) cleans up as Ctrl-C does."""
    raise SystemExit(128 + signum)


def main() -> None:
    args = parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    windows = args.models * (args.segments + 1)
    print(
        f"bench_fleet: {args.models:,} models x {args.segments} segments = {windows:,} active "
        f"windows (+ as many reference windows), window {WINDOW}, drift reference the "
        f"previous window; {os.cpu_count()} cores",
        flush=True,
    )
    with ExitStack() as stack:
        url = stack.enter_context(migrated_postgres_database())
        if url is None:
            return
        logdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        settings = Settings(_env_file=None, database_url=url)  # type: ignore[call-arg]
        engine = make_engine(url, settings)
        stack.callback(engine.dispose)
        if args.drain:
            drain(url, engine, args, logdir)
            return
        print("setup:", flush=True)
        fleet = setup(url, engine, args, logdir)
        rates = {}
        for count in args.workers:
            rates[count] = backlog(fleet, count)
            if count in args.load_workers:
                load(fleet, count)
        base = args.workers[0]
        summary = ", ".join(
            f"{count}: {rate:.1f} windows/s (x{rate / rates[base]:.2f})"
            for count, rate in rates.items()
        )
        print(f"backlog summary, workers {summary} (ratio to {base} worker(s), same run)")
        if window_start(now(), WINDOW) != fleet.active_at:
            print("note: the active windows closed during the run (their refreshes became full)")


if __name__ == "__main__":
    main()
