"""What one window costs on PostgreSQL: bytes per window, by table.

``--windows`` hourly windows of a model with the default 10,000 bins each
receive ``--batches`` scores batches of ``--rows`` labelled rows, and the
worker folds and computes them (full refreshes: curves and intervals
stored). Printed: ``pg_total_relation_size`` (table, TOAST and indexes) of
each table after minus before, divided by the windows; then the same once
the batch rows are deleted and the tables vacuumed (what a window keeps after
the idempotency retention: its aggregate and its stored result).

Usage: ``python bench/bench_window_storage.py [--windows 100] [--batches 4] [--rows 2000]``.
Needs the PostgreSQL server of PRIORWATCH_TEST_POSTGRES_URL; prints a notice and
exits 0 when it is unreachable.
"""

from __future__ import annotations

import argparse
from datetime import timedelta

import numpy as np
import sqlalchemy as sa
from _common import migrated_postgres_database, model_on
from bench_worker import now, post

from app.worker.jobs import DatabaseJobs

TABLES = ("window_aggregate", "window_metrics", "batch", "batch_delta")


def sizes(engine: sa.Engine) -> dict[str, int]:
    with engine.connect() as connection:
        return {
            t: int(connection.scalar(sa.text(f"SELECT pg_total_relation_size('{t}')")))
            for t in TABLES
        }


def report(title: str, before: dict[str, int], after: dict[str, int], windows: int) -> None:
    per = {t: (after[t] - before[t]) / windows for t in TABLES}
    print(title)
    for t in TABLES:
        print(f"  {t:18s} {per[t]:10,.0f} bytes/window")
    print(f"  {'total':18s} {sum(per.values()):10,.0f} bytes/window")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--rows", type=int, default=2_000)
    args = parser.parse_args()
    with migrated_postgres_database() as url:
        if url is None:
            return
        settings, engine, factory, model = model_on(url, {"name": "storage", "pi0": 0.05}, now())
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(sa.text("VACUUM ANALYZE"))
        before = sizes(engine)
        rng = np.random.default_rng(1)
        for w in range(args.windows):
            for _ in range(args.batches):
                post(factory, model, settings, now() - timedelta(hours=w + 1), rng, args.rows)
        jobs = DatabaseJobs(factory, lease_seconds=600, claim_group_size=8)
        while (group := jobs.claim()) is not None:
            jobs.run(group)
        print(
            f"{args.windows} windows of {args.batches} batches x {args.rows} rows, "
            f"{model.n_bins} bins, folded and computed"
        )
        report(
            "with the batch rows (within the idempotency retention):",
            before,
            sizes(engine),
            args.windows,
        )
        with engine.begin() as connection:
            connection.execute(sa.text("DELETE FROM batch"))
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(sa.text("VACUUM FULL"))
        report(
            "after the batch rows are deleted (VACUUM FULL):", before, sizes(engine), args.windows
        )
        engine.dispose()


if __name__ == "__main__":
    main()
