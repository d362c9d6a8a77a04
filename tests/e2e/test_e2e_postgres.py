"""The PostgreSQL deployment of a user: a fresh database, ``priorwatch migrate``,
``priorwatch serve`` and two ``priorwatch worker`` processes, over real HTTP.

A shorter path than the SQLite one (tests/e2e/test_e2e_sqlite.py): a trailing
reference of one window; a stable hour, a pure prior shift after it, an empty
hour, a stable hour, a likelihood shift after it; two batches per hour.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
import orjson
import pytest
from _e2e_support import (
    HTTP_TIMEOUT,
    Process,
    Processes,
    UserPath,
    assert_problem,
    assert_server_stopped_cleanly,
    check_drift_directions,
    free_port,
    iso,
    plan,
    process_env,
    scrape,
    wait_ready,
)
from _metric_compare import assert_matches_evaluate

pytestmark = pytest.mark.postgres

MODEL = "churn-model"
PLAN = plan(
    [(0, "stable"), (1, "prior"), (3, "stable"), (4, "likelihood")],
    batches_per_window=2,
    rows_per_batch=2500,
)
SEED = 5432
WORKERS = 2


def _stop_worker(worker: Process) -> int:
    """SIGTERM: the worker finishes its window and exits 0; returns the jobs it ran."""
    code = worker.stop()
    assert code == 0, f"{worker.name} exited {code}:\n{worker.log()}"
    worker.assert_clean_log()
    found = re.search(r"worker loop stopped: (\d+) jobs run", worker.log_path.read_text())
    assert found, worker.log()
    return int(found.group(1))


def test_postgres_deployment_user_path(processes: Processes, empty_postgres_url: str) -> None:
    env = process_env(empty_postgres_url)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # before the migrations the API refuses to start, and says what to run
    refused = processes.run("serve", ["serve", "--port", str(port)], env, status=3)
    assert "never migrated" in refused and "priorwatch migrate" in refused, refused
    out = processes.run("migrate", ["migrate"], env)
    assert "database at head" in out
    server = processes.start("serve", ["serve", "--port", str(port)], env)
    wait_ready(base, processes)
    workers = [processes.start(f"worker-{i}", ["worker"], env) for i in range(WORKERS)]

    with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT) as http:
        first = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=8)
        user = UserPath(http, MODEL, first, timedelta(hours=1))
        user.register(
            sla=[{"metric": "f1", "op": ">=", "target": 0.7}],
            drift={"reference": {"trailing_windows": 1}},
        )
        user.post_plan(PLAN, np.random.default_rng(SEED))

        original = user.posted[0]
        r = user.send(original.body, original.key)
        assert (r.status_code, r.headers.get("idempotent-replayed")) == (202, "true")
        assert r.json() == original.answer
        bad = orjson.loads(original.body)
        bad["scores"][3] = -0.25
        assert_problem(user.send(orjson.dumps(bad), "bad-batch"), 422, "invalid-input", "scores")

        windows = user.wait_all_fresh(len(PLAN.windows), processes, (None,))[None]
        assert [w["start"] for w in windows] == [iso(user.start(p.offset)) for p in PLAN.windows]
        for w, p in zip(windows, PLAN.windows, strict=True):
            _, labels = user.raw(p.offset)
            assert (w["n"], w["positives"]) == (labels.size, int(labels.sum()))
            assert_matches_evaluate(w["metrics"], user.expected(p.offset))
        # a window after an empty hour has an empty trailing reference
        for offset in (0, 3):
            drift = windows[[p.offset for p in PLAN.windows].index(offset)]["drift"]
            assert drift["status"] == "insufficient_data", drift
        check_drift_directions(windows, PLAN)

        report = user.get("/sla", **{"from": iso(first)})
        assert report["objectives"][0]["evaluated_as"] == "calibrated_f1"
        statuses = [w["status"] for w in report["windows"]]
        assert statuses == ["met", "met", "met", "breached"]  # prior shift: still met at pi0
        assert windows[1]["metrics"]["f1"] < 0.7  # ... although the raw F1 is below target

        _, get = scrape(http)
        assert get("priorwatch_batches_ingested_total", model=MODEL) == len(user.posted)
        rows = sum(p.scores.size for p in user.posted)
        assert get("priorwatch_predictions_ingested_total", model=MODEL) == rows
        assert get("priorwatch_batches_rejected_total", reason="invalid_input") == 1
        assert get("priorwatch_dirty_windows") == 0
        assert get("priorwatch_drift_flag", model=MODEL, segment="all", kind="likelihood") == 1

    jobs = [_stop_worker(w) for w in workers]
    assert sum(jobs) >= len(PLAN.windows)
    assert_server_stopped_cleanly(server)
