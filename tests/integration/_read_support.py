"""Shared setup of the read-side tests (windows, SLA, /metrics): a model with known
raw data posted through the HTTP API, and a synchronous worker drain.

The data (seeded): model "fraud", window 1h, pi0 0.1, cost ratio 0.7,
segments eu and us, drift reference = the first 3 hours of day D (3 days ago).
Day D hours 0-5 and day D+1 hours 0-2 receive one scores batch per segment
(600 rows, prior 0.2); the us batch of day D hour 5 has prior 0.02 (about 12
positives: fewer than min_class_count, so its class-dependent metrics are
insufficient_data).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import sqlalchemy as sa
from builders import sample
from fastapi.testclient import TestClient

from app.config import Settings
from app.db.base import Base
from app.main import create_app
from app.timegrid import window_start
from app.worker.jobs import DatabaseJobs

MODEL = "fraud"
PI0 = 0.1
COST_RATIO = 0.7
THRESHOLD = 0.5
ROWS = 600
SEGMENTS = ("eu", "us")
HOURS = tuple(range(6)) + tuple(24 + h for h in range(3))
"""Hours after day D's midnight that receive data (day D: 0-5, day D+1: 0-2)."""
SCARCE = ("us", 5)
"""(segment, hour) whose batch has prior 0.02: too few positives."""
REFERENCE_HOURS = 3
OBJECTIVES = (
    {"metric": "calibrated_f1", "op": ">=", "target": 0.3},
    {"metric": "f1", "op": ">=", "target": 0.99},
    {"metric": "recall", "op": ">=", "target": 0.2},
)

Scores = npt.NDArray[np.float64]
Labels = npt.NDArray[np.int64]


def drain(client: TestClient, max_jobs: int = 2_000) -> int:
    """Run the worker in this thread until no window is dirty; returns the jobs run."""
    jobs = DatabaseJobs(client.app.state.session_factory, lease_seconds=60.0)  # type: ignore[attr-defined]
    for done in range(max_jobs):
        job = jobs.claim()
        if job is None:
            return done
        jobs.run(job)
    raise AssertionError(f"the queue did not drain in {max_jobs} jobs")


@dataclass
class Populated:
    """What was posted: raw data per (segment, hour) and the tokens."""

    client: TestClient
    admin: dict[str, str]
    read: dict[str, str]
    ingest: dict[str, str]
    day: datetime
    raw: dict[tuple[str, int], tuple[Scores, Labels]] = field(default_factory=dict)
    batches: int = 0

    def hour(self, h: int) -> datetime:
        return self.day + timedelta(hours=h)

    def data(self, segment: str | None, hours: tuple[int, ...]) -> tuple[Scores, Labels]:
        """The concatenated raw data of a segment (None: every segment) over ``hours``."""
        segments = SEGMENTS if segment is None else (segment,)
        parts = [self.raw[(s, h)] for h in hours for s in segments if (s, h) in self.raw]
        return (
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]),
        )

    def post(self, segment: str, h: int, scores: Scores, labels: Labels) -> None:
        body = {
            "timestamp": (self.hour(h) + timedelta(minutes=7)).isoformat(),
            "segment": segment,
            "scores": scores.tolist(),
            "labels": labels.tolist(),
        }
        r = self.client.post(f"/v1/models/{MODEL}/batches", json=body, headers=self.ingest)
        assert r.status_code == 202, r.text
        self.batches += 1

    def get(self, path: str, **params: Any) -> Any:
        r = self.client.get(f"/v1/models/{MODEL}{path}", params=params, headers=self.read)
        assert r.status_code == 200, r.text
        return r.json()


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def populate(client: TestClient, admin: dict[str, str], *, seed: int = 7) -> Populated:
    """Register the model, post the data of the module docstring, and drain the worker."""
    day = window_start(datetime.now(UTC) - timedelta(days=3), "1d")
    body = {
        "name": MODEL,
        "window": "1h",
        "threshold": THRESHOLD,
        "pi0": PI0,
        "cost_ratio": COST_RATIO,
        "segments": list(SEGMENTS),
        "sla": list(OBJECTIVES),
        "drift": {
            "reference": {
                "from": iso(day),
                "to": iso(day + timedelta(hours=REFERENCE_HOURS)),
            }
        },
    }
    r = client.post("/v1/models", json=body, headers=admin)
    assert r.status_code == 201, r.text

    def key(scopes: list[str]) -> dict[str, str]:
        r = client.post(f"/v1/models/{MODEL}/keys", json={"scopes": scopes}, headers=admin)
        assert r.status_code == 201, r.text
        return {"Authorization": f"Bearer {r.json()['token']}"}

    out = Populated(client, admin, key(["read"]), key(["ingest"]), day)
    rng = np.random.default_rng(seed)
    for h in HOURS:
        for segment in SEGMENTS:
            prior = 0.02 if (segment, h) == SCARCE else 0.2
            scores, labels = sample(rng, ROWS, prior)
            out.raw[(segment, h)] = (scores, labels)
            out.post(segment, h, scores, labels)
    drain(client)
    return out


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
"""Parameters of :func:`shared_database_url` (as tests/conftest.py's ``database_url``)."""
ADMIN_TOKEN = "read-side-admin-token-0123456789"


def shared_database_url(request: pytest.FixtureRequest, tmp_dir: Path) -> str:
    """A migrated, empty database for a whole test module (``request.param`` = backend).

    SQLite: a copy of the session's migrated template. PostgreSQL: the session's
    database (tests/conftest.py ``postgres_url``), emptied now. Modules that use
    it must not also use the function-scoped ``database_url`` fixtures, which
    empty the same PostgreSQL database before each test.
    """
    if request.param == "sqlite":
        path = tmp_dir / "read.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    url: str = request.getfixturevalue("postgres_url")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
            conn.execute(sa.text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    finally:
        engine.dispose()
    return url


def populated_app(url: str) -> Iterator[Populated]:
    """Generator for a module-scoped fixture: the real app over ``url``, populated."""
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, database_url=url, admin_token=ADMIN_TOKEN, embedded_worker=False
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield populate(client, {"Authorization": f"Bearer {ADMIN_TOKEN}"})
