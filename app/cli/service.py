"""How the commands reach a running service: base URL, tokens, errors, exit codes.

Admin and read calls are plain HTTP (one request each, no retries); a
refused call ends the command with the service's problem+json shown and exit
code :data:`EXIT_SERVICE`, an unreachable service with :data:`EXIT_UNREACHABLE`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import orjson
import typer
from typer.core import TyperGroup

if TYPE_CHECKING:
    import httpx

EXIT_SERVICE = 1
"""The service answered with an error (4xx/5xx), or a result was not as asked."""
EXIT_USAGE = 2
"""Bad options or arguments, or an unreadable input file (click's usage error code)."""
EXIT_UNREACHABLE = 3
"""The service could not be reached (connection refused, timeout)."""
EXIT_SCHEMA = 3
"""``serve``, ``worker``: the database is behind the code (run ``priorwatch migrate``)."""
EXIT_SETTINGS = 4
"""``serve``, ``worker``, ``migrate``: a setting (``PRIORWATCH_*``) is refused."""
EXIT_DATABASE = 5
"""``migrate``: the database could not be reached (refused, timed out, wrong password)."""

EXIT_CODES_EPILOG = (
    "\b\nExit codes:\n"
    "  0  success\n"
    "  1  the service refused or failed the request (its problem is shown)\n"
    "  2  usage error: bad option or argument, unreadable input file\n"
    "  3  the service could not be reached"
)
"""The exit codes, as shown at the end of every ``--help`` (docs/cli.md)."""

LOCAL_EXIT_CODES_EPILOG = (
    "\b\nExit codes:\n"
    "  0  success (serve, worker: stopped by SIGTERM or SIGINT)\n"
    "  2  usage error: bad option or argument\n"
    "  3  the database is behind the code: run `priorwatch migrate` (serve, worker)\n"
    "  4  a setting (PRIORWATCH_*) is refused: the message names it\n"
    "  5  the database could not be reached (migrate)"
)
"""The exit codes of the local commands that read the settings (docs/cli.md)."""

DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT_SECONDS = 60.0
CONNECT_TIMEOUT_SECONDS = 5.0
"""A call's timeouts. httpx is imported by the first call, not with this module: the
commands that call no service (``worker``, ``serve``, ``migrate``) start without it."""

UrlOption = Annotated[
    str,
    typer.Option("--url", envvar="PRIORWATCH_URL", help="base URL of the service"),
]
AdminTokenOption = Annotated[
    str | None,
    typer.Option(
        "--admin-token",
        envvar="PRIORWATCH_ADMIN_TOKEN",
        help="the service's admin token",
        show_default=False,
    ),
]
RetryOption = Annotated[
    float,
    typer.Option(
        "--retry-seconds",
        help="how long the client retries a request while the service is unreachable or busy",
        min=0.0,
    ),
]
DEFAULT_RETRY_SECONDS = 60.0
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="PRIORWATCH_TOKEN",
        help="a key of the model (default: the admin token)",
        show_default=False,
    ),
]


def env_file_values() -> dict[str, str]:
    """``PRIORWATCH_URL``, ``PRIORWATCH_TOKEN`` and ``PRIORWATCH_ADMIN_TOKEN`` as the
    server reads its settings: from the environment, else from ``.env`` in the
    working directory (app.config.settings_config); the ones set, by option name."""
    from pydantic_settings import BaseSettings

    from app.config import settings_config

    class CliSettings(BaseSettings):
        model_config = settings_config("PRIORWATCH_")
        url: str | None = None
        token: str | None = None
        admin_token: str | None = None

    return {name: value for name, value in CliSettings().model_dump().items() if value}


def option_defaults(command: Any, values: Mapping[str, str]) -> dict[str, Any]:
    """A click ``default_map`` giving every command under ``command`` (a typer
    command or group) the ``values`` of the options it has. click reads the map
    after the command line and the option's environment variable, so: option >
    environment > ``.env`` > default."""
    if isinstance(command, TyperGroup):
        return {name: option_defaults(sub, values) for name, sub in command.commands.items()}
    return {p.name: values[p.name] for p in command.params if p.name in values}


def fail(message: str, code: int = EXIT_SERVICE) -> NoReturn:
    """Print ``message`` on stderr and end the command with exit code ``code``."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def require_token(token: str | None, what: str) -> str:
    """``token``, or a usage error saying which option or variable supplies it."""
    if not token:
        fail(f"no token: {what}", EXIT_USAGE)
    return token


def describe_problem(response: httpx.Response) -> str:
    """One readable line (or a few) from an error response, problem+json or not."""
    try:
        doc = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:500]}"
    if not isinstance(doc, dict):
        return f"HTTP {response.status_code}: {response.text[:500]}"
    head = f"HTTP {response.status_code} {doc.get('title', '')}".rstrip()
    lines = [f"{head}: {doc['detail']}" if doc.get("detail") else head]
    for err in doc.get("errors") or []:
        if isinstance(err, dict):
            lines.append(f"  {err.get('field', '?')}: {err.get('reason', err)}")
    return "\n".join(lines)


@dataclass
class Service:
    """One service at ``url`` with one bearer token; every call checks its answer."""

    url: str
    token: str

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Mapping[str, Any] | None = None,
        params: Mapping[str, str | None] | None = None,
        accept: str | None = None,
    ) -> httpx.Response:
        """The response of a successful call; otherwise the command ends (see module)."""
        headers = {"Authorization": f"Bearer {self.token}"}
        if accept is not None:
            headers["Accept"] = accept
        content = None
        if json is not None:
            content = orjson.dumps(dict(json))
            headers["Content-Type"] = "application/json"
        import httpx

        try:
            response = httpx.request(
                method,
                self.url.rstrip("/") + path,
                content=content,
                params={k: v for k, v in (params or {}).items() if v is not None},
                headers=headers,
                timeout=httpx.Timeout(TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS),
            )
        except httpx.TransportError as exc:
            fail(f"cannot reach the service at {self.url}: {exc}", EXIT_UNREACHABLE)
        if response.status_code >= 400:
            fail(describe_problem(response))
        return response

    def get_json(self, path: str, params: Mapping[str, str | None] | None = None) -> Any:
        return self.request("GET", path, params=params).json()
