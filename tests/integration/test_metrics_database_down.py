"""GET /metrics while the database is down: 200 with ``priorwatch_database_up 0`` and
the series of the process, never a stored (or cached) window series; back to
``priorwatch_database_up 1`` and the windows when the database returns."""

from __future__ import annotations

import logging
import socket
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from _read_support import drain
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.orm import Session

from app.db.migrate import upgrade_to_head
from app.exporter.registry import Exporter

Samples = dict[str, list[tuple[dict[str, str], float]]]

STORED = ("priorwatch_window_", "priorwatch_drift_", "priorwatch_sla_", "priorwatch_dirty_")
"""Prefixes of series read from the database."""


def _scrape(client: TestClient) -> Samples:
    r = client.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return samples


def _assert_down(samples: Samples) -> None:
    assert samples["priorwatch_database_up"] == [({}, 0.0)]
    assert samples["process_cpu_seconds_total"][0][1] > 0  # the process series stay
    assert "python_gc_objects_collected_total" in samples
    stored = [name for name in samples if name.startswith(STORED)]
    assert stored == [], stored


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_nothing_listening_answers_200_with_database_up_0(
    client_for: Callable[..., TestClient],
    admin_headers: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = client_for(f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/priorwatch")
    r = client.post("/v1/models/fraud/batches", json={}, headers=admin_headers)
    assert r.status_code == 503  # a rejected batch: the pipeline's own counter
    caplog.set_level(logging.INFO)
    caplog.clear()
    samples = _scrape(client)
    _assert_down(samples)
    assert samples["priorwatch_batches_rejected_total"] == [
        ({"reason": "database_unavailable"}, 1.0)
    ]
    (record,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "database unavailable for /metrics" in record.getMessage()
    assert record.exc_info is None


def test_sqlite_file_out_of_reach_answers_200_with_database_up_0(
    client_for: Callable[..., TestClient], tmp_path: Path
) -> None:
    client = client_for(f"sqlite:///{tmp_path / 'no-such-directory' / 'priorwatch.db'}")
    _assert_down(_scrape(client))


@contextmanager
def _connections_refused(url: str) -> Iterator[None]:
    """The database of ``url`` refuses new connections and loses its open ones (as if
    its server stopped); both come back at the end."""
    name = sa.engine.make_url(url).database
    engine = sa.create_engine(url.rsplit("/", 1)[0] + "/postgres", isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as c:
            c.execute(sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
            c.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"
                ),
                {"n": name},
            )
        yield
    finally:
        with engine.connect() as c:
            c.execute(sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        engine.dispose()


@pytest.mark.postgres
def test_postgres_stopped_then_back(
    empty_postgres_url: str, client_for: Callable[..., TestClient], admin_headers: dict[str, str]
) -> None:
    """On a database of its own: the test stops every connection to it."""
    url = empty_postgres_url
    upgrade_to_head(url)
    client = client_for(url)
    r = client.post("/v1/models", json={"name": "m", "pi0": 0.2}, headers=admin_headers)
    assert r.status_code == 201, r.text
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 200)
    body = {
        "timestamp": (datetime.now(UTC) - timedelta(hours=2)).isoformat(),
        "scores": np.clip(0.3 * labels + rng.random(200) * 0.7, 0, 1).tolist(),
        "labels": labels.tolist(),
    }
    r = client.post("/v1/models/m/batches", json=body, headers=admin_headers)
    assert r.status_code == 202, r.text
    drain(client)
    up = _scrape(client)
    assert up["priorwatch_database_up"] == [({}, 1.0)]
    assert up["priorwatch_window_metric"] and up["priorwatch_dirty_windows"] == [({}, 0.0)]
    with _connections_refused(url):
        _assert_down(_scrape(client))  # the cached window lines are not served
    back = _scrape(client)
    assert back["priorwatch_database_up"] == [({}, 1.0)]
    assert sorted(back["priorwatch_window_metric"], key=repr) == sorted(
        up["priorwatch_window_metric"], key=repr
    )


def test_a_database_error_that_is_no_outage_is_not_hidden() -> None:
    """A bug (e.g. a missing table) is not reported as a database that is down."""
    error = sa.exc.OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: m"))

    def broken() -> Session:
        raise error

    with pytest.raises(sa.exc.OperationalError):
        Exporter(broken, max_unfolded_deltas=0).render()  # raises before any byte
