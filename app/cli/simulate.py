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

if TYPE_CHECKING:
    from app.demo.scenario import Scenario

WINDOW = "1h"
WINDOW_LENGTH = timedelta(hours=1)
OBJECTIVES = (
    {"metric": "precision", "op": ">=", "target": 0.65},
    {"metric": "recall", "op": ">=", "target": 0.5},
)
"""The demo model's SLA (read at pi0: precision -> calibrated_precision)."""
POLL_SECONDS = 0.5


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


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
                "from": _iso(first),
                "to": _iso(first + scenario.reference_windows * WINDOW_LENGTH),
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
) -> None:
    """Send a simulated day of fraud-like traffic and print what priorwatch makes of it.

    Registers a model (admin token) with pi0 = 1% and the first 8 hours as drift
    reference, creates a key, sends 24 back-filled hours through the Python
    client, each hour's scores first without labels, then with them (stable,
    a fraud wave where only the fraud rate rises x4, back to normal, then a
    degradation where the frauds' scores move), waits for the worker and
    prints raw and pi0 metrics, the label-free estimate, drift verdicts and
    SLA status.
    """
    import numpy as np

    from app.cli.sending import sending
    from app.demo.scenario import batches, first_window_start, fraud_scenario
    from app.demo.summary import per_phase_table, per_window_table, window_lines

    admin = admin_service(url, admin_token)
    now = datetime.now(UTC)
    name = model or f"fraud-demo-{now:%Y%m%d-%H%M%S}"
    scenario = fraud_scenario(rows_per_window=rows_per_window)
    length = WINDOW_LENGTH
    first = first_window_start(now, length, scenario.windows)
    end = first + scenario.windows * length

    admin.request("POST", "/v1/models", json=model_document(name, scenario, first))
    key = admin.request("POST", f"/v1/models/{name}/keys", json={"scopes": ["ingest", "read"]})
    token = str(key.json()["token"])
    typer.echo(f"model {name} registered; key {token} (ingest, read)")

    rng = np.random.default_rng(seed)
    sent = 0
    with sending(url, token, name, retry_seconds) as client:
        for batch in batches(scenario, rng, first, length):
            client.log_scores(batch.scores, timestamp=batch.timestamp)
            client.log(batch.scores, batch.labels, timestamp=batch.timestamp)
            sent += batch.scores.size
    typer.echo(
        f"sent {sent:,} predictions over {scenario.windows} hours "
        f"({_iso(first)} to {_iso(end)}); waiting for the worker..."
    )

    reader = Service(url, token)
    params: dict[str, str | None] = {"from": _iso(first), "to": _iso(end)}
    windows = wait_fresh(reader, name, params, scenario.windows, wait)
    sla = reader.get_json(f"/v1/models/{name}/sla", params)
    lines = window_lines(scenario, first, length, windows, sla["windows"])
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
    typer.echo(f"more: priorwatch windows {name} --token {token}")
