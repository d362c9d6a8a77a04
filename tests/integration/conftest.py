"""HTTP fixtures: the real app (create_app) over a migrated database, and API helpers;
database fixtures of the worker tests (session factory, plain settings)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any

import pytest
from _worker_support import session_factory_for
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.main import create_app


@pytest.fixture
def client_for(settings_for: Callable[..., Settings]) -> Iterator[Callable[..., TestClient]]:
    """Start the app (lifespan included) on a database URL with setting overrides.

    Clients are closed (lifespan shutdown) after the test.
    """
    with ExitStack() as stack:

        def factory(database_url: str, **overrides: Any) -> TestClient:
            app = create_app(settings_for(database_url, **overrides))
            return stack.enter_context(TestClient(app, raise_server_exceptions=False))

        yield factory


@pytest.fixture
def client_factory(
    database_url: str, client_for: Callable[..., TestClient]
) -> Callable[..., TestClient]:
    """Start the app on ``database_url`` (both backends) with setting overrides."""

    def factory(**overrides: Any) -> TestClient:
        return client_for(database_url, **overrides)

    return factory


@pytest.fixture
def client(client_factory: Callable[..., TestClient]) -> TestClient:
    """The app with default test settings (admin token set)."""
    return client_factory()


class Api:
    """Helpers around the HTTP API: register models, create keys, post batches."""

    def __init__(self, client: TestClient, admin: dict[str, str]) -> None:
        self.client = client
        self.admin = admin

    @staticmethod
    def bearer(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    @staticmethod
    def now_iso() -> str:
        return datetime.now(UTC).isoformat()

    def create_model(self, name: str = "fraud", **fields: Any) -> dict[str, Any]:
        body = {"name": name, "pi0": 0.05, **fields}
        r = self.client.post("/v1/models", json=body, headers=self.admin)
        assert r.status_code == 201, r.text
        return dict(r.json())

    def create_key(self, model: str = "fraud", scopes: tuple[str, ...] = ("ingest", "read")) -> str:
        r = self.client.post(
            f"/v1/models/{model}/keys", json={"scopes": list(scopes)}, headers=self.admin
        )
        assert r.status_code == 201, r.text
        return str(r.json()["token"])

    def post_batch(
        self, model: str, token: str, body: dict[str, Any], key: str | None = None
    ) -> Any:
        headers = self.bearer(token)
        if key is not None:
            headers["Idempotency-Key"] = key
        return self.client.post(f"/v1/models/{model}/batches", json=body, headers=headers)


@pytest.fixture
def api(client: TestClient, admin_headers: dict[str, str]) -> Api:
    return Api(client, admin_headers)


@pytest.fixture
def api_for(
    client_for: Callable[..., TestClient], admin_headers: dict[str, str]
) -> Callable[..., Api]:
    """An :class:`Api` over an app on a given database URL, with setting overrides."""

    def factory(database_url: str, **overrides: Any) -> Api:
        return Api(client_for(database_url, **overrides), admin_headers)

    return factory


@pytest.fixture
def api_factory(database_url: str, api_for: Callable[..., Api]) -> Callable[..., Api]:
    """An :class:`Api` over an app on ``database_url`` built with setting overrides."""

    def factory(**overrides: Any) -> Api:
        return api_for(database_url, **overrides)

    return factory


@pytest.fixture
def factory(database_url: str) -> Iterator[sessionmaker[Session]]:
    """A session factory on ``database_url`` (both backends); its engine is disposed after."""
    with session_factory_for(database_url) as f:
        yield f


@pytest.fixture
def settings(database_url: str) -> Settings:
    """Plain settings on ``database_url`` (no admin token, no .env file)."""
    return Settings(_env_file=None, database_url=database_url)  # type: ignore[call-arg]
