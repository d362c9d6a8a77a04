"""Models through the real HTTP app, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import admin, cli
from app.metrics.binning import default_bin_edges

PROBLEM = "application/problem+json"


def test_register_read_list(api: Any) -> None:
    created = api.create_model(
        "fraud",
        window="1d",
        thresholds=[0.4, 0.7],
        pi0=0.02,
        costs={"c_tp": 0.0, "c_fp": 1.0, "c_fn": 4.0, "c_tn": 0.0},
        segments=["eu", "us"],
        drift={"reference": {"from": "2026-01-01T00:00:00Z", "to": "2026-01-08T00:00:00Z"}},
    )
    assert created["threshold"] == 0.4 and created["thresholds"] == [0.4, 0.7]
    assert created["cost_ratio"] == pytest.approx(0.8)  # C_FN / (C_FN + C_FP) = 4 / 5
    assert created["drift"]["reference"] == {
        "from": "2026-01-01T00:00:00Z",
        "to": "2026-01-08T00:00:00Z",
        "trailing_windows": None,
    }
    assert created["drift"]["alpha"] == 0.01 and created["drift"]["min_class_count"] == 30
    assert created["created_at"].endswith("Z")
    r = api.client.get("/v1/models/fraud", headers=api.admin)
    assert r.status_code == 200 and r.json() == created
    api.create_model("churn")
    r = api.client.get("/v1/models", headers=api.admin)
    assert [m["name"] for m in r.json()["models"]] == ["churn", "fraud"]


def test_bins_are_the_frozen_default_edges_with_thresholds(api: Any) -> None:
    model = api.create_model("m", thresholds=[0.5, 0.25], n_bins=300)
    r = api.client.get("/v1/models/m/bins", headers=api.admin)
    bins = r.json()
    expected = default_bin_edges([0.5, 0.25], n_bins=300)
    assert bins["n_bins"] == model["n_bins"] == expected.size - 1
    np.testing.assert_array_equal(np.array(bins["edges"]), expected)  # exact round trip
    assert 0.25 in bins["edges"] and 0.5 in bins["edges"]
    assert bins["thresholds"] == [0.5, 0.25]


def test_patch_changes_settings_but_not_fixed_ones(api: Any) -> None:
    created = api.create_model("m", segments=["eu"])
    r = api.client.patch(
        "/v1/models/m",
        json={"pi0": 0.2, "segments": ["eu", "us"], "cost_ratio": 0.3, "description": "x"},
        headers=api.admin,
    )
    assert r.status_code == 200, r.text
    updated = r.json()
    assert (updated["pi0"], updated["segments"], updated["cost_ratio"]) == (0.2, ["eu", "us"], 0.3)
    assert updated["updated_at"] >= created["updated_at"]
    # sending back the fixed fields unchanged is fine (PATCH with a GET body)
    same = {k: updated[k] for k in ("name", "window", "threshold", "thresholds", "n_bins")}
    assert api.client.patch("/v1/models/m", json=same, headers=api.admin).status_code == 200
    for field, value in [
        ("thresholds", [0.5, 0.6]),
        ("threshold", 0.6),
        ("window", "1d"),
        ("n_bins", 10),
        ("name", "other"),
    ]:
        r = api.client.patch("/v1/models/m", json={field: value}, headers=api.admin)
        assert r.status_code == 422, (field, r.text)
        assert r.json()["errors"][0]["field"] == field
        assert "fixed at creation" in r.json()["errors"][0]["reason"]
    assert api.client.get("/v1/models/m", headers=api.admin).json()["thresholds"] == [0.5]


def test_patch_sla_and_drift_and_refuse_nulls(api: Any) -> None:
    api.create_model("p")
    r = api.client.patch(
        "/v1/models/p",
        json={"sla": [{"metric": "recall", "op": ">=", "target": 0.4}], "drift": {"alpha": 0.05}},
        headers=api.admin,
    )
    assert r.status_code == 200, r.text
    assert [(o["metric"], o["target"]) for o in r.json()["sla"]] == [("recall", 0.4)]
    assert r.json()["drift"]["alpha"] == 0.05
    before = api.client.get("/v1/models/p", headers=api.admin).json()
    for field, reason in [("pi0", "must be a number"), ("drift", "must be an object")]:
        r = api.client.patch("/v1/models/p", json={field: None}, headers=api.admin)
        assert r.status_code == 422, (field, r.text)
        assert r.json()["errors"][0]["field"] == field
        assert reason in r.json()["errors"][0]["reason"]
    assert api.client.get("/v1/models/p", headers=api.admin).json() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "Bad Name", "pi0": 0.1}, "name"),
        ({"name": "m", "pi0": 1.0}, "pi0"),
        ({"name": "m"}, "pi0"),
        ({"name": "m", "pi0": 0.1, "window": "2h"}, "window"),
        ({"name": "m", "pi0": 0.1, "thresholds": [0.5, 0.5]}, "thresholds"),
        ({"name": "m", "pi0": 0.1, "thresholds": [1.5]}, "thresholds"),
        ({"name": "m", "pi0": 0.1, "threshold": 0.4, "thresholds": [0.5]}, "body"),
        ({"name": "m", "pi0": 0.1, "segments": ["eu", "eu"]}, "segments"),
        ({"name": "m", "pi0": 0.1, "segments": ["*"]}, "segments.0"),
        ({"name": "m", "pi0": 0.1, "costs": {"c_tp": 1, "c_fp": 1, "c_fn": 0, "c_tn": 0}}, "costs"),
        ({"name": "m", "pi0": 0.1, "drift": {"alpha": 2}}, "drift"),
        (
            {
                "name": "m",
                "pi0": 0.1,
                "drift": {
                    "reference": {"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}
                },
            },
            "drift.reference",
        ),
        (
            {"name": "m", "pi0": 0.1, "sla": [{"metric": "f1", "op": ">", "target": 0.5}]},
            "sla.0.op",
        ),
        ({"name": "m", "pi0": 0.1, "n_bins": 1}, "n_bins"),
        ({"name": "m", "pi0": 0.1, "label_missingness": "random"}, "label_missingness"),
        ({"name": "m", "pi0": 0.1, "label_horizon": "90"}, "label_horizon"),
        ({"name": "m", "pi0": 0.1, "label_horizon": "401d"}, "label_horizon"),
        ({"name": "m", "pi0": 0.1, "colour": "red"}, "colour"),
    ],
)
def test_invalid_models_are_refused_with_the_field(
    client: TestClient, admin_headers: dict[str, str], body: dict[str, Any], field: str
) -> None:
    r = client.post("/v1/models", json=body, headers=admin_headers)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == PROBLEM
    problem = r.json()
    assert problem["status"] == 422 and problem["type"].endswith("invalid-input")
    assert any(e["field"].startswith(field) for e in problem["errors"]), problem
    assert client.get("/v1/models", headers=admin_headers).json() == {"models": [], "next": None}


def test_label_settings_default_change_and_refuse(api: Any) -> None:
    created = api.create_model("m")
    assert (created["label_missingness"], created["label_horizon"]) == ("class", None)
    r = api.client.patch(
        "/v1/models/m",
        json={"label_missingness": "score", "label_horizon": "90d"},
        headers=api.admin,
    )
    assert r.status_code == 200, r.text
    assert (r.json()["label_missingness"], r.json()["label_horizon"]) == ("score", "90d")
    for field, value in [
        ("label_missingness", "mnar"),
        ("label_missingness", None),
        ("label_horizon", "60w"),
    ]:
        r = api.client.patch("/v1/models/m", json={field: value}, headers=api.admin)
        assert r.status_code == 422, (field, r.text)
        assert r.json()["errors"][0]["field"] == field
    r = api.client.patch("/v1/models/m", json={"label_horizon": None}, headers=api.admin)
    assert (r.json()["label_missingness"], r.json()["label_horizon"]) == ("score", None)


def test_sla_metric_names_are_those_of_evaluate(api: Any) -> None:
    model = api.create_model("m", sla=[{"metric": "calibrated_f1", "op": ">=", "target": 0.6}])
    # evidence defaults to the credible interval (docs/reading.md)
    assert model["sla"] == [
        {"metric": "calibrated_f1", "op": ">=", "target": 0.6, "evidence": "interval"}
    ]
    point = {"metric": "f1", "op": ">=", "target": 0.6, "evidence": "point"}
    assert api.create_model("p", sla=[point])["sla"] == [point]
    r = api.client.post(
        "/v1/models",
        json={"name": "q", "pi0": 0.1, "sla": [{**point, "evidence": "vibes"}]},
        headers=api.admin,
    )
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "sla.0.evidence"
    r = api.client.post(
        "/v1/models",
        json={"name": "n", "pi0": 0.1, "sla": [{"metric": "auc_magic", "op": ">=", "target": 0.6}]},
        headers=api.admin,
    )
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "sla.0.metric"


def test_sla_objective_ids_are_unique_per_model(api: Any) -> None:
    """Two objectives on the same metric and op need their own ids (the default id is
    metric and op, never the target); nothing is stored otherwise."""
    floor = {"metric": "recall", "op": ">=", "target": 0.5}
    strict = {"metric": "recall", "op": ">=", "target": 0.8}
    r = api.client.post(
        "/v1/models", json={"name": "n", "pi0": 0.1, "sla": [floor, strict]}, headers=api.admin
    )
    assert r.status_code == 422, r.text
    (error,) = r.json()["errors"]
    assert error["field"] == "sla.1.id" and "recall_ge" in error["reason"]
    assert api.client.get("/v1/models", headers=api.admin).json() == {"models": [], "next": None}
    r = api.client.post(
        "/v1/models",
        json={"name": "n", "pi0": 0.1, "sla": [floor, {**strict, "id": "recall-strict"}]},
        headers=api.admin,
    )
    assert r.status_code == 201, r.text
    stored = [
        {**floor, "evidence": "interval"},
        {**strict, "evidence": "interval", "id": "recall-strict"},
    ]
    assert r.json()["sla"] == stored
    bad = {**floor, "id": "recall strict>=0.8"}
    r = api.client.patch("/v1/models/n", json={"sla": [bad]}, headers=api.admin)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "sla.0.id"


def test_duplicate_name_is_a_conflict(api: Any) -> None:
    api.create_model("m")
    r = api.client.post("/v1/models", json={"name": "m", "pi0": 0.3}, headers=api.admin)
    assert r.status_code == 409 and r.json()["type"].endswith("model-exists")


def test_auth(api: Any) -> None:
    api.create_model("a")
    api.create_model("b")
    ingest_a = api.create_key("a", ("ingest",))
    read_b = api.create_key("b", ("read",))
    c = api.client
    r = c.get("/v1/models")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert r.headers["content-type"] == PROBLEM
    assert c.get("/v1/models", headers=api.bearer("pw_nonsense")).status_code == 401
    assert c.get("/v1/models", headers={"Authorization": "Basic eDp5"}).status_code == 401
    # model keys: their own model only; admin calls need the admin token
    assert c.get("/v1/models", headers=api.bearer(read_b)).status_code == 403
    assert c.get("/v1/models/a", headers=api.bearer(ingest_a)).status_code == 200
    assert c.get("/v1/models/a/bins", headers=api.bearer(ingest_a)).status_code == 200
    assert c.get("/v1/models/a", headers=api.bearer(read_b)).status_code == 403
    r = c.patch("/v1/models/b", json={"pi0": 0.3}, headers=api.bearer(read_b))
    assert r.status_code == 403 and r.json()["type"].endswith("permission-denied")
    r = c.post("/v1/models", json={"name": "c", "pi0": 0.3}, headers=api.bearer(ingest_a))
    assert r.status_code == 403
    # unknown model: 404 for the admin
    assert c.get("/v1/models/zzz", headers=api.admin).json()["type"].endswith("model-not-found")


def test_admin_calls_refused_until_the_admin_token_is_set(
    api: Any, client_factory: Callable[..., TestClient]
) -> None:
    api.create_model("m")
    key = api.create_key("m")
    unset = client_factory(admin_token=None)  # same database, no admin token
    r = unset.post("/v1/models", json={"name": "n", "pi0": 0.3}, headers=api.bearer(key))
    assert r.status_code == 403
    assert "PRIORWATCH_ADMIN_TOKEN" in r.json()["detail"]
    # whatever the token (none, the old admin token): disabled, never "unknown token"
    for headers in ({}, api.admin, api.bearer(key)):
        r = unset.get("/v1/models", headers=headers)
        assert r.status_code == 403, r.text
        assert r.json()["type"].endswith("admin-disabled")
        assert r.json()["detail"] == (
            "admin calls are disabled until PRIORWATCH_ADMIN_TOKEN is set"
        )
    assert unset.get("/v1/models/m", headers=api.bearer(key)).status_code == 200
    assert unset.get("/v1/models/m", headers=api.admin).status_code == 401  # not a key


def test_unset_admin_token_is_logged_once_at_start(
    sqlite_url: str, client_for: Callable[..., TestClient], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="priorwatch"):
        client = client_for(sqlite_url, admin_token=None)
        client.get("/healthz")
        client.get("/v1/models")
    said = [r for r in caplog.records if "PRIORWATCH_ADMIN_TOKEN" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="priorwatch"):
        client_for(sqlite_url).get("/healthz")  # set: nothing said
    assert not [r for r in caplog.records if "PRIORWATCH_ADMIN_TOKEN" in r.getMessage()]


def test_wrong_content_type_and_malformed_json(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    r = client.post(
        "/v1/models",
        content=b'{"name": "m", "pi0": 0.1}',
        headers={**admin_headers, "Content-Type": "text/plain"},
    )
    assert r.status_code == 415 and r.json()["type"].endswith("unsupported-media-type")
    r = client.post(
        "/v1/models",
        content=b'{"name": "m", ',
        headers={**admin_headers, "Content-Type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["type"].endswith("malformed-json")
    assert client.get("/v1/models", headers=admin_headers).json() == {"models": [], "next": None}


def _pages(api: Any, limit: int) -> list[list[str]]:
    """The names of each page of GET /v1/models, following ``next`` to the end."""
    pages: list[list[str]] = []
    params: dict[str, Any] = {"limit": limit}
    while True:
        r = api.client.get("/v1/models", params=params, headers=api.admin)
        assert r.status_code == 200, r.text
        doc = r.json()
        pages.append([m["name"] for m in doc["models"]])
        if doc["next"] is None:
            return pages
        params["cursor"] = doc["next"]


def test_model_pages_list_every_model_exactly_once(api: Any) -> None:
    names = ["m-07", "a-1", "z", "m-10", "b", "m-2", "c-x"]
    for name in names:
        api.create_model(name)
    pages = _pages(api, limit=3)
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [n for p in pages for n in p] == sorted(names)
    assert _pages(api, limit=7) == [sorted(names)]  # an exact fit: no empty last page
    assert _pages(api, limit=1000) == [sorted(names)]


def test_model_pages_are_stable_under_inserts(api: Any) -> None:
    """A model registered between two pages neither repeats nor hides another one."""
    for name in ("b", "d", "f", "h"):
        api.create_model(name)
    first = api.client.get("/v1/models", params={"limit": 2}, headers=api.admin).json()
    assert [m["name"] for m in first["models"]] == ["b", "d"]
    api.create_model("a")  # before the cursor: not in the later pages
    api.create_model("e")  # after it: in them
    rest = api.client.get(
        "/v1/models", params={"limit": 10, "cursor": first["next"]}, headers=api.admin
    ).json()
    assert [m["name"] for m in rest["models"]] == ["e", "f", "h"]
    assert rest["next"] is None


def test_model_pages_default_to_100(api: Any) -> None:
    for i in range(101):
        api.create_model(f"m-{i:03d}")
    doc = api.client.get("/v1/models", headers=api.admin).json()
    assert len(doc["models"]) == 100 and doc["next"] is not None
    last = api.client.get("/v1/models", params={"cursor": doc["next"]}, headers=api.admin).json()
    assert [m["name"] for m in last["models"]] == ["m-100"] and last["next"] is None


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"cursor": "not a cursor!"}, "cursor"),
        ({"cursor": "//8"}, "cursor"),  # base64 of bytes that are not UTF-8
        ({"cursor": ""}, "cursor"),
    ],
)
def test_bad_page_parameters_are_refused_with_the_field(
    api: Any, params: dict[str, Any], field: str
) -> None:
    api.create_model("m")
    r = api.client.get("/v1/models", params=params, headers=api.admin)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == PROBLEM
    assert [e["field"] for e in r.json()["errors"]] == [field]


def test_cli_models_list_follows_the_cursor(api: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("c", "a", "e", "b", "d"):
        api.create_model(name)
    calls: list[dict[str, Any]] = []

    def request(method: str, url: str, *, timeout: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["params"])
        return api.client.request(method, url.removeprefix("http://svc"), **kwargs)

    monkeypatch.setattr(admin, "MODELS_PAGE", 2)
    monkeypatch.setattr("httpx.request", request)  # the CLI imports httpx on its first call
    result = CliRunner().invoke(
        cli,
        ["models", "list", "--json", "--url", "http://svc"],
        env={"PRIORWATCH_ADMIN_TOKEN": api.admin["Authorization"].removeprefix("Bearer ")},
    )
    assert result.exit_code == 0, result.output
    assert [m["name"] for m in json.loads(result.stdout)] == ["a", "b", "c", "d", "e"]
    assert len(calls) == 3 and all(c["limit"] == "2" for c in calls)


def test_cli_sets_the_label_settings(api: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def request(method: str, url: str, *, timeout: Any, **kwargs: Any) -> Any:
        return api.client.request(method, url.removeprefix("http://svc"), **kwargs)

    monkeypatch.setattr("httpx.request", request)  # the CLI imports httpx on its first call
    env = {"PRIORWATCH_ADMIN_TOKEN": api.admin["Authorization"].removeprefix("Bearer ")}
    common = ["--url", "http://svc"]
    create = ["models", "create", "m", "--pi0", "0.1", "--label-missingness", "none", *common]
    result = CliRunner().invoke(cli, create, env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["label_missingness"] == "none"
    update = ["models", "update", "m", "--label-missingness", "class", "--label-horizon", "30d"]
    result = CliRunner().invoke(cli, [*update, *common], env=env)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert (shown["label_missingness"], shown["label_horizon"]) == ("class", "30d")
