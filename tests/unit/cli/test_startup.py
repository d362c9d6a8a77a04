"""The local commands refuse bad settings and an unreachable database in one line.

No traceback, a non-zero exit code of docs/cli.md, the variable at fault
named, no secret shown.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from app.cli import cli
from app.cli.service import EXIT_DATABASE, EXIT_SETTINGS
from app.config import get_settings

PASSWORD = "S3cretPw-h4"
runner = CliRunner()


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[pytest.MonkeyPatch]:
    """No PRIORWATCH_* variable and no .env file; settings read again by each command."""
    for name in [n for n in os.environ if n.startswith("PRIORWATCH_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _one_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


@pytest.mark.parametrize("command", ["serve", "worker", "migrate"])
@pytest.mark.parametrize(
    ("variable", "value", "reason"),
    [
        ("PRIORWATCH_ADMIN_TOKEN", "changeme", "placeholder"),
        ("PRIORWATCH_ADMIN_TOKEN", "changemechangeme", "repeats a short piece"),
        ("PRIORWATCH_METRICS_TOKEN", "aaaaaaaaaaaaaaab", "too predictable"),
        ("PRIORWATCH_DATABASE_URL", f"mysql://u:{PASSWORD}@h/db", "unsupported driver"),
        ("PRIORWATCH_MAX_BATCH_ROWS", "-5", "greater than 0"),
    ],
)
def test_a_refused_setting_is_one_line_naming_it(
    command: str, variable: str, value: str, reason: str, environment: pytest.MonkeyPatch
) -> None:
    environment.setenv(variable, value)
    result = runner.invoke(cli, [command])
    assert result.exit_code == EXIT_SETTINGS
    line = _one_line(result.output)
    assert variable in line and reason in line and ".env" in line
    assert value not in line


@pytest.mark.parametrize("command", ["serve", "worker"])
@pytest.mark.parametrize(
    ("variable", "value", "reason"),
    [
        ("PRIORWATCH_WORKER_LEASE_SECONDS", "-1", "greater than 0"),
        ("PRIORWATCH_WORKER_BACKOFF_MAX_SECONDS", "0.01", "backoff_max_seconds must be >="),
    ],
)
def test_a_refused_worker_setting_ends_the_worker_and_the_embedded_server(
    command: str, variable: str, value: str, reason: str, environment: pytest.MonkeyPatch
) -> None:
    environment.setenv(variable, value)
    result = runner.invoke(cli, [command])
    assert result.exit_code == EXIT_SETTINGS
    line = _one_line(result.output)
    assert reason in line and variable.rsplit("_", 3)[0] in line


@pytest.mark.parametrize("scheme", ["postgresql+psycopg", "postgresql", "postgres"])
def test_migrate_says_the_database_cannot_be_reached(
    scheme: str, environment: pytest.MonkeyPatch
) -> None:
    url = f"{scheme}://postgres:{PASSWORD}@127.0.0.1:{_closed_port()}/priorwatch"
    environment.setenv("PRIORWATCH_DATABASE_URL", url)
    result = runner.invoke(cli, ["migrate"])
    assert result.exit_code == EXIT_DATABASE
    line = _one_line(result.output)
    assert "cannot reach the database postgresql+psycopg://postgres:***@127.0.0.1:" in line
    assert "PRIORWATCH_DATABASE_URL" in line and "priorwatch migrate" in line
    assert PASSWORD not in result.output


def test_migrate_prints_the_url_without_its_password(
    environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    environment.setenv("PRIORWATCH_DATABASE_URL", f"sqlite:///{tmp_path / 'm.db'}")
    result = runner.invoke(cli, ["migrate"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"database at head: sqlite:///{tmp_path / 'm.db'}"


def test_migrate_keeps_the_traceback_of_an_error_that_is_no_outage(
    environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def broken(_url: str) -> None:
        raise OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: x"))

    environment.setattr("app.db.migrate.upgrade_to_head", broken)
    environment.setenv("PRIORWATCH_DATABASE_URL", f"sqlite:///{tmp_path / 'm.db'}")
    result = runner.invoke(cli, ["migrate"])
    assert isinstance(result.exception, OperationalError)  # a bug, not an outage: shown whole
