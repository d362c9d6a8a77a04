"""Liveness, readiness, unknown routes and unhandled errors as problem+json."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.db.revisions import head_revisions


def test_healthz_and_readyz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.get("/readyz")
    assert r.status_code == 200
    assert r.json() == {"status": "ready", "revision": ",".join(sorted(head_revisions()))}


def test_readyz_fails_until_migrated(tmp_path: Path, client_for: Callable[..., TestClient]) -> None:
    client = client_for(f"sqlite:///{tmp_path / 'empty.db'}")
    assert client.get("/healthz").status_code == 200
    r = client.get("/readyz")
    assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json"
    assert "priorwatch migrate" in r.json()["detail"]


def test_readyz_fails_when_the_database_is_unreachable(
    client_for: Callable[..., TestClient],
) -> None:
    client = client_for("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=1")
    r = client.get("/readyz")
    assert r.status_code == 503 and "unreachable" in r.json()["detail"]


def test_unknown_route_and_method_are_problems(client: TestClient) -> None:
    r = client.get("/v1/nothing-here")
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["type"] == "about:blank"
    r = client.delete("/healthz")
    assert r.status_code == 405 and r.json()["status"] == 405


def test_unhandled_errors_hide_internals(
    client: TestClient, admin_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.services.models import registry as models

    def boom(*_: object) -> None:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(models, "list_models", boom)
    r = client.get("/v1/models", headers=admin_headers)
    assert r.status_code == 500 and r.headers["content-type"] == "application/problem+json"
    assert "secret" not in r.text and r.json()["type"].endswith("internal-error")


def test_openapi_documents_every_request_body_with_an_example(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    bodies = 0
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            body = op.get("requestBody")
            if body is None:
                continue
            bodies += 1
            content = body["content"]["application/json"]
            ref = content["schema"]["$ref"].rsplit("/", 1)[-1]
            has_example = "examples" in content or "examples" in schemas[ref]
            assert has_example, f"{method.upper()} {path} has no example"
    assert bodies >= 5
    assert client.get("/docs").status_code == 200
