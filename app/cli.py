"""The ``priorwatch`` command (README.md, "Command line").

Each command parses its options and hands over to the module that owns the
work; imports are deferred so ``priorwatch --help`` stays instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

cli = typer.Typer(
    name="priorwatch",
    help="Prior-invariant performance monitoring for binary classifiers.",
    no_args_is_help=True,
    add_completion=False,
)


_MIGRATE_HELP = "apply pending migrations at start (PostgreSQL; SQLite always does)"


def _prepare_schema(migrate: bool) -> None:
    """Bring the database to head or refuse to start (exit status 3) with what to run."""
    from app.config import get_settings
    from app.db.migrate import SchemaNotReady, prepare_schema

    try:
        typer.echo(prepare_schema(get_settings(), migrate=migrate), err=True)
    except SchemaNotReady as exc:
        typer.echo(f"priorwatch: not starting: {exc}", err=True)
        raise typer.Exit(3) from None


@cli.command()
def serve(
    host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    migrate: Annotated[bool, typer.Option("--migrate", help=_MIGRATE_HELP)] = False,
) -> None:
    """Run the API; on SQLite it also runs the worker in-process."""
    _prepare_schema(migrate)
    from app.main import run

    run(host=host, port=port)


@cli.command()
def worker(
    migrate: Annotated[bool, typer.Option("--migrate", help=_MIGRATE_HELP)] = False,
) -> None:
    """Run one worker process (Postgres deployments run several)."""
    _prepare_schema(migrate)
    from app.worker.runner import run

    run()


@cli.command()
def migrate() -> None:
    """Apply the Alembic migrations to PRIORWATCH_DATABASE_URL."""
    from app.config import get_settings
    from app.db.migrate import upgrade_to_head

    url = get_settings().database_url
    upgrade_to_head(url)
    typer.echo(f"database at head: {url}")


@cli.command()
def ops(
    metric: Annotated[str, typer.Argument(help="metric name, e.g. f1, mcc, auc_pr")],
    value: Annotated[float, typer.Argument(help="observed value of the metric")],
    prior: Annotated[float, typer.Option("--prior", help="class prior pi of the data")],
    at: Annotated[
        float | None,
        typer.Option(
            "--at", help="recall u (precision_at_recall) or fraction x (precision_at_fraction)"
        ),
    ] = None,
) -> None:
    """Print the outperformance score of VALUE of METRIC at prior PI."""
    from app.errors import InvalidInput
    from app.metrics.ops import outperformance_score

    try:
        score = outperformance_score(metric, value, prior, at=at)
    except InvalidInput as exc:
        raise typer.BadParameter(exc.reason, param_hint=exc.field) from exc
    typer.echo(f"{score:.6f}")


@cli.command()
def evaluate(
    file: Annotated[
        Path,
        typer.Argument(
            help="CSV with 'score' and 'label' columns", exists=True, dir_okay=False, readable=True
        ),
    ],
    threshold: Annotated[float, typer.Option(help="decision threshold")] = 0.5,
    pi0: Annotated[
        float | None, typer.Option(help="reference prior for calibrated metrics")
    ] = None,
    cost_ratio: Annotated[
        float | None, typer.Option(help="cost ratio r_C for weighted accuracy")
    ] = None,
    target_prior: Annotated[
        float | None, typer.Option(help="deployment prior for WA reweighting")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """Print the full metric set for a CSV of scores and labels."""
    from app.csv_input import read_scores_labels
    from app.errors import InvalidInput
    from app.metrics.evaluate import evaluate as evaluate_arrays
    from app.reporting import format_metrics

    try:
        scores, labels = read_scores_labels(file)
        result = evaluate_arrays(
            scores,
            labels,
            threshold=threshold,
            pi0=pi0,
            cost_ratio=cost_ratio,
            target_prior=target_prior,
        )
    except InvalidInput as exc:
        raise typer.BadParameter(exc.reason, param_hint=exc.field) from exc
    typer.echo(format_metrics(result, as_json=as_json))


def main() -> None:
    """Console-script entry point."""
    cli()
