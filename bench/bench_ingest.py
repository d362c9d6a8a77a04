"""Ingestion throughput through HTTP, against a parse-only ceiling measured in the same run.

A real uvicorn server on 127.0.0.1 serves the priorwatch app plus one extra
route, ``POST /bench/parse``, that only reads the same body and parses it
with orjson (the ceiling: what any JSON endpoint must pay). Clients post raw
JSON batches of 100,000 (score, label) rows with 1 and 4 concurrent clients,
on SQLite and on PostgreSQL (skipped if unreachable), and the script prints
rows/s for both endpoints and their ratio (target >= 0.5).

Usage: ``python bench/bench_ingest.py [--rows 100000] [--batches 6] [--backends sqlite,postgres]``.
Every loop is bounded; the server is stopped and temporary databases removed.
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
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import orjson
from _common import postgres_database
from fastapi import Request
from starlette.responses import Response

ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"


# --- server side (child process) ---------------------------------------------


def serve(database_url: str, port: int) -> None:
    import uvicorn

    from app.config import Settings
    from app.main import create_app

    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=database_url,
        admin_token=ADMIN_TOKEN,
        embedded_worker=False,
    )
    app = create_app(settings)

    @app.post("/bench/parse", status_code=202)
    async def parse_only(request: Request) -> Response:
        doc = orjson.loads(await request.body())
        return Response(orjson.dumps({"count": len(doc["scores"])}), status_code=202)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# --- client side ---------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(database_url: str) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", database_url, "--port", str(port)],
        cwd=Path(__file__).resolve().parent.parent,
    )
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
        yield base
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
    with postgres_database("  postgres unreachable ({reason}): skipped") as url:
        if url is not None:
            upgrade_to_head(url)
        yield url


def make_body(rows: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    labels = (rng.random(rows) < 0.1).astype(int)
    scores = 1.0 / (1.0 + np.exp(-rng.normal(-2.0 + 2.5 * labels, 1.0)))
    return orjson.dumps(
        {
            "timestamp": datetime.now(UTC).isoformat(),
            "scores": scores.tolist(),
            "labels": labels.tolist(),
        }
    )


def run_clients(
    url: str, headers: dict[str, str], bodies: list[bytes], clients: int, per_client: int
) -> float:
    """Seconds for ``clients`` threads to post ``per_client`` bodies each (keep-alive)."""
    errors: list[str] = []
    barrier = threading.Barrier(clients + 1)

    def work(index: int) -> None:
        with httpx.Client(timeout=120) as client:
            barrier.wait()
            for j in range(per_client):
                h = {**headers, "Idempotency-Key": uuid.uuid4().hex}
                r = client.post(url, content=bodies[(index + j) % len(bodies)], headers=h)
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


def bench_backend(backend: str, rows: int, batches: int, rounds: int) -> None:
    with database(backend) as url:
        if url is None:
            return
        with server(url) as base:
            admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            httpx.post(
                f"{base}/v1/models", json={"name": "bench", "pi0": 0.05}, headers=admin
            ).raise_for_status()
            key = httpx.post(
                f"{base}/v1/models/bench/keys", json={"scopes": ["ingest"]}, headers=admin
            )
            key.raise_for_status()
            headers = {
                "Authorization": f"Bearer {key.json()['token']}",
                "Content-Type": "application/json",
            }
            bodies = [make_body(rows, seed) for seed in range(4)]
            mb = len(bodies[0]) / 1e6
            # warm up both paths (imports, caches, connections)
            run_clients(f"{base}/bench/parse", headers, bodies, 1, 1)
            run_clients(f"{base}/v1/models/bench/batches", headers, bodies, 1, 1)
            for clients in (1, 4):
                per_client = max(1, batches // clients)
                n_rows = rows * clients * per_client
                # alternate the two endpoints and keep each one's best round: other
                # processes on the machine slow a round down, never speed it up
                ceiling = ingest = float("inf")
                for _ in range(rounds):
                    ceiling = min(
                        ceiling,
                        run_clients(f"{base}/bench/parse", headers, bodies, clients, per_client),
                    )
                    ingest = min(
                        ingest,
                        run_clients(
                            f"{base}/v1/models/bench/batches", headers, bodies, clients, per_client
                        ),
                    )
                ceiling_rate, ingest_rate = n_rows / ceiling, n_rows / ingest
                print(
                    f"  {backend:8s} clients={clients}  body={mb:.1f} MB  "
                    f"ceiling {ceiling_rate / 1e6:6.2f} M rows/s   "
                    f"ingest {ingest_rate / 1e6:6.2f} M rows/s   "
                    f"ratio {ingest_rate / ceiling_rate:5.2f}  "
                    f"({clients * per_client} batches x {rounds} rounds)"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", metavar="DATABASE_URL", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=100_000, help="rows per batch")
    parser.add_argument("--batches", type=int, default=8, help="batches per configuration")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds per configuration (best kept)"
    )
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    print(
        f"bench_ingest: {args.rows:,} rows per batch, {args.batches} batches per round, "
        f"best of {args.rounds} rounds (ratio = ingest / parse-only ceiling, target >= 0.5)"
    )
    for backend in args.backends.split(","):
        bench_backend(backend.strip(), args.rows, args.batches, args.rounds)


if __name__ == "__main__":
    main()
