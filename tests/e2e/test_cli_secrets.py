"""No command prints the database password: every ``priorwatch`` command, run with a
password in PRIORWATCH_DATABASE_URL, its stdout, stderr and logs scanned.

The commands are enumerated from the typer app, so a new command fails
:func:`test_every_command_is_scanned` until it has arguments here. ``migrate``,
``serve`` and ``worker`` (the commands that read the URL) run as real
processes, on a reachable PostgreSQL database (given as ``postgres://``, the
form users write) and on an unreachable one; the commands that talk to the
service run in-process against that ``serve``.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _e2e_support import (
    START_SECONDS,
    Process,
    Processes,
    first_readyz_status,
    free_port,
    process_env,
    wait_ready,
    wait_until,
)
from sqlalchemy.engine import make_url
from typer.main import get_command
from typer.testing import CliRunner

from app.cli import cli
from app.cli.service import EXIT_DATABASE

PASSWORD = "S3cretPw-h4"
MASKED = "postgres:***@"
PROCESS_COMMANDS = ("migrate", "serve", "worker")
"""The commands that read the database URL, run as processes."""
runner = CliRunner()

Arguments = Callable[[Path, dict[str, str]], list[str]]
REMOTE: dict[str, Arguments] = {
    "ops": lambda _d, _s: ["ops", "f1", "0.5", "--prior", "0.1"],
    "evaluate": lambda d, _s: ["evaluate", str(d / "rows.csv")],
    "models create": lambda _d, _s: ["models", "create", "m", "--pi0", "0.1"],
    "models list": lambda _d, _s: ["models", "list"],
    "models show": lambda _d, _s: ["models", "show", "m"],
    "models update": lambda _d, _s: ["models", "update", "m", "--pi0", "0.2"],
    "keys create": lambda _d, _s: ["keys", "create", "m", "--json"],
    "keys list": lambda _d, _s: ["keys", "list", "m"],
    "ingest": lambda d, _s: ["ingest", str(d / "rows.csv"), "--model", "m"],
    "windows": lambda _d, _s: ["windows", "m"],
    "sla": lambda _d, _s: ["sla", "m"],
    "simulate": lambda _d, _s: ["simulate", "--rows-per-window", "2000", "--wait", "0"],
    "keys revoke": lambda _d, state: ["keys", "revoke", "m", state["key_id"]],
    "models delete": lambda _d, _s: ["models", "delete", "m", "--yes"],
}
"""The other commands, in the order they run (``keys revoke`` needs the key created,
``models delete`` comes last)."""


def _leaf_commands() -> set[str]:
    names: set[str] = set()

    def walk(command: Any, prefix: list[str]) -> None:
        subcommands = getattr(command, "commands", {})
        if not subcommands and prefix:
            names.add(" ".join(prefix))
        for name, sub in subcommands.items():
            walk(sub, [*prefix, name])

    walk(get_command(cli), [])
    return names


def test_every_command_is_scanned() -> None:
    assert _leaf_commands() == set(REMOTE) | set(PROCESS_COMMANDS)


def _with_password(url: str, scheme: str = "postgresql+psycopg") -> str:
    with_password = make_url(url).set(password=PASSWORD, drivername=scheme)
    return with_password.render_as_string(hide_password=False)


def _log_text(process: Process) -> str:
    return process.log_path.read_text(errors="replace")


def _stop(process: Process) -> str:
    process.stop()
    return _log_text(process)


def _write_rows(path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["score", "label"])
        writer.writerows([[0.9, 1], [0.2, 0], [0.7, 1], [0.4, 0], [0.6, 0], [0.3, 1]])


@pytest.mark.postgres
def test_no_command_prints_the_password_of_a_reachable_database(
    processes: Processes,
    empty_postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = process_env(_with_password(empty_postgres_url, scheme="postgres"))
    outputs = {"migrate": processes.run("migrate", ["migrate"], env)}
    assert MASKED in outputs["migrate"]  # the URL was shown, masked
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = processes.start("serve", ["serve", "--port", str(port)], env)
    worker = processes.start("worker", ["worker"], env)
    wait_ready(base, processes)
    wait_until(
        lambda: "worker loop started" in _log_text(worker), "worker", START_SECONDS, processes
    )

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PRIORWATCH_URL", base)
    _write_rows(processes.workdir / "rows.csv")
    state: dict[str, str] = {}
    for command, arguments in REMOTE.items():
        result = runner.invoke(cli, arguments(processes.workdir, state))
        assert result.exit_code in (0, 1), f"{command}: {result.output}"
        outputs[command] = result.output
        if command == "keys create":
            state["key_id"] = result.stdout.split('"id": "')[1].split('"')[0]
    assert "revoked" in outputs["keys revoke"]  # the commands did their work

    outputs["worker"] = _stop(worker)
    outputs["serve"] = _stop(server)
    assert MASKED in outputs["serve"] and MASKED in outputs["worker"]
    outputs["logs"] = caplog.text
    for command, text in outputs.items():
        assert PASSWORD not in text, f"{command} printed the password:\n{text[-2000:]}"


@pytest.mark.postgres
def test_no_command_prints_the_password_of_an_unreachable_database(
    processes: Processes,
) -> None:
    env = process_env(_with_password(f"postgresql://postgres@127.0.0.1:{free_port()}/priorwatch"))
    outputs = {"migrate": processes.run("migrate", ["migrate"], env, status=EXIT_DATABASE)}
    port = free_port()
    server = processes.start("serve", ["serve", "--port", str(port)], env)
    worker = processes.start("worker", ["worker"], env)
    assert first_readyz_status(f"http://127.0.0.1:{port}", processes) == 503
    wait_until(lambda: "worker error" in _log_text(worker), "worker", START_SECONDS, processes)
    outputs["worker"] = _stop(worker)
    outputs["serve"] = _stop(server)
    for command, text in outputs.items():
        assert MASKED in text, f"{command} did not name the database:\n{text[-2000:]}"
        assert PASSWORD not in text, f"{command} printed the password:\n{text[-2000:]}"
