"""API keys: token shown once and stored hashed, listing, revocation, scopes."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa


def test_create_list_revoke(api: Any, db_engine: sa.Engine) -> None:
    api.create_model("m")
    c = api.client
    r = c.post("/v1/models/m/keys", json={"scopes": ["read", "ingest"]}, headers=api.admin)
    assert r.status_code == 201
    created = r.json()
    token = created["token"]
    assert token.startswith("pw_") and len(token) >= 40
    assert created["prefix"] == token[:10] and created["scopes"] == ["ingest", "read"]
    assert created["revoked_at"] is None
    with db_engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT token_hash, prefix FROM api_key")).one()
    assert stored.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in (stored.token_hash, stored.prefix)

    listed = c.get("/v1/models/m/keys", headers=api.admin).json()["keys"]
    assert listed == [{k: v for k, v in created.items() if k != "token"}]
    assert c.get("/v1/models/m", headers=api.bearer(token)).status_code == 200

    assert c.delete(f"/v1/models/m/keys/{created['id']}", headers=api.admin).status_code == 204
    assert c.delete(f"/v1/models/m/keys/{created['id']}", headers=api.admin).status_code == 204
    revoked = c.get("/v1/models/m/keys", headers=api.admin).json()["keys"][0]
    assert revoked["revoked_at"] is not None
    r = c.get("/v1/models/m", headers=api.bearer(token))
    assert r.status_code == 401
    body = {"timestamp": datetime.now(UTC).isoformat(), "scores": [0.5], "labels": [1]}
    assert api.post_batch("m", token, body).status_code == 401


def test_key_errors(api: Any) -> None:
    api.create_model("m")
    api.create_model("n")
    c = api.client
    n_key = c.post("/v1/models/n/keys", json={"scopes": ["read"]}, headers=api.admin).json()
    for key_id in (str(uuid.uuid4()), "not-a-uuid", n_key["id"]):  # other model's key: not found
        r = c.delete(f"/v1/models/m/keys/{key_id}", headers=api.admin)
        assert r.status_code == 404 and r.json()["type"].endswith("api-key-not-found")
    for scopes in ([], ["write"], ["read", "read"]):
        r = c.post("/v1/models/m/keys", json={"scopes": scopes}, headers=api.admin)
        assert r.status_code == 422, scopes
    assert (
        c.post("/v1/models/zzz/keys", json={"scopes": ["read"]}, headers=api.admin).status_code
        == 404
    )
    token = api.create_key("m")
    assert c.get("/v1/models/m/keys", headers=api.bearer(token)).status_code == 403
    r = c.post("/v1/models/m/keys", json={"scopes": ["read"]}, headers=api.bearer(token))
    assert r.status_code == 403
