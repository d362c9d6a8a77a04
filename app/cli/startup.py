"""What the local commands (``serve``, ``worker``, ``migrate``) check before their work.

A refused setting, a database that cannot be reached (``migrate``) or a
schema behind the code (``serve``, ``worker``) ends the command with one
line on stderr saying what is wrong and what to do, and its exit code
(app/cli/service.py, docs/cli.md "Exit codes"). The database URL is only
ever shown with its password masked (:func:`app.config.masked_url`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import typer
from pydantic import ValidationError
from pydantic_settings import BaseSettings

from app.cli.service import EXIT_DATABASE, EXIT_SCHEMA, EXIT_SETTINGS, fail

if TYPE_CHECKING:
    from app.config import Settings
    from app.worker.settings import WorkerSettings

SettingsT = TypeVar("SettingsT", bound=BaseSettings)


def settings_problem(error: ValidationError, env_prefix: str) -> str:
    """One line naming each refused variable (``env_prefix`` + field) and why.

    pydantic's messages never quote the refused value (``hide_input_in_errors``).
    """
    faults = []
    for e in error.errors():
        field = ".".join(str(p) for p in e["loc"])
        name = f"{env_prefix}{field}".upper() if field else f"{env_prefix}*"
        reason = e["msg"].removeprefix("Value error, ")
        faults.append(f"{name}: {reason}")
    return (
        f"invalid setting: {'; '.join(faults)} "
        "(fix the environment variable or the .env file, then start again)"
    )


def _load(factory: Callable[[], SettingsT], env_prefix: str) -> SettingsT:
    try:
        return factory()
    except ValidationError as exc:
        fail(settings_problem(exc, env_prefix), EXIT_SETTINGS)


def load_settings() -> Settings:
    """The service's settings (:func:`app.config.get_settings`), or the command ends."""
    from app.config import get_settings

    return _load(get_settings, "PRIORWATCH_")


def load_worker_settings() -> WorkerSettings:
    """The worker's settings (``PRIORWATCH_WORKER_*``), or the command ends."""
    from app.worker.settings import WorkerSettings

    return _load(WorkerSettings, "PRIORWATCH_WORKER_")


def prepare_schema_or_exit(settings: Settings, *, migrate: bool) -> None:
    """Bring the database to head or refuse to start, saying what to run
    (:func:`app.db.migrate.prepare_schema`); what was found goes to stderr."""
    from app.db.migrate import SchemaNotReady, prepare_schema

    try:
        typer.echo(prepare_schema(settings, migrate=migrate), err=True)
    except SchemaNotReady as exc:
        fail(f"not starting: {exc}", EXIT_SCHEMA)


def migrate_or_exit(settings: Settings) -> str:
    """Apply the pending migrations; the (masked) URL of the database, now at head.

    A database that cannot be reached (refused, timed out, wrong password,
    no such database) ends the command with :data:`EXIT_DATABASE`.
    """
    from sqlalchemy.exc import OperationalError

    from app.config import masked_url
    from app.db.availability import describe_outage, is_outage
    from app.db.migrate import upgrade_to_head

    shown = masked_url(settings.database_url)
    try:
        upgrade_to_head(settings.database_url)
    except OperationalError as exc:
        if not is_outage(exc):
            raise
        fail(
            f"cannot reach the database {shown} ({describe_outage(exc)}); start it, "
            "or correct PRIORWATCH_DATABASE_URL, then run `priorwatch migrate` again",
            EXIT_DATABASE,
        )
    return shown
