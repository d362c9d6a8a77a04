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
from app.text_tables import format_table

models_cli = typer.Typer(
    help="Register, list, show, update and delete models (admin token).",
    no_args_is_help=True,
    rich_markup_mode=None,
    epilog=EXIT_CODES_EPILOG,
)
keys_cli = typer.Typer(
    help="Create, list and revoke a model's API keys (admin token).",
    no_args_is_help=True,
    rich_markup_mode=None,
    epilog=EXIT_CODES_EPILOG,
)

MODELS_PAGE = 1000
"""Models asked for per call of ``models list`` (the service's maximum)."""
ADMIN_HINT = "pass --admin-token or set PRIORWATCH_ADMIN_TOKEN (the token the service runs with)"
_OBJECTIVE = re.compile(r"^\s*([A-Za-z0-9_@.=]+?)\s*(>=|<=)\s*([-+0-9.eE]+)\s*$")


BodyOption = Annotated[
    Path | None,
    typer.Option(
        help="a JSON file with more settings (drift, costs, ...); options override it",
        exists=True,
        dir_okay=False,
        show_default=False,
    ),
]


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


LABEL_MISSINGNESS_HELP = "how labels arrive: class (default), score or none (docs/maturity.md)"
LABEL_HORIZON_HELP = "how long after a window its labels are expected complete, e.g. '90d'"
EXPOSITION_HELP = (
    "series /metrics writes of its windows: compact, full, a comma-separated list of "
    "families written whole, or default (the service's PRIORWATCH_METRICS_EXPOSITION)"
)


def parse_exposition(text: str) -> str | list[str] | None:
    """``--exposition``: a preset, ``default`` (None: the service's) or a list of families.

    >>> parse_exposition("full"), parse_exposition("default")
    ('full', None)
    >>> parse_exposition("priorwatch_window_metric_lower, priorwatch_window_metric_upper")
    ['priorwatch_window_metric_lower', 'priorwatch_window_metric_upper']
    """
    choice = text.strip()
    if choice in {"compact", "full"}:
        return choice
    if choice == "default":
        return None
    return [part.strip() for part in choice.split(",") if part.strip()]


def _setting(help_text: str) -> Any:
    """An option that changes nothing when left out."""
    return typer.Option(help=help_text, show_default=False)


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
    label_missingness: Annotated[str | None, _setting(LABEL_MISSINGNESS_HELP)] = None,
    label_horizon: Annotated[str | None, _setting(LABEL_HORIZON_HELP)] = None,
    exposition: Annotated[str | None, _setting(EXPOSITION_HELP)] = None,
    body: BodyOption = None,
) -> None:
    """Register a model and print its settings as the service stored them."""
    doc = _read_body(body)
    doc.update({"name": name, "pi0": pi0, "window": window, "threshold": threshold})
    given = {
        "cost_ratio": cost_ratio,
        "label_missingness": label_missingness,
        "label_horizon": label_horizon,
    }
    doc.update({k: v for k, v in given.items() if v is not None})
    if exposition is not None:
        doc["exposition"] = parse_exposition(exposition)
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


def parse_costs(text: str) -> dict[str, float]:
    """``"c_tp=0,c_fp=1,c_fn=10,c_tn=0"`` -> the unit costs (the service checks the names)."""
    costs: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        try:
            costs[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise typer.BadParameter(f"{part!r} is not NAME=NUMBER", param_hint="--costs")
    return costs


def _read_body(body: Path | None) -> dict[str, Any]:
    """The JSON object of ``--body`` (empty without one; usage error when not an object)."""
    if body is None:
        return {}
    try:
        loaded = json.loads(body.read_text(encoding="utf-8"))
    except ValueError as exc:
        fail(f"{body}: not JSON ({exc})", EXIT_USAGE)
    if not isinstance(loaded, dict):
        fail(f"{body}: the JSON is not an object", EXIT_USAGE)
    return loaded


def drift_update(
    current: dict[str, Any], reference: dict[str, Any] | None, settings: dict[str, Any]
) -> dict[str, Any]:
    """The whole drift document to send: ``current`` with the options applied.

    The service replaces the drift document as a whole, so the settings not
    named keep their current values. ``reference``: the new reference, or
    ``{}`` to remove it, or None to keep it.
    """
    drift = dict(current)
    if reference is not None:
        drift["reference"] = reference or None
    drift.update(settings)
    return drift


def _set_retention(doc: dict[str, Any], retention: str | None, keep_everything: bool) -> None:
    """``--retention`` or ``--keep-everything`` (a null retention) into ``doc``."""
    if retention is not None and keep_everything:
        fail("--keep-everything contradicts the retention given", EXIT_USAGE)
    if retention is not None or keep_everything:
        doc["retention"] = retention


def _set_lists(
    doc: dict[str, Any],
    segments: list[str] | None,
    no_segments: bool,
    objectives: list[dict[str, Any]],
    no_sla: bool,
) -> None:
    """The segments and SLA objectives given (each replaces its list) or cleared."""
    for listed, items, clear, flag in (
        ("segments", segments, no_segments, "--no-segments"),
        ("sla", objectives, no_sla, "--no-sla"),
    ):
        if items and clear:
            fail(f"{flag} contradicts the {listed} given", EXIT_USAGE)
        if items or clear:
            doc[listed] = items


def _drift_reference(
    start: str | None, end: str | None, trailing_windows: int | None, remove: bool
) -> dict[str, Any] | None:
    """The drift reference the options give: None when they name none, ``{}`` to remove it."""
    reference: dict[str, Any] | None = None
    if start is not None or end is not None:
        reference = {"from": start, "to": end}
    if trailing_windows is not None:
        reference = {**(reference or {}), "trailing_windows": trailing_windows}
    if remove:
        if reference is not None:
            fail("--no-drift-reference contradicts the reference given", EXIT_USAGE)
        reference = {}
    return reference


DriftFromOption = Annotated[
    str | None, _setting("drift reference period: its first time (ISO 8601)")
]
DriftToOption = Annotated[
    str | None, _setting("drift reference period: the time it ends (ISO 8601)")
]
TrailingWindowsOption = Annotated[
    int | None, _setting("drift reference: the last N windows instead of a period")
]
MinPriorEffectOption = Annotated[float | None, _setting("smallest prior change reported as drift")]
MinLikelihoodEffectOption = Annotated[
    float | None, _setting("smallest within-class change reported as drift")
]
MinClassCountOption = Annotated[int | None, _setting("fewest examples of a class for a drift test")]
RetentionOption = Annotated[
    str | None, _setting("how long windows are kept, e.g. '90d' (docs/operations.md)")
]


@models_cli.command("update", epilog=EXIT_CODES_EPILOG)
def update_model(
    name: Annotated[str, typer.Argument(help="the model's name")],
    url: UrlOption = DEFAULT_URL,
    admin_token: AdminTokenOption = None,
    description: Annotated[str | None, _setting("free text")] = None,
    pi0: Annotated[float | None, _setting("reference prior of the calibrated metrics")] = None,
    cost_ratio: Annotated[float | None, _setting("cost ratio for weighted accuracy")] = None,
    costs: Annotated[
        str | None, _setting("unit costs, e.g. 'c_tp=0,c_fp=1,c_fn=10,c_tn=0'")
    ] = None,
    segment: Annotated[
        list[str] | None,
        typer.Option("--segment", help="a segment name (repeat; replaces the list)"),
    ] = None,
    no_segments: Annotated[bool, typer.Option("--no-segments", help="remove every segment")] = (
        False
    ),
    sla: Annotated[
        list[str] | None,
        typer.Option("--sla", help="an SLA objective such as 'f1>=0.6' (repeat; replaces them)"),
    ] = None,
    no_sla: Annotated[bool, typer.Option("--no-sla", help="remove every SLA objective")] = False,
    drift_from: DriftFromOption = None,
    drift_to: DriftToOption = None,
    drift_trailing_windows: TrailingWindowsOption = None,
    no_drift_reference: Annotated[
        bool, typer.Option("--no-drift-reference", help="remove the drift reference")
    ] = False,
    drift_alpha: Annotated[float | None, _setting("drift tests' significance level")] = None,
    drift_min_prior_effect: MinPriorEffectOption = None,
    drift_min_likelihood_effect: MinLikelihoodEffectOption = None,
    drift_min_class_count: MinClassCountOption = None,
    drift_test_bins: Annotated[int | None, _setting("bins of the drift tests")] = None,
    retention: RetentionOption = None,
    keep_everything: Annotated[
        bool, typer.Option("--keep-everything", help="remove the retention: keep every window")
    ] = False,
    label_missingness: Annotated[str | None, _setting(LABEL_MISSINGNESS_HELP)] = None,
    label_horizon: Annotated[str | None, _setting(LABEL_HORIZON_HELP)] = None,
    exposition: Annotated[str | None, _setting(EXPOSITION_HELP)] = None,
    body: BodyOption = None,
) -> None:
    """Change NAME's settings and print them as the service stored them.

    Settings not named keep their value; the drift options change only the
    drift settings they name (docs/drift.md). Window, thresholds and bins are
    fixed at creation.
    """
    doc = _read_body(body)
    given = {
        "description": description,
        "pi0": pi0,
        "cost_ratio": cost_ratio,
        "label_missingness": label_missingness,
        "label_horizon": label_horizon,
    }
    doc.update({k: v for k, v in given.items() if v is not None})
    if exposition is not None:
        doc["exposition"] = parse_exposition(exposition)
    _set_retention(doc, retention, keep_everything)
    if costs is not None:
        doc["costs"] = parse_costs(costs)
    _set_lists(doc, segment, no_segments, [parse_objective(s) for s in sla or []], no_sla)
    reference = _drift_reference(drift_from, drift_to, drift_trailing_windows, no_drift_reference)
    drift_options = {
        "alpha": drift_alpha,
        "min_prior_effect": drift_min_prior_effect,
        "min_likelihood_effect": drift_min_likelihood_effect,
        "min_class_count": drift_min_class_count,
        "test_bins": drift_test_bins,
    }
    drift_settings = {k: v for k, v in drift_options.items() if v is not None}
    service = admin_service(url, admin_token)
    if reference is not None or drift_settings:
        current = (
            doc["drift"] if "drift" in doc else service.get_json(f"/v1/models/{name}")["drift"]
        )
        doc["drift"] = drift_update(current, reference, drift_settings)
    if not doc:
        fail("nothing to change: name a setting (see --help)", EXIT_USAGE)
    _print_json(service.request("PATCH", f"/v1/models/{name}", json=doc).json())


@models_cli.command("delete", epilog=EXIT_CODES_EPILOG)
def delete_model(
    name: Annotated[str, typer.Argument(help="the model's name")],
    url: UrlOption = DEFAULT_URL,
    admin_token: AdminTokenOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
) -> None:
    """Delete model NAME with its windows, batches, keys and series (asks first)."""
    service = admin_service(url, admin_token)
    if not yes:
        typer.confirm(
            f"Delete model {name!r} with all its windows, batches and keys?", abort=True, err=True
        )
    service.request("DELETE", f"/v1/models/{name}")
    typer.echo(f"deleted {name}")


@keys_cli.command("list", epilog=EXIT_CODES_EPILOG)
def list_keys(
    model: Annotated[str, typer.Argument(help="the model's name")],
    url: UrlOption = DEFAULT_URL,
    admin_token: AdminTokenOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """List MODEL's keys, revoked ones included (their tokens are never shown again)."""
    keys = admin_service(url, admin_token).get_json(f"/v1/models/{model}/keys")["keys"]
    if as_json:
        _print_json(keys)
        return
    rows = [
        [
            k["id"],
            k["prefix"],
            ",".join(k["scopes"]),
            str(k["created_at"]),
            str(k["revoked_at"] or "-"),
        ]
        for k in keys
    ]
    typer.echo(format_table(["id", "prefix", "scopes", "created", "revoked"], rows))
