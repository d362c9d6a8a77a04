"""``priorwatch windows`` (a table) and ``priorwatch sla`` (JSON, CSV or HTML)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.admin import ADMIN_HINT
from app.cli.service import (
    DEFAULT_URL,
    EXIT_USAGE,
    AdminTokenOption,
    Service,
    TokenOption,
    UrlOption,
    fail,
    require_token,
)
from app.text_tables import format_number, format_table

DEFAULT_METRICS = ("precision", "calibrated_precision", "recall", "auc_pr", "calibrated_auc_pr")
"""The metric columns of ``priorwatch windows`` unless ``--metric`` names others."""

SLA_FORMATS: Mapping[str, str] = {
    "json": "application/json",
    "csv": "text/csv",
    "html": "text/html",
}
"""Report formats of ``priorwatch sla`` and the media type asked for each."""

FromOption = Annotated[
    str | None,
    typer.Option("--from", help="first window: the one containing this time (ISO 8601)"),
]
ToOption = Annotated[
    str | None, typer.Option("--to", help="windows starting before this time (default now)")
]
SegmentOption = Annotated[
    str | None, typer.Option("--segment", help="a registered segment (default all traffic)")
]


def read_service(url: str, token: str | None, admin_token: str | None) -> Service:
    """The service with the model key, or else the admin token."""
    return Service(url, require_token(token or admin_token, f"pass --token, or {ADMIN_HINT}"))


def windows_table(windows: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> str:
    """The windows as a text table: start, n, prior, status, drift verdict, the
    unlabelled rows and their label-free estimate (prior and fit verdict), ``metrics``.

    Undefined values (null, or no estimate) show as ``-``.
    """
    headers = [
        "start", "n", "prior", "status", "verdict", "unlabelled", "est_prior", "est_verdict",
        *metrics,
    ]  # fmt: skip
    rows = []
    for w in windows:
        values = w.get("metrics") or {}
        verdict = (w.get("drift") or {}).get("verdict") or "-"
        estimate = w.get("estimate") or {}
        rows.append(
            [
                str(w["start"]),
                str(w["n"]),
                format_number(w.get("prior"), 4),
                str(w["status"]),
                str(verdict),
                str(w.get("n_unlabelled", 0)),
                format_number((estimate.get("prior") or {}).get("value"), 4),
                str((estimate.get("fit") or {}).get("verdict") or "-"),
                *(format_number(values.get(m)) for m in metrics),
            ]
        )
    return format_table(headers, rows)


def windows_command(
    model: Annotated[str, typer.Argument(help="the model's name")],
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    admin_token: AdminTokenOption = None,
    start_from: FromOption = None,
    to: ToOption = None,
    segment: SegmentOption = None,
    granularity: Annotated[
        str | None,
        typer.Option(help="merge windows: 5m, 15m, 1h, 6h, 1d, 1w", show_default=False),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option("--metric", help="a metric column (repeat; default a raw/pi0 selection)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON answer")] = False,
) -> None:
    """Print MODEL's windows as a table (oldest first)."""
    params = {"from": start_from, "to": to, "segment": segment, "granularity": granularity}
    doc = read_service(url, token, admin_token).get_json(f"/v1/models/{model}/windows", params)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    if not doc["windows"]:
        typer.echo("no window holds data in this range", err=True)
        return
    typer.echo(windows_table(doc["windows"], metric or DEFAULT_METRICS))


def report_format(fmt: str | None, html: bool, output: Path | None) -> str:
    """The report format: ``--html``, else ``--format``, else the output's extension, else JSON."""
    if html:
        if fmt not in (None, "html"):
            fail("--html and --format disagree", EXIT_USAGE)
        return "html"
    if fmt is not None:
        if fmt not in SLA_FORMATS:
            fail(f"--format {fmt!r} is not one of {', '.join(SLA_FORMATS)}", EXIT_USAGE)
        return fmt
    if output is not None:
        suffix = output.suffix.lower().lstrip(".")
        if suffix == "htm":
            return "html"
        if suffix in SLA_FORMATS:
            return suffix
    return "json"


def sla_command(
    model: Annotated[str, typer.Argument(help="the model's name")],
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    admin_token: AdminTokenOption = None,
    start_from: FromOption = None,
    to: ToOption = None,
    segment: SegmentOption = None,
    all_segments: Annotated[
        bool,
        typer.Option(
            "--all-segments",
            help="all traffic and every registered segment (HTML: a section each)",
        ),
    ] = False,
    fmt: Annotated[
        str | None,
        typer.Option("--format", help="json, csv or html (default: from --output, else json)"),
    ] = None,
    html: Annotated[
        bool, typer.Option("--html", help="the HTML report (same as --format html)")
    ] = (False),
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="write to this file (default stdout)", dir_okay=False),
    ] = None,
) -> None:
    """Fetch MODEL's SLA report as JSON, CSV or a self-contained HTML page."""
    chosen = report_format(fmt, html, output)
    if all_segments and segment is not None:
        fail("give --segment or --all-segments, not both", EXIT_USAGE)
    params = {"from": start_from, "to": to, "segment": "*" if all_segments else segment}
    response = read_service(url, token, admin_token).request(
        "GET", f"/v1/models/{model}/sla", params=params, accept=SLA_FORMATS[chosen]
    )
    if output is None:
        typer.echo(response.content, nl=False)
        return
    output.write_bytes(response.content)
    typer.echo(f"wrote {output} ({chosen}, {len(response.content)} bytes)", err=True)
