"""The ``priorwatch`` command (README.md, "Command line").

Each command parses its options and hands over to the module that owns the
work; heavy imports are deferred so ``priorwatch --help`` stays instant. The
commands that talk to a running service live beside this module: ``models``
and ``keys`` (admin.py), ``windows`` and ``sla`` (read.py), ``ingest``
(ingest.py), ``simulate`` (simulate.py). Help is rendered by click's plain
formatter (``rich_markup_mode=None``), which shows flags without a value
placeholder. Options and exit codes: docs/cli.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.admin import keys_cli, models_cli
from app.cli.ingest import ingest_command
from app.cli.read import sla_command, windows_command
from app.cli.service import EXIT_CODES_EPILOG, LOCAL_EXIT_CODES_EPILOG
from app.cli.simulate import simulate_command

cli = typer.Typer(
    name="priorwatch",
    help="Prior-invariant performance monitoring for binary classifiers.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    epilog=EXIT_CODES_EPILOG,
    context_settings={"help_option_names": ["--help", "-h"]},
)


_MIGRATE_HELP = "apply pending migrations at start (PostgreSQL; SQLite always does)"


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"priorwatch {version('priorwatch')}")
        raise typer.Exit()


@cli.callback()
def _root(
    ctx: typer.Context,
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", help="print the version and exit", is_eager=True, callback=_print_version
        ),
    ] = False,
) -> None:
    """Prior-invariant performance monitoring for binary classifiers."""
    if Path(".env").is_file():  # the service's file: URL and tokens as the options' defaults
        from app.cli.service import env_file_values, option_defaults

        ctx.default_map = option_defaults(ctx.command, env_file_values())


@cli.command(epilog=LOCAL_EXIT_CODES_EPILOG)
def serve(
    host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    migrate: Annotated[bool, typer.Option("--migrate", help=_MIGRATE_HELP)] = False,
) -> None:
    """Run the API; on SQLite it also runs the worker in-process."""
    from app.cli.startup import load_settings, load_worker_settings, prepare_schema_or_exit

    settings = load_settings()
    if settings.is_sqlite and settings.embedded_worker:
        load_worker_settings()  # refused now rather than in the server's start-up
    prepare_schema_or_exit(settings, migrate=migrate)
    from app.main import run

    run(host=host, port=port)


@cli.command(epilog=LOCAL_EXIT_CODES_EPILOG)
def worker(
    migrate: Annotated[bool, typer.Option("--migrate", help=_MIGRATE_HELP)] = False,
) -> None:
    """Run one worker process (Postgres deployments run several)."""
    from app.cli.startup import load_settings, load_worker_settings, prepare_schema_or_exit

    settings = load_settings()
    worker_settings = load_worker_settings()
    prepare_schema_or_exit(settings, migrate=migrate)
    from app.worker.runner import run

    run(settings, worker_settings)


@cli.command(epilog=LOCAL_EXIT_CODES_EPILOG)
def migrate() -> None:
    """Apply the Alembic migrations to PRIORWATCH_DATABASE_URL."""
    from app.cli.startup import load_settings, migrate_or_exit

    typer.echo(f"database at head: {migrate_or_exit(load_settings())}")


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
    from app.text_tables import format_metrics

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


cli.add_typer(models_cli, name="models")
cli.add_typer(keys_cli, name="keys")
for _name, _command in (
    ("ingest", ingest_command),
    ("windows", windows_command),
    ("sla", sla_command),
    ("simulate", simulate_command),
):
    cli.command(_name, epilog=EXIT_CODES_EPILOG)(_command)


def main() -> None:
    """Console-script entry point."""
    cli()
