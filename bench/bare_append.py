"""The bare append endpoint: the ceiling of small batches in ``bench_ingest.py --small``.

A FastAPI app of its own, with no middleware and one route, ``POST /append``:
parse the body with orjson, bin the labelled scores with numpy (sparsely: a
search of each score in the model's default edges), and INSERT one row (the
bins hit and their per-class counts as bytes) in autocommit, through psycopg
on PostgreSQL or sqlite3 with the service's pragmas on SQLite. None of the
service's machinery (authentication, sessions, admission, transactions):
what any endpoint that stores a batch must pay.

Usage: ``python bench/bare_append.py DATABASE_URL PORT`` (started by the bench).
"""

from __future__ import annotations

import sqlite3
import sys
import threading
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import psycopg
import uvicorn
from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from app.metrics.binning import default_bin_edges

TABLE = "bench_bare"
EDGES = default_bin_edges()


def connector(database_url: str) -> tuple[Any, str]:
    """A function opening one autocommit connection, and the INSERT statement."""
    if database_url.startswith("sqlite"):
        path = database_url.split(":///", 1)[1]

        def open_sqlite() -> sqlite3.Connection:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            for pragma in (  # app/db/session.py
                "foreign_keys = ON",
                "busy_timeout = 30000",
                "journal_mode = WAL",
                "synchronous = NORMAL",
            ):
                conn.execute(f"PRAGMA {pragma}")
            return conn

        return open_sqlite, f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?)"
    conninfo = database_url.replace("postgresql+psycopg://", "postgresql://", 1)
    return (
        lambda: psycopg.connect(conninfo, autocommit=True),
        f"INSERT INTO {TABLE} VALUES (%s, %s, %s, %s)",
    )


def make_append(database_url: str) -> Callable[[bytes], int]:
    """The bare endpoint's work on a body: parse, bin, one INSERT; its row count.
    Creates the table; one connection per calling thread."""
    connect, insert = connector(database_url)
    blob = "blob" if database_url.startswith("sqlite") else "bytea"
    with connect() as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE} "
            f"(id varchar(32) PRIMARY KEY, n bigint, positives bigint, bins {blob})"
        )
    local = threading.local()
    last_bin = EDGES.size - 2

    def append(body: bytes) -> int:
        doc = orjson.loads(body)
        scores = np.asarray(doc["scores"], dtype=np.float64)
        labels = np.asarray(doc["labels"], dtype=np.bool_)
        bins = np.minimum(np.searchsorted(EDGES, scores, side="right") - 1, last_bin)
        hit, inverse = np.unique(bins, return_inverse=True)
        pos = np.bincount(inverse, weights=labels, minlength=hit.size).astype("<i8")
        neg = np.bincount(inverse, minlength=hit.size).astype("<i8") - pos
        if not hasattr(local, "conn"):
            local.conn = connect()
        local.conn.execute(
            insert,
            (
                uuid.uuid4().hex,
                int(scores.size),
                int(pos.sum()),
                hit.astype("<i4").tobytes() + pos.tobytes() + neg.tobytes(),
            ),
        )
        return int(scores.size)

    return append


def create_bare_app(database_url: str) -> FastAPI:
    append = make_append(database_url)
    app = FastAPI()

    @app.post("/append", status_code=202)
    async def bare(request: Request) -> Response:
        count = await run_in_threadpool(append, await request.body())
        return Response(orjson.dumps({"count": count}), status_code=202)

    @app.get("/readyz")
    async def ready() -> Response:
        return Response(b"ok")

    return app


if __name__ == "__main__":
    uvicorn.run(
        create_bare_app(sys.argv[1]),
        host="127.0.0.1",
        port=int(sys.argv[2]),
        log_level="warning",
        access_log=False,
    )
