"""``priorwatch models ...`` and ``priorwatch keys ...``: admin calls over HTTP."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.service import (
    DEFAULT_URL,
    EXIT_CODES_EPILOG,
    EXIT_USAGE,
    AdminTokenOption,
    Service,
    UrlOption,
    fail,
    require_token,
)
from app.reporting import format_table

models_cli = typer.Typer(
    help="Register, list and show models (admin token).",
    no_args_is_help=True,
    rich_markup_mode=None,
    epilog=EXIT_CODES_EPILOG,
)
keys_cli = typer.Typer(
    help="Create and revoke a model's API keys (admin token).",
    no_args_is_help=True,
    rich_markup_mode=None,
    epilog=EXIT_CODES_EPILOG,
)

MODELS_PAGE = 1000
"""Models asked for per call of ``models list`` (the service's maximum)."""
ADMIN_HINT = "pass --admin-token or set PRIORWATCH_ADMIN_TOKEN (the token the service runs with)"
_OBJECTIVE = re.compile(r"^\s*([A-Za-z0-9_@.=]+?)\s*(>=|<=)\s*([-+0-9.eE]+)\s*$")


def admin_service(url: str, admin_token: str | None) -> Service:
    """The service at ``url`` with the admin token (usage error without one)."""
    return Service(url, require_token(admin_token, ADMIN_HINT))


def parse_objective(text: str) -> dict[str, Any]:
    """``"f1>=0.6"`` -> ``{"metric": "f1", "op": ">=", "target": 0.6}``.

    Raises
    ------
    typer.BadParameter
        When ``text`` is not ``METRIC>=TARGET`` or ``METRIC<=TARGET``.
    """
    match = _OBJECTIVE.match(text)
    if match is None:
        raise typer.BadParameter(f"{text!r} is not METRIC>=TARGET or METRIC<=TARGET")
    metric, op, target = match.groups()
    try:
        value = float(target)
    except ValueError:
        raise typer.BadParameter(f"{target!r} is not a number") from None
    return {"metric": metric, "op": op, "target": value}


def _print_json(doc: Any) -> None:
    typer.echo(json.dumps(doc, indent=2))


@models_cli.command("create", epilog=EXIT_CODES_EPILOG)
def create_model(
    name: Annotated[str, typer.Argument(help="the model's name (a slug)")],
    pi0: Annotated[float, typer.Option("--pi0", help="reference prior of the calibrated metrics")],
    url: UrlOption = DEFAULT_URL,
    admin_token: AdminTokenOption = None,
    window: Annotated[str, typer.Option(help="window length: 5m, 15m, 1h, 6h, 1d, 1w")] = "1h",
    threshold: Annotated[float, typer.Option(help="decision threshold")] = 0.5,
    cost_ratio: Annotated[
        float | None, typer.Option(help="cost ratio for weighted accuracy", show_default=False)
    ] = None,
    segment: Annotated[
        list[str] | None, typer.Option("--segment", help="a segment name (repeat for more)")
    ] = None,
    sla: Annotated[
        list[str] | None,
        typer.Option("--sla", help="an SLA objective such as 'f1>=0.6' (repeat for more)"),
    ] = None,
    body: Annotated[
        Path | None,
        typer.Option(
            help="a JSON file with more settings (drift, costs, ...); options override it",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
) -> None:
    """Register a model and print its settings as the service stored them."""
    doc: dict[str, Any] = {}
    if body is not None:
        try:
            loaded = json.loads(body.read_text(encoding="utf-8"))
        except ValueError as exc:
            fail(f"{body}: not JSON ({exc})", EXIT_USAGE)
        if not isinstance(loaded, dict):
            fail(f"{body}: the JSON is not an object", EXIT_USAGE)
        doc.update(loaded)
    doc.update({"name": name, "pi0": pi0, "window": window, "threshold": threshold})
    if cost_ratio is not None:
        doc["cost_ratio"] = cost_ratio
    if segment:
        doc["segments"] = segment
    if sla:
        doc["sla"] = [parse_objective(s) for s in sla]
    created = admin_service(url, admin_token).request("POST", "/v1/models", json=doc).json()
    _print_json(created)


@models_cli.command("list", epilog=EXIT_CODES_EPILOG)
def list_models(
    url: UrlOption = DEFAULT_URL,
    admin_token: AdminTokenOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """List the registered models (every page of the service's answer)."""
    service = admin_service(url, admin_token)
    models: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = service.get_json("/v1/models", {"limit": str(MODELS_PAGE), "cursor": cursor})
        models.extend(page["models"])
        cursor = page["next"]
        if cursor is None:
            break
    if as_json:
        _print_json(models)
        return
    rows = [
        [
            m["name"],
            m["window"],
            repr(m["pi0"]),
            repr(m["threshold"]),
            ",".join(m["segments"]) or "-",
            str(len(m["sla"])),
        ]
        for m in models
    ]
    typer.echo(format_table(["name", "window", "pi0", "threshold", "segments", "sla"], rows))


@models_cli.command("show", epilog=EXIT_CODES_EPILOG)
def show_model(
    name: Annotated[str, typer.Argument(help="the model's name")],
    url: UrlOption = DEFAULT_URL,
    admin_token: AdminTokenOption = None,
) -> None:
    """Print one model's settings (JSON)."""
    _print_json(admin_service(url, admin_token).get_json(f"/v1/models/{name}"))


@keys_cli.command("create", epilog=EXIT_CODES_EPILOG)
def create_key(
    model: Annotated[str, typer.Argument(help="the model's name")],
    url: UrlOption = DEFAULT_URL,
    admin_token: AdminTokenOption = None,
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="ingest or read (repeat; default both)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the whole answer as JSON")] = False,
) -> None:
    """Create a key of MODEL and print its token (shown this once)."""
    scopes = scope or ["ingest", "read"]
    created = (
        admin_service(url, admin_token)
        .request("POST", f"/v1/models/{model}/keys", json={"scopes": scopes})
        .json()
    )
    if as_json:
        _print_json(created)
        return
    typer.echo(created["token"])
    typer.echo(f"key id {created['id']}, scopes {','.join(created['scopes'])}", err=True)


@keys_cli.command("revoke", epilog=EXIT_CODES_EPILOG)
def revoke_key(
    model: Annotated[str, typer.Argument(help="the model's name")],
    key_id: Annotated[str, typer.Argument(help="the key's id (from 'keys create')")],
    url: UrlOption = DEFAULT_URL,
    admin_token: AdminTokenOption = None,
) -> None:
    """Revoke a key of MODEL; its token is refused from now on."""
    admin_service(url, admin_token).request("DELETE", f"/v1/models/{model}/keys/{key_id}")
    typer.echo(f"revoked {key_id}")
