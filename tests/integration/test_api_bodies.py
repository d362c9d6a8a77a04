"""Request bodies: duplicate JSON keys, Content-Encoding, parse errors (SQLite app).

Each case used to be read differently by two parsers, accepted when it should
be refused, or answered with a bare ``about:blank`` problem.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson
import pytest

PROBLEM = "application/problem+json"
LIMIT = 64 * 1024


@pytest.fixture
def setup(sqlite_url: str, api_for: Callable[..., Any]) -> tuple[Any, dict[str, str]]:
    api = api_for(sqlite_url, max_body_bytes=LIMIT)
    api.create_model("m")
    token = api.create_key("m")
    return api, {**api.bearer(token), "Content-Type": "application/json"}


def _batch(n: int, seed: int = 3) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {
        "timestamp": datetime.now(UTC).isoformat(),
        "scores": np.round(rng.random(n), 4).tolist(),
        "labels": (rng.random(n) < 0.3).astype(int).tolist(),
    }


def _stored_rows(api: Any, headers: dict[str, str]) -> int:
    windows = api.client.get("/v1/models/m/windows", headers=headers).json()["windows"]
    return sum(int(w["n"]) for w in windows)


# --- duplicate keys ----------------------------------------------------------------


def _duplicated_labels(n: int, first: list[int], second: list[int]) -> bytes:
    base = _batch(n)
    scores = orjson.dumps(base["scores"]).decode()
    return (
        f'{{"timestamp": "{base["timestamp"]}", "scores": {scores}, '
        f'"labels": {orjson.dumps(first).decode()}, "labels": {orjson.dumps(second).decode()}}}'
    ).encode()


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ([0, 1, 0], [1, 0, 1]),  # both integer arrays: the simdjson fast path
        ([0, 1, 0], [True, False, True]),  # booleans: the orjson general path
        ([True, False, True], [0, 1, 0]),
    ],
)
def test_duplicate_keys_are_refused_on_both_parsers(
    setup: tuple[Any, dict[str, str]], first: list[Any], second: list[Any]
) -> None:
    api, headers = setup
    body = _duplicated_labels(3, first, second)
    for path in ("/v1/models/m/batches", "/v1/evaluate"):
        r = api.client.post(path, content=body, headers=headers)
        assert r.status_code == 422, r.text
        assert r.headers["content-type"] == PROBLEM
        assert r.json()["type"].endswith("duplicate-key")
        assert r.json()["errors"] == [{"field": "labels", "reason": "duplicate key"}]
    assert _stored_rows(api, headers) == 0


NOW = datetime.now(UTC).isoformat()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            f'{{"timestamp": "{NOW}", "timestamp": "{NOW}", "labels": [1]}}'.encode(),
            "timestamp",
        ),
        (b'{"histogram": {"positives": [1], "positives": [2], "negatives": [0]}}', "histogram"),
        (b'{"confusion_matrix": {"tp": 1, "fp": 1, "fn": 1, "tn": 1, "tp": 9}}', "confusion"),
    ],
)
def test_duplicate_keys_are_named_at_any_depth(
    setup: tuple[Any, dict[str, str]], body: bytes, field: str
) -> None:
    api, headers = setup
    r = api.client.post("/v1/models/m/batches", content=body, headers=headers)
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"].startswith(field)
    assert r.json()["errors"][0]["field"].split(".")[-1] in {"timestamp", "positives", "tp"}


def test_duplicate_keys_on_pydantic_routes(setup: tuple[Any, dict[str, str]]) -> None:
    api, _ = setup
    body = b'{"name": "a", "pi0": 0.1, "name": "b"}'
    headers = {**api.admin, "Content-Type": "application/json"}
    r = api.client.post("/v1/models", content=body, headers=headers)
    assert r.status_code == 422, r.text
    assert r.json()["errors"] == [{"field": "name", "reason": "duplicate key"}]
    assert [m["name"] for m in api.client.get("/v1/models", headers=api.admin).json()["models"]]
    assert api.client.get("/v1/models/b", headers=api.admin).status_code == 404


# --- Content-Encoding ----------------------------------------------------------------


def test_gzip_body_is_decoded(setup: tuple[Any, dict[str, str]]) -> None:
    api, headers = setup
    batch = _batch(500)
    body = orjson.dumps(batch)
    assert len(body) < LIMIT
    r = api.client.post(
        "/v1/models/m/batches",
        content=gzip.compress(body),
        headers={**headers, "Content-Encoding": "gzip"},
    )
    assert r.status_code == 202, r.text
    pending = api.client.get("/v1/models/m/windows", headers=headers).json()["windows"]
    assert [(w["n"], w["positives"]) for w in pending] == [(500, sum(batch["labels"]))]
    del batch["timestamp"]
    plain = orjson.dumps(batch)
    r = api.client.post(
        "/v1/evaluate",
        content=gzip.compress(plain),
        headers={**headers, "Content-Encoding": "GZIP"},
    )
    assert r.status_code == 200, r.text
    identity = api.client.post(
        "/v1/evaluate", content=plain, headers={**headers, "Content-Encoding": "identity"}
    )
    assert identity.status_code == 200 and identity.json() == r.json()
    old_name = api.client.post(
        "/v1/evaluate",
        content=gzip.compress(plain),
        headers={**headers, "Content-Encoding": "x-gzip"},
    )
    assert old_name.status_code == 200 and old_name.json() == r.json()


def test_gzip_limit_applies_to_decoded_bytes(setup: tuple[Any, dict[str, str]]) -> None:
    api, headers = setup
    body = orjson.dumps(_batch(20_000))  # about 4x the limit, compresses below it
    packed = gzip.compress(body)
    assert len(packed) < LIMIT < len(body)
    r = api.client.post(
        "/v1/models/m/batches", content=packed, headers={**headers, "Content-Encoding": "gzip"}
    )
    assert r.status_code == 413, r.text
    assert r.json()["type"].endswith("body-too-large")
    assert _stored_rows(api, headers) == 0


def test_compression_bomb_is_413_without_inflating_it(
    setup: tuple[Any, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    api, headers = setup
    bomb = gzip.compress(b" " * (32 * 1024 * 1024), compresslevel=9)  # 32 MiB of spaces
    assert len(bomb) < LIMIT
    produced: list[int] = []
    real = zlib.decompressobj

    class Spy:
        def __init__(self, *args: Any) -> None:
            self._d = real(*args)

        def decompress(self, data: bytes, max_length: int = 0) -> bytes:
            out = self._d.decompress(data, max_length)
            produced.append(len(out))
            return out

        def __getattr__(self, name: str) -> Any:
            return getattr(self._d, name)

    monkeypatch.setattr("app.api.body_limit.zlib.decompressobj", Spy)
    r = api.client.post(
        "/v1/models/m/batches", content=bomb, headers={**headers, "Content-Encoding": "gzip"}
    )
    assert r.status_code == 413, r.text
    assert sum(produced) <= LIMIT + 1  # never more than the limit held in memory


@pytest.mark.parametrize("encoding", ["br", "deflate", "zstd", "gzip, gzip", "compress"])
def test_other_encodings_are_415(setup: tuple[Any, dict[str, str]], encoding: str) -> None:
    api, headers = setup
    body = orjson.dumps(_batch(10))
    r = api.client.post(
        "/v1/models/m/batches", content=body, headers={**headers, "Content-Encoding": encoding}
    )
    assert r.status_code == 415, r.text
    assert r.headers["content-type"] == PROBLEM
    assert r.headers["accept-encoding"] == "gzip, identity"
    assert "Content-Encoding" in r.json()["detail"]
    assert _stored_rows(api, headers) == 0


@pytest.mark.parametrize(
    "packed",
    [b"not gzip at all", gzip.compress(b'{"scores": [1]}', mtime=0)[:-9]],
    ids=["not-gzip", "truncated"],  # gzip bytes carry a time: ids from them differ per xdist worker
)
def test_corrupt_gzip_is_400(setup: tuple[Any, dict[str, str]], packed: bytes) -> None:
    api, headers = setup
    r = api.client.post(
        "/v1/evaluate", content=packed, headers={**headers, "Content-Encoding": "gzip"}
    )
    assert r.status_code == 400, r.text
    assert r.json()["type"].endswith("malformed-json")
    assert "gzip" in r.json()["detail"]


# --- parse errors ----------------------------------------------------------------


@pytest.mark.parametrize("body", [b"\x80", b'{"name": "\xff"}', b'{"name": ', b"[1"])
def test_parse_errors_are_malformed_json_on_every_route(
    setup: tuple[Any, dict[str, str]], body: bytes
) -> None:
    api, headers = setup
    admin = {**api.admin, "Content-Type": "application/json"}
    for method, path, auth in (
        ("POST", "/v1/models", admin),
        ("PATCH", "/v1/models/m", admin),
        ("POST", "/v1/models/m/keys", admin),
        ("POST", "/v1/models/m/batches", headers),
        ("POST", "/v1/evaluate", headers),
    ):
        r = api.client.request(method, path, content=body, headers=auth)
        assert r.status_code == 400, (path, r.text)
        assert r.headers["content-type"] == PROBLEM
        assert r.json()["type"] == "urn:priorwatch:problem:malformed-json", (path, r.text)
