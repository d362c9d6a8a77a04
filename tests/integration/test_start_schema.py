"""The schema check at start: SQLite is migrated at once; PostgreSQL is refused with
what to run, or migrated when asked (``--migrate``); never a 500 later."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from app.cli import cli
from app.config import Settings, get_settings
from app.db.migrate import SchemaNotReady, prepare_schema
from app.db.revisions import current_revisions, head_revisions


def _settings(url: str) -> Settings:
    return Settings(_env_file=None, database_url=url)  # type: ignore[call-arg]


def _revisions(url: str) -> frozenset[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            return current_revisions(c)
    finally:
        engine.dispose()


def test_a_fresh_sqlite_file_is_migrated_at_start(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    assert "migrated to head (was at nothing)" in prepare_schema(_settings(url), migrate=False)
    assert _revisions(url) == head_revisions()
    assert prepare_schema(_settings(url), migrate=False).endswith("at head")


@pytest.mark.postgres
def test_a_never_migrated_postgres_is_refused_or_migrated_on_request(
    empty_postgres_url: str,
) -> None:
    with pytest.raises(SchemaNotReady) as info:
        prepare_schema(_settings(empty_postgres_url), migrate=False)
    message = str(info.value)
    assert "never migrated" in message and "priorwatch migrate" in message
    assert "--migrate" in message
    assert _revisions(empty_postgres_url) == frozenset()  # nothing was done
    assert "migrated to head" in prepare_schema(_settings(empty_postgres_url), migrate=True)
    assert _revisions(empty_postgres_url) == head_revisions()


def test_an_unreachable_database_is_left_for_later() -> None:
    url = "postgresql+psycopg://postgres:s3cret@127.0.0.1:1/priorwatch"
    message = prepare_schema(_settings(url), migrate=False)
    assert "unreachable at start" in message
    assert "s3cret" not in message


@pytest.fixture
def env_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


@pytest.mark.postgres
@pytest.mark.parametrize("command", ["serve", "worker"])
def test_serve_and_worker_refuse_a_never_migrated_postgres(
    command: str, empty_postgres_url: str, env_url: pytest.MonkeyPatch
) -> None:
    env_url.setenv("PRIORWATCH_DATABASE_URL", empty_postgres_url)
    result = CliRunner().invoke(cli, [command])
    assert result.exit_code == 3, result.output
    assert "not starting" in result.output and "priorwatch migrate" in result.output
    assert _revisions(empty_postgres_url) == frozenset()
