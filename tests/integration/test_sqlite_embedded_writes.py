"""Write paths on SQLite while the embedded worker commits window results.

``priorwatch serve`` on SQLite runs the worker as a thread of the API process.
A service that read in a deferred transaction and then wrote used to fail at
once with "database is locked" (SQLITE_BUSY_SNAPSHOT: the worker committed
between the read and the write, and no busy timeout helps). Every write path
now starts with ``BEGIN IMMEDIATE`` (app.db.session.write_transaction): here
models and keys are created, updated and revoked and batches are posted, from
two client threads, while the worker is busy, and no request may fail.
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from app.config import Settings
from app.drift.simulation import shifted_logit_scores
from app.main import create_app

ADMIN = {"Authorization": "Bearer embedded-admin-token-0123456789"}
N_BINS = 200
WINDOWS = 12
ROUNDS = 6


def _batch(rng: np.random.Generator, at: datetime, segment: str | None = None) -> dict[str, Any]:
    scores, labels = shifted_logit_scores(rng, 300, 0.3, separation=1.5, offset=-1.0)
    body: dict[str, Any] = {
        "timestamp": at.isoformat(),
        "scores": scores.tolist(),
        "labels": labels.astype(int).tolist(),
    }
    if segment is not None:
        body["segment"] = segment
    return body


def _client_work(
    client: TestClient, prefix: str, seed: int, failures: list[str], hour: datetime
) -> None:
    rng = np.random.default_rng(seed)

    def check(response: Any, expected: int, what: str) -> Any:
        if response.status_code != expected:
            failures.append(f"{what}: {response.status_code} {response.text[:200]}")
        return response

    for i in range(ROUNDS):
        name = f"{prefix}-{i}"
        body = {"name": name, "pi0": 0.1, "n_bins": N_BINS, "segments": ["eu"]}
        check(client.post("/v1/models", json=body, headers=ADMIN), 201, "create model")
        created = check(
            client.post(f"/v1/models/{name}/keys", json={"scopes": ["ingest"]}, headers=ADMIN),
            201,
            "create key",
        )
        if created.status_code != 201:
            continue
        token = {"Authorization": f"Bearer {created.json()['token']}"}
        for w in range(3):
            at = hour - timedelta(hours=w)
            check(
                client.post(
                    f"/v1/models/{name}/batches",
                    json=_batch(rng, at, "eu" if w % 2 else None),
                    headers={**token, "Idempotency-Key": uuid.uuid4().hex},
                ),
                202,
                "post batch",
            )
        # pi0 invalidates the model's windows: more work for the worker
        for pi0 in (0.2, 0.3):
            patch = {"pi0": pi0, "description": f"round {i}"}
            check(
                client.patch(f"/v1/models/{name}", json=patch, headers=ADMIN),
                200,
                "update model",
            )
        check(
            client.delete(f"/v1/models/{name}/keys/{created.json()['id']}", headers=ADMIN),
            204,
            "revoke key",
        )


def test_writes_succeed_while_the_embedded_worker_computes(sqlite_url: str) -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=sqlite_url,
        admin_token=ADMIN["Authorization"].removeprefix("Bearer "),
        embedded_worker=True,
    )
    app = create_app(settings)
    hour = datetime.now(UTC).replace(minute=30, second=0, microsecond=0) - timedelta(hours=1)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert any(t.name == "priorwatch-worker" for t in threading.enumerate())
        # a backlog of dirty windows keeps the worker claiming and committing
        body = {"name": "backlog", "pi0": 0.1, "n_bins": N_BINS, "segments": ["eu"]}
        assert client.post("/v1/models", json=body, headers=ADMIN).status_code == 201
        rng = np.random.default_rng(7)
        for w in range(WINDOWS):
            for segment in (None, "eu"):
                r = client.post(
                    "/v1/models/backlog/batches",
                    json=_batch(rng, hour - timedelta(hours=w), segment),
                    headers=ADMIN,
                )
                assert r.status_code == 202, r.text

        failures: list[str] = []
        threads = [
            threading.Thread(target=_client_work, args=(client, f"m{k}", k, failures, hour))
            for k in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not any(t.is_alive() for t in threads)
        assert failures == []
        listed = client.get("/v1/models", headers=ADMIN).json()["models"]
        assert {m["name"] for m in listed} == {"backlog"} | {
            f"m{k}-{i}" for k in range(2) for i in range(ROUNDS)
        }
        assert all(m["pi0"] == 0.3 for m in listed if m["name"] != "backlog")
