"""The schema's revision: the migration scripts' head and the database's version table.

Every process checks them when it starts (``priorwatch serve`` and ``worker``,
:func:`app.db.migrate.prepare_schema`) and the API's readiness probe on every
call; applying the migrations is the one thing that needs Alembic
(:mod:`app.db.migrate`). Both are read here without it: importing Alembic
(its operations, the DDL of every dialect it supports, mako and pygments) and
loading every migration script through its ``ScriptDirectory`` cost a worker
about 0.1 s of CPU at each start. The head comes from the scripts'
``revision`` and ``down_revision`` lines (literals, as Alembic's template
writes them; tests/integration/test_migrations.py checks that it is the head
Alembic finds), the current revision from Alembic's version table.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, inspect, text

import app

MIGRATIONS_DIR = Path(app.__file__).resolve().parent.parent / "migrations"
"""The Alembic script directory: the ``migrations`` package next to ``app`` (in the
source tree, and in site-packages when installed from a wheel)."""

VERSION_TABLE = "alembic_version"
"""Alembic's default version table (migrations/env.py does not rename it)."""


_ASSIGNMENT = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", re.MULTILINE)
"""A script's module-level ``revision = ...`` or ``down_revision: ... = ...`` line."""


def _script_ids(path: Path) -> tuple[str, tuple[str, ...]]:
    """(``revision``, its ``down_revision`` ids) of one script: its module-level literals."""
    found: dict[str, Any] = {}
    for name, value in _ASSIGNMENT.findall(path.read_text(encoding="utf-8")):
        found.setdefault(name, ast.literal_eval(value))
    revision, down = found.get("revision"), found.get("down_revision")
    if not isinstance(revision, str):
        raise ValueError(f"{path}: no literal `revision = '...'` line")
    downs = (down,) if isinstance(down, str) else tuple(down or ())
    return revision, tuple(str(d) for d in downs)


def script_heads(versions: Path) -> frozenset[str]:
    """The head revision(s) of the scripts in ``versions``: the revisions no script
    names as its ``down_revision`` (Alembic's ``ScriptDirectory.get_heads``)."""
    scripts = [
        _script_ids(path)
        for path in versions.glob("*.py")
        if path.name != "__init__.py" and not path.name.startswith(".#")
    ]
    replaced = {down for _, downs in scripts for down in downs}
    return frozenset(revision for revision, _ in scripts if revision not in replaced)


@lru_cache(maxsize=1)
def head_revisions() -> frozenset[str]:
    """The head revision(s) of the migration scripts shipped with this code (read once)."""
    return script_heads(MIGRATIONS_DIR / "versions")


def current_revisions(connection: Connection) -> frozenset[str]:
    """The revision(s) the database behind ``connection`` is at (empty: never migrated)."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return frozenset()
    return frozenset(connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars())


def reachable_revisions(engine: Engine) -> frozenset[str]:
    """The revision(s) of the database behind ``engine``, once it answered a query (the
    readiness probe's check); SQLAlchemy's error when it is unreachable."""
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))
        return current_revisions(connection)
