"""Apply the Alembic migrations (``priorwatch migrate``) and read the schema version."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

import app

MIGRATIONS_DIR = Path(app.__file__).resolve().parent.parent / "migrations"
"""The Alembic script directory: the ``migrations`` package next to ``app`` (in the
source tree, and in site-packages when installed from a wheel)."""


def alembic_config(database_url: str) -> Config:
    """An Alembic configuration for ``database_url`` that needs no alembic.ini."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade_to_head(database_url: str) -> None:
    """Apply every pending migration to ``database_url`` (creates a SQLite file)."""
    command.upgrade(alembic_config(database_url), "head")


@lru_cache(maxsize=1)
def head_revisions() -> frozenset[str]:
    """The head revision(s) of the migration scripts shipped with this code (read once)."""
    return frozenset(ScriptDirectory(str(MIGRATIONS_DIR)).get_heads())


def current_revisions(connection: Connection) -> frozenset[str]:
    """The revision(s) the database behind ``connection`` is at (empty: never migrated)."""
    return frozenset(MigrationContext.configure(connection).get_current_heads())
