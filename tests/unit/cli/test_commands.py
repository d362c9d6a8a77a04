"""The ``priorwatch`` command tree without a service: help, version, exit codes,
option parsing, and the input files of ``ingest``."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from app.cli import cli, ingest
from app.cli.admin import parse_objective
from app.cli.ingest import (
    LabelledRows,
    chunk_key,
    chunks,
    group_rows,
    read_csv_rows,
    read_parquet_rows,
)
from app.cli.read import report_format
from app.cli.sending import sent_before
from app.cli.service import EXIT_SERVICE, EXIT_UNREACHABLE, EXIT_USAGE
from app.errors import InvalidInput
from priorwatch_client import ApiError, DeliveryError, UndeliveredBatch

runner = CliRunner()


def _command_paths() -> list[list[str]]:
    """Every command and group of the tree, as argument lists."""
    paths: list[list[str]] = [[]]

    def walk(command: Any, prefix: list[str]) -> None:
        # typer's command classes may not be click's: look for subcommands by duck typing
        for name, sub in getattr(command, "commands", {}).items():
            paths.append([*prefix, name])
            walk(sub, [*prefix, name])

    walk(get_command(cli), [])
    return paths


def test_every_command_is_there() -> None:
    names = {" ".join(p) for p in _command_paths()}
    assert {
        "models create", "models list", "models show", "models update", "models delete",
        "keys create", "keys list", "keys revoke",
        "ingest", "windows", "sla", "simulate", "serve", "worker", "migrate", "ops", "evaluate",
    } <= names  # fmt: skip


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "priorwatch")
def test_help_shows_flags_without_a_placeholder_and_the_exit_codes(path: list[str]) -> None:
    result = runner.invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    assert "Exit codes:" in result.output or path[:1] in (
        ["serve"],
        ["worker"],
        ["migrate"],
        ["ops"],
        ["evaluate"],
    )


def test_flags_render_as_flags() -> None:
    out = runner.invoke(cli, ["simulate", "--help"]).output
    assert "--per-window / --phases-only" in out
    assert "  --html " in runner.invoke(cli, ["sla", "--help"]).output


def test_version() -> None:
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"priorwatch {version('priorwatch')}"


@pytest.mark.parametrize(
    ("fmt", "html", "output", "expected"),
    [
        (None, False, None, "json"),
        (None, True, None, "html"),
        ("csv", False, None, "csv"),
        (None, False, Path("r.CSV"), "csv"),
        (None, False, Path("r.htm"), "html"),
        (None, False, Path("r.html"), "html"),
        (None, False, Path("r.txt"), "json"),
        ("json", False, Path("r.html"), "json"),
        ("html", True, None, "html"),
    ],
)
def test_report_format(fmt: str | None, html: bool, output: Path | None, expected: str) -> None:
    assert report_format(fmt, html, output) == expected


@pytest.mark.parametrize(("fmt", "html"), [("xml", False), ("csv", True)])
def test_report_format_refuses_contradictions(fmt: str, html: bool) -> None:
    with pytest.raises(typer.Exit) as caught:
        report_format(fmt, html, None)
    assert caught.value.exit_code == EXIT_USAGE


def test_parse_objective() -> None:
    assert parse_objective("f1>=0.6") == {"metric": "f1", "op": ">=", "target": 0.6}
    assert parse_objective(" fpr <= 1e-2 ") == {"metric": "fpr", "op": "<=", "target": 0.01}
    assert parse_objective("mcc@t=0.3>=0.2")["metric"] == "mcc@t=0.3"
    for bad in ("f1>0.6", "f1>=", ">=0.5", "f1>=x", "f1>=1.2.3", "f1>=e"):
        with pytest.raises(typer.BadParameter):
            parse_objective(bad)


def test_admin_command_without_a_token_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRIORWATCH_ADMIN_TOKEN", raising=False)
    result = runner.invoke(cli, ["models", "list"])
    assert result.exit_code == EXIT_USAGE
    assert "PRIORWATCH_ADMIN_TOKEN" in result.output


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("text", "reason"), [("{not json", "not JSON"), ("[1, 2]", "the JSON is not an object")]
)
def test_models_create_refuses_a_bad_body_file(tmp_path: Path, text: str, reason: str) -> None:
    body = tmp_path / "model.json"
    body.write_text(text, encoding="utf-8")
    # refused before any request: the closed port is never reached
    url = f"http://127.0.0.1:{_closed_port()}"
    args = ["models", "create", "m", "--pi0", "0.1", "--body", str(body), "--url", url]
    result = runner.invoke(cli, [*args, "--admin-token", "t" * 32])
    assert result.exit_code == EXIT_USAGE, result.output
    assert reason in result.output


def test_unreachable_service_exits_3() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    result = runner.invoke(cli, ["models", "list", "--url", url, "--admin-token", "t" * 32])
    assert result.exit_code == EXIT_UNREACHABLE, result.output
    assert "cannot reach the service" in result.output
    assert EXIT_SERVICE == 1


def test_csv_error_shows_the_header_found(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("prob,target\n0.3,1\n", encoding="utf-8")
    result = runner.invoke(cli, ["ingest", str(path), "--model", "m", "--token", "t"])
    assert result.exit_code == EXIT_USAGE
    assert "'prob,target'" in result.output
    result = runner.invoke(cli, ["evaluate", str(path)])
    assert result.exit_code == EXIT_USAGE and "'prob,target'" in result.output


def test_csv_rows_with_optional_columns(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text(
        "Segment,score,label,Timestamp\n"
        "eu,0.9,1,2026-11-26T10:15:00Z\n"
        "\n"
        ",0.1,0,2026-11-26T10:20:00\n",
        encoding="utf-8",
    )
    rows = read_csv_rows(path)
    assert rows.scores.tolist() == [0.9, 0.1]
    assert rows.labels.tolist() == [1, 0]
    assert rows.timestamps == ["2026-11-26T10:15:00Z", "2026-11-26T10:20:00"]
    assert rows.segments == ["eu", ""]


def test_grouping_by_window_and_segment() -> None:
    stamps = [
        "2026-11-26T10:59:59Z",
        "2026-11-26T10:00:00",  # no offset: UTC
        "2026-11-26T12:30:00+01:00",  # 11:30 UTC
        "2026-11-26T11:05:00Z",
        "2026-11-26T10:30:00Z",
    ]
    rows = LabelledRows(
        np.linspace(0.1, 0.5, 5),
        np.array([1, 0, 1, 0, 1]),
        stamps,
        ["eu", "eu", "", "", "us"],
    )
    groups = group_rows(rows, "1h")
    summary = [(g.timestamp, g.segment, g.rows.tolist()) for g in groups]
    assert summary == [
        (datetime(2026, 11, 26, 10, tzinfo=UTC), "eu", [0, 1]),
        (datetime(2026, 11, 26, 10, 30, tzinfo=UTC), "us", [4]),
        (datetime(2026, 11, 26, 11, 5, tzinfo=UTC), None, [2, 3]),
    ]


def test_grouping_without_timestamps_and_a_bad_time() -> None:
    rows = LabelledRows(np.array([0.2, 0.4]), np.array([0, 1]), None, None)
    [group] = group_rows(rows, "1h")
    assert (group.timestamp, group.segment, group.rows.tolist()) == (None, None, [0, 1])
    bad = LabelledRows(np.array([0.2, 0.4]), np.array([0, 1]), ["2026-11-26T10:00Z", "soon"], None)
    with pytest.raises(InvalidInput) as caught:
        group_rows(bad, "1h")
    assert caught.value.field == "timestamp"
    assert "data row 2" in caught.value.reason and "'soon'" in caught.value.reason


def test_parquet_without_pyarrow_says_how_to_get_it(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    path = tmp_path / "rows.parquet"
    path.write_bytes(b"PAR1")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(typer.Exit) as caught:
            read_parquet_rows(path)
        assert caught.value.exit_code == EXIT_USAGE
        result = runner.invoke(cli, ["ingest", str(path), "--model", "m", "--token", "t"])
        assert result.exit_code == EXIT_USAGE and "pip install pyarrow" in result.output
    else:
        pytest.skip("pyarrow is installed: the Parquet path is tested against the service")


def test_a_csv_without_labels_is_scores_only(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    path.write_text("Score,Timestamp\n0.9,2026-11-26T10:15:00Z\n\n0.25,\n", encoding="utf-8")
    rows = read_csv_rows(path)
    assert rows.scores.tolist() == [0.9, 0.25] and rows.labels is None
    assert rows.timestamps == ["2026-11-26T10:15:00Z", ""]
    path.write_text("score\n0.5\n1.5\n", encoding="utf-8")
    with pytest.raises(InvalidInput) as caught:
        read_csv_rows(path)
    assert (caught.value.field, caught.value.reason) == ("score", "line 3: '1.5' is outside [0, 1]")
    result = runner.invoke(cli, ["evaluate", str(path)])  # evaluate still needs labels
    assert result.exit_code == EXIT_USAGE and "no column named 'label'" in result.output


def test_chunks_and_their_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest, "CHUNK_ROWS", 2)
    rows = LabelledRows(np.linspace(0.1, 0.5, 5), None, None, ["", "eu", "", "", "eu"])
    parts = chunks(group_rows(rows, "1h"))
    assert [(g.segment, part.tolist()) for g, part in parts] == [
        (None, [0, 2]), (None, [3]), ("eu", [1, 4])
    ]  # fmt: skip
    digest = "ab" * 32
    assert chunk_key(digest, "fraud", 1) == f"ingest:fraud:{digest}:2:1"
    keys = {chunk_key(d, m, i) for d in (digest, "cd" * 32) for m in ("a", "b") for i in (0, 1)}
    assert len(keys) == 8 and all(len(k) <= 255 and k.isascii() for k in keys)


class _Flushing:
    """A client whose flush raises ``error``."""

    def __init__(self, error: DeliveryError) -> None:
        self.error = error

    def flush(self) -> None:
        raise self.error


def _refused(key: str, problem_type: str) -> tuple[UndeliveredBatch, ApiError]:
    batch = UndeliveredBatch("m", key, b"{}", 10)
    return batch, ApiError(422, {"type": f"urn:priorwatch:problem:{problem_type}"}, "POST")


def test_sent_before_keeps_only_reused_keys_and_raises_the_rest() -> None:
    reused, other = _refused("k1", "idempotency-key-reused"), _refused("k2", "invalid-input")
    both = DeliveryError((reused[0], other[0]), (reused[1], other[1]))
    with pytest.raises(DeliveryError) as caught:
        sent_before(_Flushing(both))
    assert [b.idempotency_key for b in caught.value.batches] == ["k2"]
    only = DeliveryError((reused[0],), (reused[1],))
    assert sent_before(_Flushing(only)) == [reused[0]]


class _Stub:
    """``httpx.request`` answering ``status`` (204, or a 404 problem) and recording calls."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.calls: list[tuple[str, str]] = []

    def __call__(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        self.calls.append((method, url))
        if self.status == 204:
            return httpx.Response(204)
        problem = {"type": "urn:priorwatch:problem:model-not-found", "title": "Not Found",
                   "status": 404, "detail": "no model 'fraud'"}  # fmt: skip
        return httpx.Response(404, json=problem, headers={"Content-Type": PROBLEM_JSON})


PROBLEM_JSON = "application/problem+json"


@pytest.mark.parametrize(
    ("args", "answer", "status", "calls", "code", "shown"),
    [
        (["--yes"], "", 204, 1, 0, "deleted fraud"),
        ([], "y\n", 204, 1, 0, "deleted fraud"),
        ([], "n\n", 204, 0, 1, "Aborted"),
        (["-y"], "", 404, 1, EXIT_SERVICE, "HTTP 404 Not Found: no model 'fraud'"),
    ],
)
def test_models_delete_asks_then_deletes(
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    answer: str,
    status: int,
    calls: int,
    code: int,
    shown: str,
) -> None:
    """Against DELETE /v1/models/{name}'s contract (204; 404 problem+json), stubbed:
    the route is not on this branch."""
    stub = _Stub(status)
    monkeypatch.setattr(httpx, "request", stub)
    cmd = ["models", "delete", "fraud", "--url", "http://pw", "--admin-token", "t" * 32, *args]
    result = runner.invoke(cli, cmd, input=answer)
    assert result.exit_code == code, result.output
    assert shown in result.output
    assert stub.calls == [("DELETE", "http://pw/v1/models/fraud")] * calls
