"""Alembic: upgrade, downgrade to base, upgrade again; the models match the migrations."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from app.db.base import Base
from app.db.migrate import MIGRATIONS_DIR, alembic_config, head_revisions, upgrade_to_head


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _diff(url: str) -> list[object]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database with no schema at all."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'm.db'}"
    url: str = request.getfixturevalue("postgres_url")
    command.downgrade(alembic_config(url), "base")
    request.addfinalizer(lambda: upgrade_to_head(url))  # leave the session database at head
    return url


def test_upgrade_downgrade_upgrade(empty_url: str) -> None:
    upgrade_to_head(empty_url)
    expected = {t.name for t in Base.metadata.sorted_tables} | {"alembic_version"}
    assert _tables(empty_url) == expected
    command.downgrade(alembic_config(empty_url), "base")
    assert _tables(empty_url) <= {"alembic_version"}
    upgrade_to_head(empty_url)
    assert _tables(empty_url) == expected
    assert _diff(empty_url) == []


def test_models_match_migrations(database_url: str) -> None:
    assert _diff(database_url) == []


def test_revision_files_are_dated() -> None:
    files = sorted(
        p.name for p in (MIGRATIONS_DIR / "versions").glob("*.py") if p.name != "__init__.py"
    )
    assert files and all(name[:8].isdigit() and name[8] == "_" for name in files), files
    assert len(head_revisions()) == 1  # one linear history
