"""Ingestion throughput through HTTP, against ceilings measured in the same run.

A real uvicorn server on 127.0.0.1 serves the priorwatch app plus two extra
routes: ``POST /bench/parse`` only reads the same body and parses it with
orjson (the ceiling of large batches: what any JSON endpoint must pay), and
``POST /bench/append`` parses and bins it as ingestion does and appends one
row per batch to the same database inside the service's app (its middleware,
a session, a transaction: the in-app ceiling of small batches). The bare
ceiling of small batches, the one their target is measured against, is a
process of its own (``bench/bare_append.py``): no middleware, orjson, numpy,
one autocommit INSERT per batch.

* Large batches (default): raw JSON batches of 100,000 (score, label) rows
  with 1 and 4 concurrent clients against ``/bench/parse``.
* ``--small``: 100-row batches from 8 concurrent clients into one window,
  with a worker folding meanwhile (a ``priorwatch worker`` process on
  PostgreSQL, the embedded worker thread on SQLite), against the bare append
  endpoint on the same backend (target >= 0.6) and ``/bench/append``; prints
  batches/s, the p99 latency of a batch, and on PostgreSQL the WAL bytes
  written per stored batch (``pg_current_wal_lsn`` before and after).
* ``--backlog``: the ingestion and the bare endpoint's work called directly
  in one thread (no HTTP, no worker), CPU per 100-row batch as the unfolded
  backlog grows.

Both on SQLite and on PostgreSQL (skipped if unreachable); large-batch ratio target >= 0.5.

Usage: ``python bench/bench_ingest.py [--rows 100000] [--batches 16] [--backends sqlite,postgres]``
or ``python bench/bench_ingest.py --small [--batches 400]`` or ``--backlog [--blocks 5]``.
Every loop is bounded; the servers are stopped and temporary databases removed.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import orjson
import sqlalchemy as sa
from _common import (
    batch_body,
    cpu_seconds,
    ingest_once,
    migrated_postgres_database,
    model_on,
    wait_drained,
    worker_processes,
)
from fastapi import Request
from sqlalchemy.orm import Session
from starlette.responses import Response

ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"


# --- server side (child process) ---------------------------------------------


APPEND_TABLE = "bench_append"


def serve(database_url: str, port: int, embedded_worker: bool) -> None:
    import uvicorn
    from sqlalchemy import text
    from starlette.concurrency import run_in_threadpool

    from app.config import Settings
    from app.db import queries
    from app.db.session import make_engine, write_transaction
    from app.main import create_app
    from app.services.ingest.parse import parse_batch
    from app.services.models.config import ModelConfig

    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=database_url,
        admin_token=ADMIN_TOKEN,
        embedded_worker=embedded_worker,
    )
    app = create_app(settings)
    engine = make_engine(database_url, settings)
    blob = "bytea" if engine.dialect.name == "postgresql" else "blob"
    with engine.begin() as conn:
        conn.execute(
            text(
                f"CREATE TABLE IF NOT EXISTS {APPEND_TABLE} "
                f"(id varchar(32) PRIMARY KEY, n bigint, positives bigint, bins {blob})"
            )
        )
    models: dict[str, ModelConfig] = {}

    def parse_bin_append(body: bytes) -> int:
        with Session(engine) as session:
            if "bench" not in models:
                row = queries.get_model_by_name(session, "bench")
                assert row is not None
                models["bench"] = ModelConfig.from_row(row)
                session.rollback()
            parsed = parse_batch(body, models["bench"], settings, datetime.now(UTC))
            assert parsed.hist_positives is not None and parsed.hist_negatives is not None
            nonzero = np.flatnonzero(parsed.hist_positives | parsed.hist_negatives)
            with write_transaction(session):  # as ingestion writes (BEGIN IMMEDIATE on SQLite)
                session.execute(
                    text(f"INSERT INTO {APPEND_TABLE} VALUES (:id, :n, :p, :bins)"),
                    {
                        "id": uuid.uuid4().hex,
                        "n": parsed.n,
                        "p": parsed.positives,
                        "bins": nonzero.astype("<i4").tobytes()
                        + parsed.hist_positives[nonzero].tobytes()
                        + parsed.hist_negatives[nonzero].tobytes(),
                    },
                )
            return parsed.n

    @app.post("/bench/parse", status_code=202)
    async def parse_only(request: Request) -> Response:
        doc = orjson.loads(await request.body())
        return Response(orjson.dumps({"count": len(doc["scores"])}), status_code=202)

    @app.post("/bench/append", status_code=202)
    async def parse_bin_and_append(request: Request) -> Response:
        count = await run_in_threadpool(parse_bin_append, await request.body())
        return Response(orjson.dumps({"count": count}), status_code=202)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# --- client side ---------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Served:
    """A server started by :func:`server`: its base URL and process id."""

    base: str
    pid: int


@contextmanager
def server(
    database_url: str, *, embedded_worker: bool = False, bare: bool = False
) -> Iterator[Served]:
    """The service plus its in-app ceiling routes, or (``bare``) the bare append endpoint."""
    port = _free_port()
    here = Path(__file__).resolve().parent
    if bare:
        command = [sys.executable, str(here / "bare_append.py"), database_url, str(port)]
    else:
        command = [sys.executable, __file__, "--serve", database_url, "--port", str(port)]
        command += ["--embedded-worker"] if embedded_worker else []
    proc = subprocess.Popen(command, cwd=here.parent)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):  # up to 20 s
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError("the server did not become ready")
        yield Served(base, proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@contextmanager
def database(backend: str) -> Iterator[str | None]:
    from app.db.migrate import upgrade_to_head

    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/bench.db"
            upgrade_to_head(url)
            yield url
        return
    with migrated_postgres_database("  postgres unreachable ({reason}): skipped") as url:
        yield url


def make_body(rows: int, seed: int) -> bytes:
    return batch_body(np.random.default_rng(seed), rows, datetime.now(UTC))


def run_clients(
    url: str,
    headers: dict[str, str],
    bodies: list[bytes],
    clients: int,
    per_client: int,
    latencies: list[float] | None = None,
) -> float:
    """Seconds for ``clients`` threads to post ``per_client`` bodies each (keep-alive);
    each request's seconds are appended to ``latencies`` if given."""
    errors: list[str] = []
    barrier = threading.Barrier(clients + 1)

    def work(index: int) -> None:
        with httpx.Client(timeout=120) as client:
            barrier.wait()
            for j in range(per_client):
                h = {**headers, "Idempotency-Key": uuid.uuid4().hex}
                sent = time.perf_counter()
                r = client.post(url, content=bodies[(index + j) % len(bodies)], headers=h)
                if latencies is not None:
                    latencies.append(time.perf_counter() - sent)
                if r.status_code != 202:
                    errors.append(f"{r.status_code} {r.text[:200]}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} failed requests, e.g. {errors[0]}")
    return elapsed


def _register(base: str) -> dict[str, str]:
    """Register the bench model; the headers of an ingest key."""
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    httpx.post(
        f"{base}/v1/models", json={"name": "bench", "pi0": 0.05}, headers=admin
    ).raise_for_status()
    key = httpx.post(f"{base}/v1/models/bench/keys", json={"scopes": ["ingest"]}, headers=admin)
    key.raise_for_status()
    return {"Authorization": f"Bearer {key.json()['token']}", "Content-Type": "application/json"}


def bench_backend(backend: str, rows: int, batches: int, rounds: int) -> None:
    with database(backend) as url:
        if url is None:
            return
        with server(url) as served:
            base = served.base
            headers = _register(base)
            bodies = [make_body(rows, seed) for seed in range(4)]
            mb = len(bodies[0]) / 1e6
            # warm up both paths (imports, caches, connections)
            run_clients(f"{base}/bench/parse", headers, bodies, 1, 1)
            run_clients(f"{base}/v1/models/bench/batches", headers, bodies, 1, 1)
            for clients in (1, 4):
                per_client = max(1, batches // clients)
                n_rows = rows * clients * per_client
                # Each round posts to the ceiling and then to the ingestion: the two
                # runs of a round share the machine's state, so their ratio compares
                # like with like. Other processes on the machine slow rounds down at
                # random (a round's ratio varies by +-0.1 on 2 shared cores), so the
                # ratio printed is the median of the rounds'; the rates are the best.
                ceilings, ingests = [], []
                for _ in range(rounds):
                    ceilings.append(
                        run_clients(f"{base}/bench/parse", headers, bodies, clients, per_client)
                    )
                    ingests.append(
                        run_clients(
                            f"{base}/v1/models/bench/batches", headers, bodies, clients, per_client
                        )
                    )
                ratios = np.array(ceilings) / np.array(ingests)
                print(
                    f"  {backend:8s} clients={clients}  body={mb:.1f} MB  "
                    f"ceiling {n_rows / min(ceilings) / 1e6:6.2f} M rows/s   "
                    f"ingest {n_rows / min(ingests) / 1e6:6.2f} M rows/s   "
                    f"ratio {np.median(ratios):5.2f} (rounds {ratios.min():.2f}-{ratios.max():.2f})"
                    f"  ({clients * per_client} batches x {rounds} rounds)"
                )


def _wal_lsn(database_url: str) -> int | None:
    """The PostgreSQL WAL position in bytes (None on SQLite)."""
    if not database_url.startswith("postgresql"):
        return None
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(sa.text("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")).scalar_one()
            )
    finally:
        engine.dispose()


def _timed(served: Served, cpu: list[float], run: Callable[[], float], batches: int) -> float:
    """``run()``'s seconds; the CPU milliseconds per batch of ``served``'s process
    meanwhile are appended to ``cpu``."""
    before = cpu_seconds(served.pid)
    seconds = run()
    cpu.append((cpu_seconds(served.pid) - before) * 1e3 / batches)
    return seconds


def bench_small(backend: str, rows: int, batches: int, clients: int, rounds: int) -> None:
    """Small batches from concurrent clients into one window, a worker running.

    Each round posts the same batches to the bare append endpoint (its own
    process, ``bare_append.py``), to the in-app ceiling ``/bench/append`` and
    to the ingestion; rates are the best round's, ratios the median of the
    rounds' (the three runs of a round share the machine's state). The CPU
    time of each server process per batch (median of the rounds) depends
    much less than the rates on what else runs on the machine.

    On SQLite the bare endpoint writes through sqlite3 (the service's
    pragmas) to the same database file, the issue's "same endpoint on
    SQLite"; the service runs its embedded worker, whose folds take the same
    process's CPU and GIL while batches arrive (the bare endpoint has no
    worker): both its rates and its CPU include them.
    """
    with database(backend) as url:
        if url is None:
            return
        embedded = backend == "sqlite"
        engine = sa.create_engine(url)
        with (
            server(url, embedded_worker=embedded) as service,
            server(url, bare=True) as bare,
            tempfile.TemporaryDirectory() as logdir,
        ):
            headers = _register(service.base)
            bare_url = f"{bare.base}/append"
            in_app_url = f"{service.base}/bench/append"
            ingest_url = f"{service.base}/v1/models/bench/batches"
            with worker_processes(url, 1, Path(logdir)) if not embedded else nullcontext():
                bodies = [make_body(rows, seed) for seed in range(64)]
                for warm_up in (bare_url, in_app_url, ingest_url):
                    run_clients(warm_up, headers, bodies, clients, 4)
                per_client = max(1, batches // clients)
                n = clients * per_client
                bares, in_apps, ingests = [], [], []
                cpu_bare: list[float] = []
                cpu_in_app: list[float] = []
                cpu_ingest: list[float] = []
                latencies: list[float] = []
                wal_ceiling = wal_ingest = None
                for _ in range(rounds):
                    wait_drained(engine, poll_seconds=0.2)
                    bares.append(
                        _timed(
                            bare,
                            cpu_bare,
                            lambda: run_clients(bare_url, headers, bodies, clients, per_client),
                            n,
                        )
                    )
                    before = _wal_lsn(url)
                    in_apps.append(
                        _timed(
                            service,
                            cpu_in_app,
                            lambda: run_clients(in_app_url, headers, bodies, clients, per_client),
                            n,
                        )
                    )
                    after = _wal_lsn(url)
                    if before is not None and after is not None:
                        wal_ceiling = (after - before) / n
                    before = _wal_lsn(url)
                    ingests.append(
                        _timed(
                            service,
                            cpu_ingest,
                            lambda: run_clients(
                                ingest_url, headers, bodies, clients, per_client, latencies
                            ),
                            n,
                        )
                    )
                    # the worker's folds and results of these batches count too
                    wait_drained(engine, poll_seconds=0.2)
                    after = _wal_lsn(url)
                    if before is not None and after is not None:
                        wal_ingest = (after - before) / n
        engine.dispose()
        wal = (
            ""
            if wal_ingest is None or wal_ceiling is None
            else f"\n    WAL/batch: ingest {wal_ingest / 1e3:.1f} kB, in-app append "
            f"{wal_ceiling / 1e3:.1f} kB (ingest: until the worker has drained the queue)"
        )
        compared = (
            "bare append: sqlite3 with the service's pragmas, same database file; the "
            "service's CPU includes its embedded worker's folds (the bare endpoint folds nothing)"
            if embedded
            else "bare append: psycopg in autocommit, same database; the worker is a process "
            "of its own (its CPU is not counted)"
        )
        p99_ms = float(np.percentile(latencies, 99)) * 1e3
        bare_ratios = np.array(bares) / np.array(ingests)
        in_app_ratios = np.array(in_apps) / np.array(ingests)
        print(
            f"  {backend:8s} clients={clients}  rows={rows}  ({n} batches x {rounds} rounds)\n"
            f"    ({compared})\n"
            f"    ingest {n / min(ingests):7.1f} batches/s  p99 {p99_ms:.1f} ms"
            f"   bare append {n / min(bares):7.1f} batches/s   in-app append "
            f"{n / min(in_apps):7.1f} batches/s\n"
            f"    ratio to bare {np.median(bare_ratios):5.2f} "
            f"(rounds {bare_ratios.min():.2f}-{bare_ratios.max():.2f}, target >= 0.6)   "
            f"ratio to in-app {np.median(in_app_ratios):5.2f} "
            f"(rounds {in_app_ratios.min():.2f}-{in_app_ratios.max():.2f})\n"
            f"    server CPU per batch: ingest {np.median(cpu_ingest):.2f} ms   bare append "
            f"{np.median(cpu_bare):.2f} ms   in-app append {np.median(cpu_in_app):.2f} ms   "
            f"(bare / ingest {np.median(cpu_bare) / np.median(cpu_ingest):.2f}){wal}"
        )


def bench_backlog(backend: str, rows: int, batches: int, blocks: int) -> None:
    """The ingestion's CPU per batch as the unfolded backlog grows (no worker).

    The ingestion (app/services/ingest/batch.py) is called directly in one
    thread, no HTTP, in ``blocks`` blocks of ``batches`` batches into one
    window, and each block is followed by the same bodies through the bare
    endpoint's work (``bare_append.make_append``: parse, bin, one INSERT),
    called the same way. CPU time of this process per batch (on SQLite the
    database's own work included; on PostgreSQL the server's is not).
    """
    from bare_append import make_append

    with database(backend) as url:
        if url is None:
            return
        settings, engine, factory, model = model_on(
            url, {"name": "bench", "pi0": 0.05}, datetime.now(UTC)
        )
        append = make_append(url)
        bodies = [make_body(rows, seed) for seed in range(64)]

        def ingest(body: bytes) -> None:
            ingest_once(factory, model, body, settings, datetime.now(UTC))

        for body in bodies[:8]:  # the window's first batch, caches, connections
            ingest(body)
            append(body)
        print(f"  {backend:8s} rows={rows}, {batches} batches per block, no worker")
        for _ in range(blocks):
            waiting = _unfolded_deltas(engine)
            costs = []
            for run in (ingest, append):
                start = time.process_time()
                for i in range(batches):
                    run(bodies[i % len(bodies)])
                costs.append((time.process_time() - start) * 1e3 / batches)
            print(
                f"    {waiting:6d} deltas waiting   CPU per batch: ingest {costs[0]:.2f} ms"
                f"   bare append {costs[1]:.2f} ms   (bare / ingest {costs[1] / costs[0]:.2f})"
            )
        engine.dispose()


def _unfolded_deltas(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM batch_delta")).scalar_one())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", metavar="DATABASE_URL", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=100_000, help="rows per batch")
    parser.add_argument("--batches", type=int, default=16, help="batches per round")
    parser.add_argument(
        "--rounds", type=int, help="rounds per configuration (default 5; --small 3)"
    )
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--small", action="store_true", help="100-row batches, 8 clients")
    parser.add_argument("--clients", type=int, default=8, help="clients of --small")
    parser.add_argument("--embedded-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--backlog",
        action="store_true",
        help="100-row batches called directly, CPU per batch as the unfolded backlog grows",
    )
    parser.add_argument("--blocks", type=int, default=5, help="blocks of --backlog")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.embedded_worker)
        return
    if args.backlog:
        rows = 100 if args.rows == 100_000 else args.rows
        batches = 200 if args.batches == 16 else args.batches
        print(
            f"bench_ingest --backlog: {rows} rows per batch, {args.blocks} blocks of "
            f"{batches} batches into one window, called in one thread (no HTTP), no worker"
        )
        for backend in args.backends.split(","):
            bench_backlog(backend.strip(), rows, batches, args.blocks)
        return
    if args.small:
        args.rounds = args.rounds or 3
        rows = 100 if args.rows == 100_000 else args.rows
        batches = 400 if args.batches == 16 else args.batches
        print(
            f"bench_ingest --small: {rows} rows per batch, {args.clients} clients, "
            f"{batches} batches per round, {args.rounds} rounds, a worker running "
            "(rates: the best round; ratios: ingest / ceiling, median of the rounds)"
        )
        for backend in args.backends.split(","):
            bench_small(backend.strip(), rows, batches, args.clients, args.rounds)
        return
    args.rounds = args.rounds or 5
    print(
        f"bench_ingest: {args.rows:,} rows per batch, {args.batches} batches per round, "
        f"{args.rounds} rounds (rates: the best round; ratio = ingest / parse-only ceiling, "
        "median of the rounds, target >= 0.5)"
    )
    for backend in args.backends.split(","):
        bench_backend(backend.strip(), args.rows, args.batches, args.rounds)


if __name__ == "__main__":
    main()
