"""The ingestion authorisation cache (app/services/models/auth_cache.py) never outlives a
change made through this process: revocation and model updates apply at once."""

from __future__ import annotations

from typing import Any


def _body(api: Any, **fields: Any) -> dict[str, Any]:
    return {"timestamp": api.now_iso(), "scores": [0.2, 0.9], "labels": [0, 1], **fields}


def test_revoked_key_is_refused_at_once(api: Any) -> None:
    api.create_model("m")
    token = api.create_key("m", scopes=("ingest",))
    for _ in range(2):  # the second batch is authorised from the cache
        assert api.post_batch("m", token, _body(api)).status_code == 202
    key_id = api.client.get("/v1/models/m/keys", headers=api.admin).json()["keys"][0]["id"]
    assert api.client.delete(f"/v1/models/m/keys/{key_id}", headers=api.admin).status_code == 204
    r = api.post_batch("m", token, _body(api))
    assert r.status_code == 401, r.text


def test_model_update_applies_at_once(api: Any) -> None:
    api.create_model("m", segments=["eu"])
    token = api.create_key("m", scopes=("ingest",))
    assert api.post_batch("m", token, _body(api, segment="eu")).status_code == 202
    assert api.post_batch("m", token, _body(api, segment="us")).status_code == 422
    r = api.client.patch("/v1/models/m", json={"segments": ["eu", "us"]}, headers=api.admin)
    assert r.status_code == 200, r.text
    assert api.post_batch("m", token, _body(api, segment="us")).status_code == 202


def test_cached_key_keeps_its_rights(api: Any) -> None:
    api.create_model("m")
    api.create_model("n")
    token = api.create_key("m", scopes=("ingest",))
    read_only = api.create_key("m", scopes=("read",))
    assert api.post_batch("m", token, _body(api)).status_code == 202
    assert api.post_batch("n", token, _body(api)).status_code == 403  # other model
    assert api.post_batch("n", token, _body(api)).status_code == 403  # now from the cache
    for _ in range(2):
        assert api.post_batch("m", read_only, _body(api)).status_code == 403
    assert api.post_batch("zzz", token, _body(api)).status_code == 404
    assert api.post_batch("m", "pw_unknown", _body(api)).status_code == 401
