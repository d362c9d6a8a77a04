"""POST /v1/evaluate: the same values as app.metrics.evaluate; nothing stored."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.metrics import evaluate


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.fixture
def sqlite_client(sqlite_url: str, client_for: Callable[..., TestClient]) -> TestClient:
    return client_for(sqlite_url, max_batch_rows=1000)


def test_matches_the_python_evaluate(sqlite_client: TestClient) -> None:
    rng = np.random.default_rng(5)
    y = rng.random(400) < 0.25
    s = np.round(np.clip(rng.normal(0.3 + 0.35 * y, 0.2), 0, 1), 3)  # ties included
    body = {
        "scores": s.tolist(),
        "labels": y.astype(int).tolist(),
        "threshold": 0.4,
        "pi0": 0.1,
        "cost_ratio": 0.7,
        "target_prior": 0.05,
    }
    r = sqlite_client.post("/v1/evaluate", json=body)  # no Authorization: none needed
    assert r.status_code == 200, r.text
    got = r.json()["metrics"]
    expected = evaluate(s, y, threshold=0.4, pi0=0.1, cost_ratio=0.7, target_prior=0.05)
    assert set(got) == set(expected)
    assert all(_same(got[k], expected[k]) for k in expected), {
        k: (got[k], expected[k]) for k in expected if not _same(got[k], expected[k])
    }
    minimal = sqlite_client.post("/v1/evaluate", json={"scores": [0.9, 0.2], "labels": [1, 0]})
    assert minimal.status_code == 200
    assert minimal.json()["metrics"]["accuracy"] == 1.0
    assert "calibrated_f1" not in minimal.json()["metrics"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scores": [0.2, 1.2], "labels": [0, 1]}, "scores"),
        ({"scores": [0.2, 0.3], "labels": [0, 3]}, "labels"),
        ({"scores": [0.2], "labels": [0, 1]}, "labels"),
        ({"scores": [], "labels": []}, "scores"),
        ({"scores": [0.5] * 1001, "labels": [1] * 1001}, "scores"),
        ({"scores": [0.2, 0.3], "labels": [0, 1], "pi0": 1.5}, "pi0"),
        ({"scores": [0.2, 0.3], "labels": [0, 1], "pi0": "x"}, "pi0"),
        ({"scores": [0.2, 0.3], "labels": [0, 1], "threshold": True}, "threshold"),
        ({"scores": [0.2, 0.3], "labels": [0, 1], "weights": [1, 1]}, "weights"),
    ],
)
def test_bad_input(sqlite_client: TestClient, body: dict[str, Any], field: str) -> None:
    r = sqlite_client.post("/v1/evaluate", json=body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["errors"][0]["field"] == field


def test_malformed_and_media_type(sqlite_client: TestClient) -> None:
    r = sqlite_client.post(
        "/v1/evaluate", content=b"[1,", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 400 and r.json()["type"].endswith("malformed-json")
    r = sqlite_client.post(
        "/v1/evaluate", content=b"score,label\n0.1,0\n", headers={"Content-Type": "text/csv"}
    )
    assert r.status_code == 415
