"""``priorwatch evaluate FILE.csv`` and the CSV reader behind it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.csv_input import read_scores_labels
from app.errors import InvalidInput
from app.metrics import evaluate
from app.text_tables import format_metrics

runner = CliRunner()


def _write(tmp_path: Path, text: str, name: str = "data.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def csv_file(tmp_path: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    y = (rng.random(400) < 0.2).astype(int)
    s = np.round(rng.random(400) * 0.6 + 0.4 * y, 4)
    rows = "\n".join(f"{yi},x{i},{si}" for i, (yi, si) in enumerate(zip(y, s, strict=True)))
    return _write(tmp_path, "Label,id,Score\n" + rows + "\n"), s, y


def test_json_output_equals_python_evaluate(csv_file: tuple[Path, np.ndarray, np.ndarray]) -> None:
    path, s, y = csv_file
    result = runner.invoke(
        cli, ["evaluate", str(path), "--pi0", "0.05", "--cost-ratio", "0.3", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == pytest.approx(
        evaluate(s, y, pi0=0.05, cost_ratio=0.3), rel=1e-15
    )


def test_table_output_is_aligned_and_shows_undefined(tmp_path: Path) -> None:
    path = _write(tmp_path, "score,label\n0.9,1\n0.7,1\n0.2,1\n")  # positives only
    result = runner.invoke(cli, ["evaluate", str(path), "--threshold", "0.5"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.split() == ["auc_roc", "undefined"] for line in lines)
    assert any(line.split() == ["recall", "0.666667"] for line in lines)
    assert len({len(line) for line in lines}) == 1  # one width: values right-aligned


def test_bad_line_is_reported_with_its_number(tmp_path: Path) -> None:
    path = _write(tmp_path, "score,label\n0.9,1\n0.7,yes\n")
    result = runner.invoke(cli, ["evaluate", str(path)])
    assert result.exit_code == 2
    assert "line 3" in result.output and "label" in result.output


def test_bad_option_is_reported(csv_file: tuple[Path, np.ndarray, np.ndarray]) -> None:
    result = runner.invoke(cli, ["evaluate", str(csv_file[0]), "--pi0", "1.5"])
    assert result.exit_code == 2
    assert "pi0" in result.output


@pytest.mark.parametrize(
    ("text", "field", "line"),
    [
        ("", "header", "line 1"),
        ("score,truth\n0.5,1\n", "header", "line 1"),
        ("score,label\n", "file", "no data rows"),
        ("score,label\n0.5,1\n0.5\n", "file", "line 3"),
        ("score,label\n0.5,1\nabc,0\n", "score", "line 3"),
        ("score,label\n0.5,1\n\n1.5,0\n", "score", "line 4"),
        ("score,label\nnan,1\n", "score", "line 2"),
        ("score,label\n0.5,2\n", "label", "line 2"),
    ],
)
def test_reader_errors_name_field_and_line(
    tmp_path: Path, text: str, field: str, line: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        read_scores_labels(_write(tmp_path, text))
    assert err.value.field == field
    assert line in err.value.reason


def test_reader_accepts_quotes_blank_lines_bom_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_bytes('\ufeff"label","score"\r\n"1","0.25"\r\n\r\n0,1\r\n1.0,0\r\n'.encode())
    s, y = read_scores_labels(path)
    assert s.tolist() == [0.25, 1.0, 0.0] and y.tolist() == [1, 0, 1]
    assert s.dtype == np.float64 and y.dtype == np.int8


def test_reader_fast_path(tmp_path: Path) -> None:
    s, y = read_scores_labels(_write(tmp_path, "score,label\n0.5,1\n0.25,0\n"))
    assert s.tolist() == [0.5, 0.25] and y.tolist() == [1, 0]


def test_format_metrics_json_and_empty() -> None:
    assert json.loads(format_metrics({"f1": 0.5, "mcc": None}, as_json=True)) == {
        "f1": 0.5,
        "mcc": None,
    }
    assert format_metrics({}, as_json=False) == ""
