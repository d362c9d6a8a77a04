"""``priorwatch simulate``: register a demo model, send a seeded day of fraud-like
traffic through the Python client, wait for the worker and print what it found.

The traffic (app/demo/scenario.py) is back-filled: the day ends at the start of
the current window, so it completes in seconds and every window is complete.
The model's drift reference is the stable period, and its SLA objectives are
read at pi0, so the fraud wave shows in the raw metrics and in the verdict
``prior`` but not in the SLA, while the degradation is ``likelihood`` and
breaches it.

Labels usually arrive after the scores, so each hour's scores are first sent
unlabelled (``client.log_scores``: the label-free estimate of the prior and
the metrics, checked against the reference's score distributions) and then
again with their labels (``client.log``); the summary shows both views.

With ``--delayed-labels`` the labels arrive over the following days, the
frauds' first (app/demo/delivery.py): each stage sends the labels arrived
since the previous one, with their predictions' timestamps, waits for the
worker and prints the day's labelled prior (biased: mostly frauds at
first), its completed prior (the windows' stored ``maturity``) and the truth.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.cli.admin import admin_service
from app.cli.service import (
    DEFAULT_RETRY_SECONDS,
    DEFAULT_URL,
    AdminTokenOption,
    RetryOption,
    Service,
    UrlOption,
    fail,
)
from app.timegrid import isoformat_z

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from app.demo.delivery import StageLine
    from app.demo.scenario import Batch, Scenario
    from priorwatch_client import Client

WINDOW = "1h"
WINDOW_LENGTH = timedelta(hours=1)
OBJECTIVES = (
    {"metric": "precision", "op": ">=", "target": 0.65},
    {"metric": "recall", "op": ">=", "target": 0.5},
)
"""The demo model's SLA (read at pi0: precision -> calibrated_precision)."""
POLL_SECONDS = 0.5


def model_document(name: str, scenario: Scenario, first: datetime) -> dict[str, Any]:
    """The demo model: pi0 the stable fraud rate, the stable period as drift reference."""
    return {
        "name": name,
        "description": "priorwatch simulate: a fraud-like model over a simulated day",
        "window": WINDOW,
        "threshold": 0.5,
        "pi0": scenario.phases[0].prior,
        "sla": list(OBJECTIVES),
        "drift": {
            "reference": {
                "from": isoformat_z(first),
                "to": isoformat_z(first + scenario.reference_windows * WINDOW_LENGTH),
            }
        },
    }


def wait_fresh(
    service: Service, model: str, params: dict[str, str | None], expected: int, timeout: float
) -> list[dict[str, Any]]:
    """The windows once ``expected`` of them are fresh with their detail (intervals, curves)
    of the same data (polling), or fail after ``timeout`` s.

    Under a backlog the worker computes a window's summary first and its detail
    after (docs/worker.md, "Tiered refresh"); the SLA column waits for both.
    """
    deadline = time.monotonic() + timeout
    while True:
        windows: list[dict[str, Any]] = service.get_json(f"/v1/models/{model}/windows", params)[
            "windows"
        ]
        fresh = sum(
            w["status"] == "fresh" and bool((w.get("detail") or {}).get("current")) for w in windows
        )
        if fresh >= expected:
            return windows
        if time.monotonic() > deadline:
            fail(
                f"only {fresh} of {expected} windows fresh after {timeout:.0f} s; "
                f"is the worker running? (priorwatch windows {model} shows them later)"
            )
        time.sleep(POLL_SECONDS)


Held = list[tuple["Batch", "npt.NDArray[np.int64]"]]
"""The day's batches with the day each row's label arrives (``--delayed-labels``)."""


def send_traffic(
    client: Client, scenario: Scenario, rng: np.random.Generator, first: datetime, delayed: bool
) -> tuple[int, Held]:
    """Send every prediction without its label, then its label now (or hold it, with its
    arrival day, when ``delayed``); the rows sent and the held batches."""
    from app.demo.delivery import arrival_days
    from app.demo.scenario import batches

    sent, held = 0, []
    for batch in batches(scenario, rng, first, WINDOW_LENGTH):
        client.log_scores(batch.scores, timestamp=batch.timestamp)
        if delayed:
            held.append((batch, arrival_days(rng, batch.labels)))
        else:
            client.log(batch.scores, batch.labels, timestamp=batch.timestamp)
        sent += batch.scores.size
    return sent, held


def deliver_stages(
    url: str,
    token: str,
    name: str,
    held: Held,
    wait: tuple[dict[str, str | None], int, float],
    retry_seconds: float,
) -> list[StageLine]:
    """Send the held labels stage by stage (app/demo/delivery.py), each with its
    prediction's timestamp; after each, wait for the worker and read the day."""
    from app.cli.sending import sending
    from app.demo.delivery import STAGES, arriving, stage_line, stage_name

    params, expected, timeout = wait
    reader = Service(url, token)
    rows = sum(batch.labels.size for batch, _ in held)
    truth = sum(int(batch.labels.sum()) for batch, _ in held) / rows
    lines, after = [], None
    for until in STAGES:
        with sending(url, token, name, retry_seconds) as client:
            for batch, days in held:
                now = arriving(days, after, until)
                if now.any():  # the prediction's own timestamp, not the label's
                    client.log(batch.scores[now], batch.labels[now], timestamp=batch.timestamp)
        windows = wait_fresh(reader, name, params, expected, timeout)
        lines.append(stage_line(stage_name(until), windows, truth))
        after = until
    return lines


def simulate_command(
    url: UrlOption = DEFAULT_URL,
    admin_token: AdminTokenOption = None,
    model: Annotated[
        str | None,
        typer.Option(help="name of the demo model (default fraud-demo-<time>)", show_default=False),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the simulated traffic")] = 20261126,
    rows_per_window: Annotated[
        int, typer.Option(help="transactions per hour", min=2_000, max=1_000_000)
    ] = 20_000,
    wait: Annotated[
        float, typer.Option(help="seconds to wait for the worker to compute every window")
    ] = 120.0,
    retry_seconds: RetryOption = DEFAULT_RETRY_SECONDS,
    per_window: Annotated[
        bool,
        typer.Option("--per-window/--phases-only", help="also print one line per window"),
    ] = True,
    delayed_labels: Annotated[
        bool,
        typer.Option(
            "--delayed-labels",
            help="send the labels over the following days, the frauds' first, and print "
            "the labelled, completed and true prior at each stage",
        ),
    ] = False,
) -> None:
    """Send a simulated day of fraud-like traffic and print what priorwatch makes of it.

    Registers a model (admin token) with pi0 = 1% and the first 8 hours as drift
    reference, creates a key, sends 24 back-filled hours through the Python
    client, each hour's scores first without labels, then with them (stable,
    a fraud wave where only the fraud rate rises x4, back to normal, then a
    degradation where the frauds' scores move), waits for the worker and
    prints raw and pi0 metrics, the label-free estimate, drift verdicts and
    SLA status. With --delayed-labels the labels follow over simulated days
    (frauds first) and a table shows what each stage of their delivery gives.
    """
    import numpy as np

    from app.cli.sending import sending
    from app.demo.delivery import stage_table
    from app.demo.scenario import first_window_start, fraud_scenario

    admin = admin_service(url, admin_token)
    now = datetime.now(UTC)
    name = model or f"fraud-demo-{now:%Y%m%d-%H%M%S}"
    scenario = fraud_scenario(rows_per_window=rows_per_window)
    first = first_window_start(now, WINDOW_LENGTH, scenario.windows)
    end = first + scenario.windows * WINDOW_LENGTH
    token = _register(admin, name, scenario, first)
    rng = np.random.default_rng(seed)
    with sending(url, token, name, retry_seconds) as client:
        sent, held = send_traffic(client, scenario, rng, first, delayed_labels)
    typer.echo(
        f"sent {sent:,} predictions over {scenario.windows} hours "
        f"({isoformat_z(first)} to {isoformat_z(end)}); waiting for the worker..."
    )
    reader = Service(url, token)
    params: dict[str, str | None] = {"from": isoformat_z(first), "to": isoformat_z(end)}
    windows = wait_fresh(reader, name, params, scenario.windows, wait)
    if delayed_labels:
        expected = (params, scenario.windows, wait)
        stages = deliver_stages(url, token, name, held, expected, retry_seconds)
        typer.echo("")
        typer.echo("the day's labels over the following days (frauds first):")
        typer.echo(stage_table(stages))
        windows = wait_fresh(reader, name, params, scenario.windows, wait)
    sla = reader.get_json(f"/v1/models/{name}/sla", params)
    _print_summary(scenario, first, windows, sla, per_window=per_window)
    typer.echo(f"more: priorwatch windows {name} --token {token}")


def _register(admin: Service, name: str, scenario: Scenario, first: datetime) -> str:
    """Register the demo model and create its key (ingest, read); returns the token."""
    admin.request("POST", "/v1/models", json=model_document(name, scenario, first))
    key = admin.request("POST", f"/v1/models/{name}/keys", json={"scopes": ["ingest", "read"]})
    token = str(key.json()["token"])
    typer.echo(f"model {name} registered; key {token} (ingest, read)")
    return token


def _print_summary(
    scenario: Scenario,
    first: datetime,
    windows: list[dict[str, Any]],
    sla: dict[str, Any],
    *,
    per_window: bool,
) -> None:
    """The per-window lines (with ``per_window``), the per-phase table and the SLA."""
    from app.demo.summary import per_phase_table, per_window_table, window_lines

    lines = window_lines(scenario, first, WINDOW_LENGTH, windows, sla["windows"])
    if per_window:
        typer.echo("")
        typer.echo(per_window_table(lines))
    typer.echo("")
    typer.echo(per_phase_table(lines))
    ratio = sla["summary"]["compliance_ratio"]
    typer.echo("")
    typer.echo(
        "SLA (at pi0): "
        + ", ".join(f"{o['metric']} {o['op']} {o['target']}" for o in OBJECTIVES)
        + f"; compliance {'-' if ratio is None else f'{ratio:.0%}'}"
    )
