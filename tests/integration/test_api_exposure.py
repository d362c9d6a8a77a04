"""What an anonymous caller can reach: /metrics token, docs switch, /v1/evaluate limits."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from app.api.docs import swagger_assets

PROBLEM = "application/problem+json"
METRICS_TOKEN = "metrics-token-0123456789abcdef"


def test_metrics_open_without_a_token(sqlite_url: str, client_for: Callable[..., Any]) -> None:
    client = client_for(sqlite_url)
    r = client.get("/metrics")
    assert r.status_code == 200 and "priorwatch" in r.text


def test_metrics_token_is_required_when_set(
    sqlite_url: str, client_for: Callable[..., Any]
) -> None:
    client = client_for(sqlite_url, metrics_token=METRICS_TOKEN)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}):
        r = client.get("/metrics", headers=headers)
        assert r.status_code == 401, r.text
        assert r.headers["content-type"] == PROBLEM
        assert r.headers["www-authenticate"] == "Bearer"
        assert "PRIORWATCH_METRICS_TOKEN" in r.json()["detail"]
        assert METRICS_TOKEN not in r.text
    ok = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert ok.status_code == 200 and "priorwatch" in ok.text


def test_docs_are_served_offline_and_root_points_to_them(
    sqlite_url: str, client_for: Callable[..., Any]
) -> None:
    client = client_for(sqlite_url)
    page = client.get("/docs")
    assert page.status_code == 200
    assert "http://" not in page.text and "https://" not in page.text  # no CDN
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"):
        assert f"/docs/assets/{asset}" in page.text
        r = client.get(f"/docs/assets/{asset}")
        assert r.status_code == 200
        assert r.content == (swagger_assets() / asset).read_bytes()
    assert client.get("/openapi.json").json()["info"]["title"] == "priorwatch"
    root = client.get("/", follow_redirects=False)
    assert root.status_code in (302, 307) and root.headers["location"] == "/docs"
    assert client.get("/redoc").status_code == 404  # ReDoc would load from a CDN


def test_docs_can_be_turned_off(sqlite_url: str, client_for: Callable[..., Any]) -> None:
    client = client_for(sqlite_url, docs_enabled=False)
    for path in ("/docs", "/openapi.json", "/docs/assets/swagger-ui.css", "/redoc"):
        r = client.get(path)
        assert r.status_code == 404, path
        assert r.headers["content-type"] == PROBLEM
    index = client.get("/", follow_redirects=False)
    assert index.status_code == 200 and index.json()["health"] == "/healthz"
    assert client.get("/healthz").status_code == 200


def test_evaluate_has_its_own_body_limit(sqlite_url: str, client_for: Callable[..., Any]) -> None:
    client = client_for(sqlite_url, evaluate_max_body_bytes=1000, max_body_bytes=100_000)
    small = {"scores": [0.1, 0.9], "labels": [0, 1]}
    assert client.post("/v1/evaluate", json=small).status_code == 200
    big = orjson.dumps({"scores": [0.25] * 200, "labels": [1] * 200})
    assert 1000 < len(big) < 100_000
    r = client.post("/v1/evaluate", content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "1000 bytes" in r.json()["detail"]
    # the general limit still governs the other routes
    r = client.post(
        "/v1/models/m/batches", content=big, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 401


def test_evaluate_concurrency_cap_answers_429(
    sqlite_url: str, client_for: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    client: TestClient = client_for(sqlite_url, evaluate_max_concurrency=1)
    entered, release = threading.Event(), threading.Event()
    from app.api.routes import evaluate as route

    real = route.evaluate_body

    def held(body: bytes, settings: Any) -> Any:
        entered.set()
        assert release.wait(30)
        return real(body, settings)

    monkeypatch.setattr(route, "evaluate_body", held)
    body = {"scores": [0.1, 0.9], "labels": [0, 1]}
    first: list[Any] = []
    thread = threading.Thread(target=lambda: first.append(client.post("/v1/evaluate", json=body)))
    thread.start()
    try:
        assert entered.wait(30)
        r = client.post("/v1/evaluate", json=body)
        assert r.status_code == 429, r.text
        assert r.headers["retry-after"] == "1"
        assert r.json()["type"].endswith("too-many-requests")
    finally:
        release.set()
        thread.join(30)
    assert first[0].status_code == 200
    monkeypatch.setattr(route, "evaluate_body", real)
    assert client.post("/v1/evaluate", json=body).status_code == 200  # the slot is free again
