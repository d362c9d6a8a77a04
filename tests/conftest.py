"""Shared fixtures: migrated databases (SQLite file, real PostgreSQL), settings, apps.

Databases are always built by the real Alembic migrations:

- ``sqlite_url``: a fresh SQLite file per test (copied from one migrated
  template per session, so each test pays a file copy, not a migration).
- ``postgres_url``: one fresh database per test session on the server at
  PRIORWATCH_TEST_POSTGRES_URL (default postgresql+psycopg://postgres@127.0.0.1:5432/postgres),
  migrated to head, dropped at the end. ``pg_url`` truncates every table
  before the test. Tests needing it are marked ``postgres``; they are skipped
  when the server is unreachable, and fail instead when
  PRIORWATCH_REQUIRE_POSTGRES=1 (as in .ci/run).
- ``database_url``: parametrised over both backends.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import settings as hypothesis_settings

from app.config import Settings
from app.db.base import Base
from app.db.migrate import upgrade_to_head
from app.db.scratch import ServerUnavailable, scratch_postgres_database

# Property tests draw their examples from a fixed seed (a run is repeatable, and
# CI cannot fail on an example no earlier run saw); HYPOTHESIS_PROFILE=explore
# draws fresh examples and remembers failures, for a developer hunting bugs.
hypothesis_settings.register_profile("repeatable", derandomize=True, database=None)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

ADMIN_TOKEN = "test-admin-token-0123456789abcdef"


def make_settings(database_url: str, **overrides: Any) -> Settings:
    """Settings for tests: admin token set, no embedded worker, no .env file."""
    values: dict[str, Any] = {
        "database_url": database_url,
        "admin_token": ADMIN_TOKEN,
        "embedded_worker": False,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


# --- SQLite --------------------------------------------------------------------


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    upgrade_to_head(f"sqlite:///{path}")
    return path


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    """A fresh, migrated SQLite database file for this test."""
    path = tmp_path / "priorwatch.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


# --- PostgreSQL ----------------------------------------------------------------


def _unavailable(reason: str) -> None:
    if os.environ.get("PRIORWATCH_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"PostgreSQL required (PRIORWATCH_REQUIRE_POSTGRES=1): {reason}")
    pytest.skip(f"PostgreSQL unavailable: {reason}")


@contextmanager
def fresh_postgres_database() -> Iterator[str]:
    """Create an empty database (no tables) on the test server; yield its URL; drop it.

    Skips (or fails, with PRIORWATCH_REQUIRE_POSTGRES=1) when the server is unreachable.
    """
    try:
        with scratch_postgres_database("priorwatch_test") as url:
            yield url
    except ServerUnavailable as exc:  # raised before the yield only
        _unavailable(exc.reason)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for the session, migrated to head, dropped at the end."""
    with fresh_postgres_database() as url:
        upgrade_to_head(url)
        yield url


@pytest.fixture
def empty_postgres_url() -> Iterator[str]:
    """A fresh, empty (not migrated) PostgreSQL database for this test, dropped after it."""
    with fresh_postgres_database() as url:
        yield url


def truncate_all(url: str) -> None:
    """Empty every table of the schema (not alembic_version)."""
    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    finally:
        engine.dispose()


@pytest.fixture
def pg_url(postgres_url: str) -> str:
    """The session's PostgreSQL database, emptied for this test."""
    truncate_all(postgres_url)
    return postgres_url


# --- either backend ------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """A migrated, empty database: SQLite file, then real PostgreSQL."""
    fixture = "sqlite_url" if request.param == "sqlite" else "pg_url"
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture
def db_engine(database_url: str) -> Iterator[sa.Engine]:
    """An engine on ``database_url`` for looking at what the API stored."""
    from app.db.session import make_engine

    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def admin_headers() -> dict[str, str]:
    """Authorization header with the test admin token."""
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def settings_for() -> Callable[..., Settings]:
    """Build test settings for any database URL, with overrides."""
    return make_settings


@pytest.fixture
def settings_factory(database_url: str) -> Callable[..., Settings]:
    """Build test settings for ``database_url`` with overrides."""

    def factory(**overrides: Any) -> Settings:
        return make_settings(database_url, **overrides)

    return factory
