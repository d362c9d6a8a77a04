"""`priorwatch ops METRIC VALUE --prior PI [--at U]` through typer's CliRunner."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.metrics.ops import outperformance_score

runner = CliRunner()


def test_prints_the_labeling_ops() -> None:
    result = runner.invoke(cli, ["ops", "f1", "0.6", "--prior", "0.1"])
    assert result.exit_code == 0, result.output
    assert float(result.output) == pytest.approx(0.957672, abs=1e-6)


def test_prints_a_point_metric_ops_with_at() -> None:
    result = runner.invoke(
        cli, ["ops", "precision_at_recall", "0.4", "--prior", "0.1", "--at", "0.9"]
    )
    assert result.exit_code == 0, result.output
    expected = outperformance_score("precision_at_recall", 0.4, 0.1, at=0.9)
    assert float(result.output) == pytest.approx(expected, abs=1e-6)


def test_negative_values_are_values_not_options() -> None:
    result = runner.invoke(cli, ["ops", "mcc", "--prior", "0.3", "--", "-0.2"])
    assert result.exit_code == 0, result.output
    assert float(result.output) == pytest.approx(outperformance_score("mcc", -0.2, 0.3), abs=1e-6)


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["ops", "f11", "0.5", "--prior", "0.3"], "metric"),
        (["ops", "f1", "0.5", "--prior", "1.5"], "prior"),
        (["ops", "f1", "1.5", "--prior", "0.3"], "value"),
        (["ops", "precision_at_recall", "0.5", "--prior", "0.3"], "at"),
        (["ops", "f1", "0.5", "--prior", "0.3", "--at", "0.5"], "at"),
    ],
)
def test_bad_input_is_a_usage_error_naming_the_field(args: list[str], mentions: str) -> None:
    result = runner.invoke(cli, args)
    assert result.exit_code == 2
    assert mentions in result.output


def test_prior_is_required() -> None:
    result = runner.invoke(cli, ["ops", "f1", "0.5"])
    assert result.exit_code == 2
    assert "--prior" in result.output
