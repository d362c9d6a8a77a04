"""Alembic: upgrade, downgrade to base, upgrade again; the models match the migrations."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from app.db.base import Base
from app.db.migrate import alembic_config, upgrade_to_head
from app.db.revisions import MIGRATIONS_DIR, current_revisions, head_revisions, script_heads


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


def _alembic_current(url: str) -> tuple[frozenset[str], frozenset[str]]:
    """(Alembic's current heads, :func:`current_revisions`) of the database at ``url``."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            alembic = frozenset(MigrationContext.configure(conn).get_current_heads())
            return alembic, current_revisions(conn)
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(empty_url: str) -> None:
    alembic, ours = _alembic_current(empty_url)  # the version table empty or absent
    assert ours == alembic == frozenset()
    upgrade_to_head(empty_url)
    alembic, ours = _alembic_current(empty_url)
    assert ours == alembic == head_revisions()
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


def test_head_revisions_are_alembics() -> None:
    """The head read from the scripts' literals is the one Alembic's script directory finds."""
    heads = ScriptDirectory(str(MIGRATIONS_DIR)).get_heads()
    assert head_revisions() == frozenset(heads)


SCRIPT = """
from collections.abc import Sequence

revision: str = {revision!r}
down_revision: str | Sequence[str] | None = {down!r}
branch_labels = None
depends_on = {depends!r}


def upgrade() -> None:
    pass
"""


def test_script_heads_follow_branches_and_merges_as_alembic(tmp_path: Path) -> None:
    """Two branches from one base, one merged back, a dependency on the other: the
    heads are Alembic's (a ``depends_on`` does not make its target a non-head)."""
    scripts = {
        "a": (None, None),
        "b": ("a", None),
        "c": ("a", None),
        "d": (("b", "c"), None),
        "e": ("a", None),
        "f": ("d", "e"),
        "g": ("a", None),
    }
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "__init__.py").write_text("")
    for revision, (down, depends) in scripts.items():
        text = SCRIPT.format(revision=revision, down=down, depends=depends)
        (versions / f"{revision}_step.py").write_text(text)
    heads = frozenset(ScriptDirectory(str(tmp_path)).get_heads())
    assert heads == {"e", "f", "g"}
    assert script_heads(versions) == heads
