"""The commands that talk to a service, run in-process (typer's CliRunner) against a
real ``priorwatch serve`` (SQLite, worker in-process) over HTTP: models, keys,
ingest, windows, sla (JSON, CSV, HTML) and simulate."""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from _e2e_support import ADMIN_TOKEN, Processes, free_port, iso, process_env, wait_ready
from click.testing import Result
from typer.testing import CliRunner

from app.cli import cli
from app.cli.service import EXIT_SERVICE, EXIT_UNREACHABLE, EXIT_USAGE
from app.demo.scenario import DEGRADATION, RETURN, STABLE, WAVE
from app.metrics import evaluate

runner = CliRunner()
FRESH_SECONDS = 120.0


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of one ``priorwatch serve`` shared by this module's tests."""
    processes = Processes(tmp_path_factory.mktemp("cli-service"))
    env = process_env(f"sqlite:///{processes.workdir / 'priorwatch.db'}")
    try:
        processes.run("migrate", ["migrate"], env)
        port = free_port()
        processes.start("serve", ["serve", "--port", str(port)], env)
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, processes)
        yield url
    finally:
        processes.kill_all()


def run(*args: str) -> Result:
    """``priorwatch ARGS`` in-process; its exit code and output are the result."""
    return runner.invoke(cli, list(args), catch_exceptions=False)


def admin(url: str, *args: str) -> Result:
    return run(*args, "--url", url, "--admin-token", ADMIN_TOKEN)


def _wait_fresh(url: str, token: str, model: str, expected: int, *extra: str) -> list[Any]:
    deadline = time.monotonic() + FRESH_SECONDS
    while True:
        result = run("windows", model, "--url", url, "--token", token, "--json", *extra)
        assert result.exit_code == 0, result.output
        windows = json.loads(result.stdout)["windows"]
        if len(windows) == expected and all(w["status"] == "fresh" for w in windows):
            return list(windows)
        assert time.monotonic() < deadline, f"windows not fresh: {windows}"
        time.sleep(0.3)


def test_models_and_keys(service: str) -> None:
    created = admin(
        service, "models", "create", "cli-model", "--pi0", "0.05", "--segment", "eu",
        "--sla", "f1>=0.6", "--sla", "recall>=0.5", "--window", "15m",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    model = json.loads(created.stdout)
    assert (model["name"], model["pi0"], model["window"], model["segments"]) == (
        "cli-model", 0.05, "15m", ["eu"]
    )  # fmt: skip
    # the service may store more per objective (how it is judged): compare what was sent
    sent = [{k: o[k] for k in ("metric", "op", "target")} for o in model["sla"]]
    assert sent == [
        {"metric": "f1", "op": ">=", "target": 0.6},
        {"metric": "recall", "op": ">=", "target": 0.5},
    ]

    again = admin(service, "models", "create", "cli-model", "--pi0", "0.05")
    assert again.exit_code == EXIT_SERVICE
    assert "HTTP 409" in again.output

    listed = admin(service, "models", "list")
    assert listed.exit_code == 0
    row = next(line.split() for line in listed.stdout.splitlines() if line.startswith("cli-model"))
    assert row == ["cli-model", "15m", "0.05", "0.5", "eu", "2"]
    assert json.loads(admin(service, "models", "show", "cli-model").stdout) == model

    missing = admin(service, "models", "show", "no-such-model")
    assert missing.exit_code == EXIT_SERVICE and "HTTP 404" in missing.output

    key = admin(service, "keys", "create", "cli-model", "--scope", "read", "--json")
    assert key.exit_code == 0, key.output
    doc = json.loads(key.stdout)
    assert doc["scopes"] == ["read"]
    token = doc["token"]
    reading = run("windows", "cli-model", "--url", service, "--token", token)
    assert reading.exit_code == 0, reading.output
    assert reading.stdout == "" and "no window holds data" in reading.stderr

    revoked = admin(service, "keys", "revoke", "cli-model", doc["id"])
    assert revoked.exit_code == 0 and doc["id"] in revoked.stdout
    refused = run("windows", "cli-model", "--url", service, "--token", token)
    assert refused.exit_code == EXIT_SERVICE and "HTTP 401" in refused.output


def test_models_create_from_a_body_file_and_list_as_json(service: str, tmp_path: Path) -> None:
    body = tmp_path / "model.json"
    body.write_text(
        json.dumps({"pi0": 0.5, "description": "from a file", "drift": {"alpha": 0.05}}),
        encoding="utf-8",
    )
    created = admin(
        service, "models", "create", "cli-body", "--pi0", "0.02", "--cost-ratio", "0.8",
        "--body", str(body),
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    model = json.loads(created.stdout)
    # the file's settings are kept, the options override it (pi0 from --pi0, not the file)
    assert (model["description"], model["drift"]["alpha"]) == ("from a file", 0.05)
    assert (model["pi0"], model["cost_ratio"]) == (0.02, 0.8)

    listed = admin(service, "models", "list", "--json")
    assert listed.exit_code == 0, listed.output
    by_name = {m["name"]: m for m in json.loads(listed.stdout)}
    assert by_name["cli-body"]["cost_ratio"] == 0.8


def _write_csv(path: Path, rows: list[tuple[float, int, str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["timestamp", "segment", "label", "score"])
        for score, label, at, segment in rows:
            writer.writerow([at, segment, label, repr(score)])


def test_ingest_then_windows_and_the_sla_report(service: str, tmp_path: Path) -> None:
    created = admin(
        service, "models", "create", "cli-ingest", "--pi0", "0.1", "--segment", "eu",
        "--sla", "precision>=0.5",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    token = admin(service, "keys", "create", "cli-ingest").stdout.strip()

    rng = np.random.default_rng(20261126)
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    rows: list[tuple[float, int, str, str]] = []
    for h in range(2):
        labels = (rng.random(3000) < 0.2).astype(int)
        scores = np.round(1 / (1 + np.exp(-(rng.normal(size=3000) - 2 + 3 * labels))), 6)
        for i, (s, y) in enumerate(zip(scores, labels, strict=True)):
            at = hour + timedelta(hours=h, seconds=int(i))
            # every other row has no offset: read as UTC
            text = iso(at) if i % 2 else at.replace(tzinfo=None).isoformat()
            rows.append((float(s), int(y), text, "eu" if i % 3 == 0 else ""))
    path = tmp_path / "rows.csv"
    _write_csv(path, rows)

    result = run("ingest", str(path), "--model", "cli-ingest", "--url", service, "--token", token)
    assert result.exit_code == 0, result.output
    assert "sent 6,000 labelled rows" in result.stdout

    span = ("--from", iso(hour), "--to", iso(hour + timedelta(hours=2)))
    windows = _wait_fresh(service, token, "cli-ingest", 2, *span)
    for h, w in enumerate(windows):
        mine = rows[h * 3000 : (h + 1) * 3000]
        assert w["start"] == iso(hour + timedelta(hours=h))
        assert w["n"] == 3000
        assert w["positives"] == sum(y for _, y, _, _ in mine)
        expected = evaluate(
            np.array([s for s, _, _, _ in mine]), np.array([y for _, y, _, _ in mine]), pi0=0.1
        )
        assert w["metrics"]["precision"] == pytest.approx(expected["precision"], abs=1e-12)
        assert w["metrics"]["calibrated_precision"] == pytest.approx(
            expected["calibrated_precision"], abs=1e-9
        )
    eu = _wait_fresh(service, token, "cli-ingest", 2, *span, "--segment", "eu")
    assert [w["n"] for w in eu] == [1000, 1000]

    table = run("windows", "cli-ingest", "--url", service, "--token", token, *span)
    lines = table.stdout.splitlines()
    assert lines[0].split()[:5] == ["start", "n", "prior", "status", "verdict"]
    assert len(lines) == 4 and lines[2].split()[:2] == [windows[0]["start"], "3000"]

    report = run("sla", "cli-ingest", "--url", service, "--token", token, *span)
    assert report.exit_code == 0, report.output
    doc = json.loads(report.stdout)
    assert [w["start"] for w in doc["windows"]] == [w["start"] for w in windows]

    csv_path = tmp_path / "sla.csv"
    result = run(
        "sla", "cli-ingest", "--url", service, "--token", token, *span, "-o", str(csv_path)
    )
    assert result.exit_code == 0, result.output
    parsed = list(csv.DictReader(io.StringIO(csv_path.read_text(encoding="utf-8"))))
    assert [r["status"] for r in parsed] == [w["status"] for w in doc["windows"]]

    html_path = tmp_path / "sla.out"
    result = run(
        "sla", "cli-ingest", "--url", service, "--token", token, *span, "--html", "-o",
        str(html_path),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    page = html_path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "SLA report: cli-ingest" in page
    assert page.count('<rect x="') == 2  # one status cell per window

    # the API itself: a browser's Accept header gets the page
    browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    r = httpx.get(
        f"{service}/v1/models/cli-ingest/sla",
        params={"from": iso(hour), "to": iso(hour + timedelta(hours=2))},
        headers={"Authorization": f"Bearer {token}", "Accept": browser},
    )
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert r.text == page


def _table_rows(output: str, first_column: str) -> list[list[str]]:
    """The rows of the table whose header starts with ``first_column``."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first_column))
    rows = []
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        rows.append(line)
    return [r.split("  ") for r in rows]


def test_simulate_shows_prior_shift_and_degradation(service: str) -> None:
    result = admin(service, "simulate", "--model", "demo", "--seed", "7")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "model demo registered" in out

    per_window = [
        [cell.strip() for cell in row if cell.strip()] for row in _table_rows(out, "window (UTC)")
    ]
    assert len(per_window) == 24
    # columns: start, phase, prior, precision, precision@pi0, auc_pr, auc_pr@pi0, recall,
    # prior (scores only), label-free, verdict, sla
    by_phase: dict[str, list[list[str]]] = {}
    for row in per_window:
        by_phase.setdefault(row[1], []).append(row)

    def mean(phase: str, column: int) -> float:
        return float(np.mean([float(r[column]) for r in by_phase[phase]]))

    assert {r[-2] for r in by_phase[STABLE]} == {"reference"}
    assert {r[-2] for r in by_phase[WAVE]} == {"prior"}
    assert {r[-2] for r in by_phase[RETURN]} == {"none"}
    assert {r[-2] for r in by_phase[DEGRADATION]} == {"likelihood"}
    assert {r[-1] for r in by_phase[WAVE]} == {"met"}
    assert {r[-1] for r in by_phase[DEGRADATION]} == {"breached"}
    # before the labels: the reference windows have no estimate (they are the
    # reference); the scores alone explain the wave by the prior and estimate it
    # close to the labelled one; the frauds' scores sinking toward the
    # legitimate ones reads, without labels, as fewer frauds (the estimate's
    # known blind spot, docs/estimation.md): only the labels show the degradation
    assert {r[-3] for r in by_phase[STABLE]} == {"-"}
    assert {r[-3] for r in by_phase[WAVE]} == {"prior"}
    assert {r[-3] for r in by_phase[RETURN]} == {"none"}
    for r in by_phase[WAVE] + by_phase[RETURN]:
        assert abs(float(r[-4]) - float(r[2])) < 0.01, r
    assert mean(DEGRADATION, -4) < 0.7 * mean(DEGRADATION, 2)

    # raw precision and AUC-PR swing in the wave; their values at pi0 hold
    assert mean(WAVE, 3) - mean(STABLE, 3) > 0.1
    assert mean(WAVE, 5) - mean(STABLE, 5) > 0.07
    assert abs(mean(WAVE, 4) - mean(STABLE, 4)) < 0.04
    assert abs(mean(WAVE, 6) - mean(STABLE, 6)) < 0.04
    assert mean(DEGRADATION, 4) < mean(STABLE, 4) - 0.15

    phases = [row[0].strip() for row in _table_rows(out, "phase")]
    assert phases == [STABLE, WAVE, RETURN, DEGRADATION]
    assert "compliance 75%" in out

    shown = json.loads(admin(service, "models", "show", "demo").stdout)
    reference = shown["drift"]["reference"]
    first = datetime.fromisoformat(reference["from"])
    assert datetime.fromisoformat(reference["to"]) - first == timedelta(hours=8)


def test_simulate_with_delayed_labels_prints_each_delivery_stage(service: str) -> None:
    result = admin(
        service, "simulate", "--model", "late-demo", "--seed", "11",
        "--rows-per-window", "4000", "--phases-only", "--delayed-labels",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = [
        [cell.strip() for cell in row if cell.strip()]
        for row in _table_rows(result.stdout, "labels delivered")
    ]
    assert [r[0] for r in rows] == ["day 1", "day 3", "day 7", "all"]
    completeness = [float(r[1]) for r in rows]
    labelled, truth = [float(r[2]) for r in rows], {r[4] for r in rows}
    assert completeness == sorted(completeness) and completeness[-1] == 1.0
    assert completeness[0] < 0.3  # about a sixth of the negatives, half the frauds
    (true_prior,) = truth
    # frauds are reported first: the labelled prior overstates the truth, less and less,
    # and equals it once every label is in (the service's counts against the simulation's)
    assert labelled[0] > 1.5 * float(true_prior)
    assert labelled == sorted(labelled, reverse=True)
    assert rows[-1][2] == true_prior
    # the completed prior (the windows' stored maturity, class assumption: the default)
    # is close to the truth from the first day on, and equal to it once the labels are in
    completed = [float(r[3]) for r in rows]
    for value, biased in zip(completed[:-1], labelled[:-1], strict=True):
        assert abs(value - float(true_prior)) < abs(biased - float(true_prior)) / 3
    assert rows[-1][3] == true_prior
    # the usual tables follow, from the windows once every label arrived
    phases = [row[0].strip() for row in _table_rows(result.stdout, "phase")]
    assert phases == [STABLE, WAVE, RETURN, DEGRADATION]


def test_ingest_errors_and_progress(service: str, tmp_path: Path) -> None:
    created = admin(service, "models", "create", "cli-errors", "--pi0", "0.1", "--segment", "eu")
    assert created.exit_code == 0, created.output
    token = admin(service, "keys", "create", "cli-errors").stdout.strip()
    reader = admin(service, "keys", "create", "cli-errors", "--scope", "read").stdout.strip()

    rng = np.random.default_rng(5)
    n = 120_000
    labels = (rng.random(n) < 0.1).astype(int)
    scores = np.round(rng.random(n), 6)
    big = tmp_path / "big.csv"
    np.savetxt(big, np.column_stack([scores, labels]), fmt=["%.6f", "%d"], delimiter=",",
               header="score,label", comments="")  # fmt: skip
    args = ("--model", "cli-errors", "--url", service)

    # a key without the ingest scope: the service refuses the batch (exit 1)
    refused = run("ingest", str(big), *args, "--token", reader)
    assert refused.exit_code == EXIT_SERVICE and "403" in refused.output

    # large files show a progress bar on stderr; every row is counted once
    result = run("ingest", str(big), *args, "--token", token)
    assert result.exit_code == 0, result.output
    assert "sending" in result.stderr
    now = datetime.now(UTC)
    span = ("--from", iso(now - timedelta(hours=1)), "--to", iso(now + timedelta(hours=1)))
    windows = _wait_fresh(service, token, "cli-errors", 1, *span)
    assert (windows[0]["n"], windows[0]["positives"]) == (n, int(labels.sum()))

    # a segment the model does not have: a usage error, nothing sent
    bad = tmp_path / "bad-segment.csv"
    bad.write_text("score,label,segment\n0.5,1,apac\n", encoding="utf-8")
    result = run("ingest", str(bad), *args, "--token", token)
    assert result.exit_code == EXIT_USAGE and "'apac'" in result.output

    unknown = run("ingest", str(bad), "--model", "nope", "--url", service, "--token", token)
    assert unknown.exit_code == EXIT_SERVICE

    down = f"http://127.0.0.1:{free_port()}"
    result = run("ingest", str(bad), "--model", "cli-errors", "--url", down, "--token", token)
    assert result.exit_code == EXIT_UNREACHABLE
    assert _wait_fresh(service, token, "cli-errors", 1, *span)[0]["n"] == n
