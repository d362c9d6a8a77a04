"""Apply the Alembic migrations (``priorwatch migrate``) and check the schema when a
process starts.

Alembic is imported by a migration only: the check reads the revisions without it
(:mod:`app.db.revisions`), so a process that starts on a database at head never
imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.exc import OperationalError

from app.config import Settings, masked_url
from app.db.availability import describe_outage
from app.db.revisions import MIGRATIONS_DIR, current_revisions, head_revisions
from app.db.session import make_engine

if TYPE_CHECKING:
    from alembic.config import Config


def alembic_config(database_url: str) -> Config:
    """An Alembic configuration for ``database_url`` that needs no alembic.ini."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade_to_head(database_url: str) -> None:
    """Apply every pending migration to ``database_url`` (creates a SQLite file)."""
    from alembic import command

    command.upgrade(alembic_config(database_url), "head")


class SchemaNotReady(Exception):
    """The database is not at the migrations' head and may not be migrated now."""


def prepare_schema(settings: Settings, *, migrate: bool) -> str:
    """Check the schema before a process starts; migrate it where allowed.

    The embedded SQLite database is always brought to head (``priorwatch
    serve`` is the one command of a single-machine install). A PostgreSQL
    database is migrated only when ``migrate`` is true (``--migrate``):
    otherwise a database behind the code is refused, with what to run. A
    database that cannot be reached is left for later (the process starts;
    ``/readyz`` answers 503 until it can be reached and is at head).

    Parameters
    ----------
    settings : Settings
        The database URL and the connection timeouts of the check.
    migrate : bool
        Whether a PostgreSQL database behind the code may be migrated.

    Returns
    -------
    str
        One line for the log: what was found or done.

    Raises
    ------
    SchemaNotReady
        PostgreSQL, not at head, and ``migrate`` is false.
    """
    database_url = settings.database_url
    shown = masked_url(database_url)
    engine = make_engine(database_url, settings)
    try:
        with engine.connect() as connection:
            current = current_revisions(connection)
    except OperationalError as exc:
        return f"database {shown} unreachable at start ({describe_outage(exc)})"
    finally:
        engine.dispose()
    heads = head_revisions()
    if current == heads:
        return f"database {shown} at head"
    if migrate or engine.dialect.name == "sqlite":
        upgrade_to_head(database_url)
        return f"database {shown} migrated to head (was at {sorted(current) or 'nothing'})"
    state = "never migrated" if not current else f"at revision {', '.join(sorted(current))}"
    raise SchemaNotReady(
        f"the database {shown} is {state}; this version needs {', '.join(sorted(heads))}. "
        "Run `priorwatch migrate` first, or start with --migrate."
    )
