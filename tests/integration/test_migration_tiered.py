"""Migration 0005 (tiered refresh) over data written through its predecessor 0004, on
SQLite and Postgres: stored results keep their documents and get their own detail stamp."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from _migration_support import database_at
from _worker_support import session_factory_for

from app.db import queue
from app.db.migrate import upgrade_to_head

T0 = datetime(2026, 11, 20, 10, tzinfo=UTC)
T1 = T0 + timedelta(hours=1)
CURVES = '{"roc": {"fpr": [0.0, 1.0], "tpr": [0.0, 1.0]}}'
INTERVALS = '{"auc_roc": {"lower": 0.6, "upper": 0.8, "level": 0.95}}'


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def old_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at revision 0004 holding two windows: one with a fresh full result
    (curves, intervals), one whose computation failed."""
    url, engine = database_at(request, tmp_path, "0004", T0)
    hist = np.arange(4, dtype="<i8").tobytes()
    with engine.begin() as conn:
        for start, version in ((T0, 3), (T1, 1)):
            conn.execute(
                sa.text(
                    "INSERT INTO window_aggregate (model_id, segment, window_start, n, positives,"
                    " hist_positives, hist_negatives, confusion, version, dirty, created_at,"
                    " updated_at) VALUES (1, '*', :t, 6, 2, :h, :h, '[]', :v, false, :t, :t)"
                ),
                {"t": start, "h": hist, "v": version},
            )
        conn.execute(
            sa.text(
                "INSERT INTO window_metrics (model_id, segment, window_start, aggregate_version,"
                " computed_at, status, metrics, curves, intervals) VALUES (1, '*', :t, 3, :c,"
                " 'fresh', '{\"auc_roc\": 0.7}', :curves, :intervals)"
            ),
            {"t": T0, "c": T0 + timedelta(minutes=5), "curves": CURVES, "intervals": INTERVALS},
        )
        conn.execute(
            sa.text(
                "INSERT INTO window_metrics (model_id, segment, window_start, aggregate_version,"
                " computed_at, status, metrics, error) VALUES (1, '*', :t, 1, :t, 'error', '{}',"
                " 'boom')"
            ),
            {"t": T1},
        )
    engine.dispose()
    yield url


def test_upgrade_stamps_stored_results_with_their_own_version(old_url: str) -> None:
    upgrade_to_head(old_url)
    engine = sa.create_engine(old_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT window_start, aggregate_version, status, detail_version,"
                    " detail_computed_at, curves, intervals, computed_at FROM window_metrics"
                    " ORDER BY window_start"
                )
            ).all()
            due = conn.execute(sa.text("SELECT detail_due_at FROM window_aggregate")).all()
    finally:
        engine.dispose()
    fresh, failed = rows
    assert (fresh[1], fresh[2], fresh[3]) == (3, "fresh", 3)
    assert fresh[4] is not None and fresh[4] == fresh[7]  # the stamp is the result's time
    assert fresh[5] is not None and fresh[6] is not None  # the documents are kept
    assert (failed[2], failed[3], failed[4]) == ("error", None, None)
    assert [d[0] for d in due] == [None, None]  # nothing is due: the details are current
    with session_factory_for(old_url) as factory, factory() as session:
        assert not queue.any_claimable(session)  # the claim query runs on the new column
