"""The operators' commands against a real ``priorwatch serve`` (SQLite, worker in-process;
PostgreSQL for the idempotent ingest): ``ingest`` twice counts once, ``--force`` twice,
score-only files, ``.env``, ``models update``, ``keys list`` and the label-free columns
of ``windows``."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _e2e_support import ADMIN_TOKEN, Processes, free_port, iso, process_env, wait_ready
from test_cli_service import _wait_fresh, admin, run, service

from app.cli.service import EXIT_SERVICE, EXIT_USAGE

__all__ = ["service"]  # the module's server fixture, shared with test_cli_service

HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def _write(path: Path, columns: list[str], rows: list[list[Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        writer.writerows(rows)
    return path


def _rows(table: str) -> list[list[str]]:
    """The cells of a table's rows (below the header and its rule)."""
    return [line.split() for line in table.splitlines()[2:]]


def _sample(seed: int, n: int, prior: float) -> tuple[list[float], list[int]]:
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < prior).astype(int)
    scores = np.round(1 / (1 + np.exp(-(rng.normal(size=n) - 2 + 3 * labels))), 6)
    return [float(s) for s in scores], [int(y) for y in labels]


def _model(url: str, name: str, *extra: str) -> str:
    """Register ``name`` and return a key of it (both scopes)."""
    created = admin(url, "models", "create", name, "--pi0", "0.1", *extra)
    assert created.exit_code == 0, created.output
    return admin(url, "keys", "create", name).stdout.strip()


def _counts(url: str, token: str, name: str) -> list[tuple[str, int, int]]:
    """(start, n, n_unlabelled) of every window of the last day, as the service reads them."""
    since = ("--from", iso(HOUR - timedelta(hours=24)))
    result = run("windows", name, "--url", url, "--token", token, "--json", *since)
    assert result.exit_code == 0, result.output
    return [(w["start"], w["n"], w["n_unlabelled"]) for w in json.loads(result.stdout)["windows"]]


def _ingest_twice_then_force(url: str, tmp_path: Path) -> None:
    """The same file sent twice counts once; with --force it counts again."""
    token = _model(url, "cli-once", "--segment", "eu")
    scores, labels = _sample(1, 1200, 0.2)
    rows = [
        [iso(HOUR - timedelta(hours=2 - i % 2, seconds=-i)), "eu" if i % 3 else "", y, s]
        for i, (s, y) in enumerate(zip(scores, labels, strict=True))
    ]
    path = _write(tmp_path / "rows.csv", ["timestamp", "segment", "label", "score"], rows)
    ingest = ("ingest", str(path), "--model", "cli-once", "--url", url, "--token", token)

    first = run(*ingest)
    assert first.exit_code == 0, first.output
    assert "sent 1,200 labelled rows of rows.csv to cli-once in 4 chunks" in first.stdout
    once = _counts(url, token, "cli-once")
    assert [(n, u) for _, n, u in once] == [(600, 0), (600, 0)]

    again = run(*ingest)  # the service answers every chunk as a replay
    assert again.exit_code == 0, again.output
    assert _counts(url, token, "cli-once") == once

    forced = run(*ingest, "--force")
    assert forced.exit_code == 0, forced.output
    assert [(n, u) for _, n, u in _counts(url, token, "cli-once")] == [(1200, 0), (1200, 0)]


def test_ingest_the_same_file_twice_counts_it_once_and_force_again(
    service: str, tmp_path: Path
) -> None:
    _ingest_twice_then_force(service, tmp_path)


def test_ingest_once_on_postgres(
    processes: Processes, empty_postgres_url: str, tmp_path: Path
) -> None:
    """The same through ``priorwatch serve`` on PostgreSQL (no worker: reads count the
    batches not folded yet)."""
    env = process_env(empty_postgres_url)
    processes.run("migrate", ["migrate"], env)
    port = free_port()
    processes.start("serve", ["serve", "--port", str(port)], env)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, processes)
    _ingest_twice_then_force(url, tmp_path)


def test_a_score_only_file_makes_unlabelled_rows_once(service: str, tmp_path: Path) -> None:
    token = _model(service, "cli-scores")
    scores, _ = _sample(2, 500, 0.2)
    path = _write(tmp_path / "scores.csv", ["score"], [[s] for s in scores])
    ingest = ("ingest", str(path), "--model", "cli-scores", "--url", service, "--token", token)

    first = run(*ingest)
    assert first.exit_code == 0, first.output
    assert "sent 500 unlabelled rows" in first.stdout
    ((start, n, unlabelled),) = _counts(service, token, "cli-scores")
    assert (n, unlabelled) == (0, 500)

    # no timestamp column: the rows carry the time they are sent, so the resent batch
    # differs from the stored one; the service refuses its key, which says "already sent"
    again = run(*ingest)
    assert again.exit_code == 0, again.output
    assert "1 of them (500 rows) were sent before" in again.stderr
    assert _counts(service, token, "cli-scores") == [(start, 0, 500)]


def test_env_file_supplies_url_and_tokens(
    service: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service's .env in the working directory: option > environment > .env."""
    monkeypatch.chdir(tmp_path)
    for name in ("PRIORWATCH_URL", "PRIORWATCH_TOKEN", "PRIORWATCH_ADMIN_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert run("models", "list").exit_code == EXIT_USAGE  # no token anywhere
    (tmp_path / ".env").write_text(
        f"PRIORWATCH_URL={service}\nPRIORWATCH_ADMIN_TOKEN={ADMIN_TOKEN}\n", encoding="utf-8"
    )
    created = run("models", "create", "cli-env", "--pi0", "0.2")
    assert created.exit_code == 0, created.output
    assert json.loads(run("models", "show", "cli-env").stdout)["pi0"] == 0.2

    monkeypatch.setenv("PRIORWATCH_ADMIN_TOKEN", "x" * 20)  # the environment wins over .env
    assert "HTTP 401" in run("models", "show", "cli-env").output
    option = run("models", "show", "cli-env", "--admin-token", ADMIN_TOKEN)  # the option wins
    assert option.exit_code == 0, option.output


def test_models_update_round_trip_and_keys_list(service: str) -> None:
    _model(service, "cli-update", "--segment", "eu", "--sla", "f1>=0.6")
    reference = (iso(HOUR - timedelta(days=2)), iso(HOUR - timedelta(days=1)))
    updated = admin(
        service, "models", "update", "cli-update", "--pi0", "0.02", "--description", "v2",
        "--costs", "c_tp=0,c_fp=1,c_fn=9,c_tn=0", "--segment", "eu", "--segment", "us",
        "--sla", "recall>=0.4", "--drift-from", reference[0], "--drift-to", reference[1],
        "--drift-alpha", "0.05", "--drift-min-class-count", "40",
    )  # fmt: skip
    assert updated.exit_code == 0, updated.output
    doc = json.loads(updated.stdout)
    assert json.loads(admin(service, "models", "show", "cli-update").stdout) == doc
    assert (doc["pi0"], doc["description"], doc["segments"]) == (0.02, "v2", ["eu", "us"])
    assert doc["cost_ratio"] == pytest.approx(0.9)
    assert [(o["metric"], o["target"]) for o in doc["sla"]] == [("recall", 0.4)]
    drift = doc["drift"]
    assert (drift["reference"]["from"], drift["reference"]["to"]) == reference
    assert (drift["alpha"], drift["min_class_count"], drift["test_bins"]) == (0.05, 40, 20)

    # one drift setting changes, the others (the reference included) are kept
    again = admin(service, "models", "update", "cli-update", "--drift-test-bins", "10")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["drift"] == {**drift, "test_bins": 10}
    cleared = admin(
        service, "models", "update", "cli-update", "--no-drift-reference", "--no-sla",
        "--no-segments",
    )  # fmt: skip
    doc = json.loads(cleared.stdout)
    assert (doc["drift"]["reference"], doc["sla"], doc["segments"]) == (None, [], [])

    trailing = admin(service, "models", "update", "cli-update", "--drift-trailing-windows", "24")
    assert json.loads(trailing.stdout)["drift"]["reference"]["trailing_windows"] == 24
    contradiction = ("--no-drift-reference", "--drift-trailing-windows", "3")
    both = admin(service, "models", "update", "cli-update", *contradiction)
    assert both.exit_code == EXIT_USAGE and "--no-drift-reference" in both.output
    assert admin(service, "models", "update", "cli-update").exit_code == EXIT_USAGE
    both = admin(service, "models", "update", "cli-update", "--sla", "f1>=0.5", "--no-sla")
    assert both.exit_code == EXIT_USAGE and "--no-sla" in both.output
    bad_costs = admin(service, "models", "update", "cli-update", "--costs", "c_fp")
    assert bad_costs.exit_code == EXIT_USAGE and "NAME=NUMBER" in bad_costs.output
    refused = admin(service, "models", "update", "cli-update", "--pi0", "1.5")
    assert refused.exit_code == EXIT_SERVICE and "pi0" in refused.output
    kept = admin(service, "models", "update", "cli-update", "--retention", "90d")
    assert json.loads(kept.stdout)["retention"] == "90d", kept.output
    forever = admin(service, "models", "update", "cli-update", "--keep-everything")
    assert json.loads(forever.stdout)["retention"] is None, forever.output
    clash = ("--retention", "1d", "--keep-everything")
    both = admin(service, "models", "update", "cli-update", *clash)
    assert both.exit_code == EXIT_USAGE and "--keep-everything" in both.output

    revoked = json.loads(admin(service, "keys", "create", "cli-update", "--json").stdout)
    assert admin(service, "keys", "revoke", "cli-update", revoked["id"]).exit_code == 0
    listed = admin(service, "keys", "list", "cli-update")
    assert listed.exit_code == 0, listed.output
    rows = {row[0]: row for row in _rows(listed.stdout)}
    assert len(rows) == 2 and rows[revoked["id"]][2] == "ingest,read"
    assert rows[revoked["id"]][-1] != "-" and sum(r[-1] == "-" for r in rows.values()) == 1
    as_json = json.loads(admin(service, "keys", "list", "cli-update", "--json").stdout)
    assert {k["id"] for k in as_json} == set(rows)


def test_windows_show_unlabelled_rows_and_the_label_free_estimate(
    service: str, tmp_path: Path
) -> None:
    reference = HOUR - timedelta(hours=6)
    token = _model(
        service, "cli-estimate", "--body", str(_write_json(tmp_path, reference)),
    )  # fmt: skip
    scores, labels = _sample(3, 4000, 0.2)
    labelled = [
        [iso(reference + timedelta(hours=i % 2, seconds=i // 2)), y, s]
        for i, (s, y) in enumerate(zip(scores, labels, strict=True))
    ]
    path = _write(tmp_path / "labelled.csv", ["timestamp", "label", "score"], labelled)
    assert run("ingest", str(path), "--model", "cli-estimate", "--url", service,
               "--token", token).exit_code == 0  # fmt: skip
    later, _ = _sample(4, 3000, 0.2)
    at = iso(HOUR - timedelta(hours=2))
    path = _write(tmp_path / "scores.csv", ["timestamp", "score"], [[at, s] for s in later])
    assert run("ingest", str(path), "--model", "cli-estimate", "--url", service,
               "--token", token).exit_code == 0  # fmt: skip

    span = ("--from", iso(reference))
    windows = _wait_fresh(service, token, "cli-estimate", 3, *span)
    estimate = windows[2]["estimate"]
    assert estimate is not None and windows[2]["n_unlabelled"] == 3000
    table = run("windows", "cli-estimate", "--url", service, "--token", token, *span)
    assert table.exit_code == 0, table.output
    header = table.stdout.splitlines()[0].split()
    assert header[5:8] == ["unlabelled", "est_prior", "est_verdict"]
    rows = _rows(table.stdout)
    assert [r[5:8] for r in rows[:2]] == [["0", "-", "-"]] * 2
    assert rows[2][5:8] == [
        "3000", f"{estimate['prior']['value']:.4f}", estimate["fit"]["verdict"]
    ]  # fmt: skip


def _write_json(tmp_path: Path, reference: datetime) -> Path:
    """A model body whose drift reference is the two hours from ``reference``."""
    path = tmp_path / "model.json"
    period = {"from": iso(reference), "to": iso(reference + timedelta(hours=2))}
    path.write_text(json.dumps({"drift": {"reference": period}}), encoding="utf-8")
    return path
