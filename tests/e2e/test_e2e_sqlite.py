"""A user's whole path on the embedded deployment: ``priorwatch migrate`` then
``priorwatch serve`` (API + in-process worker) on a SQLite file, over real HTTP.

Seeded scenario (tests/e2e/_e2e_support.py): three stable hours (the model's
fixed drift reference), two hours where only the class prior falls from 0.2
to 0.02, two hours where the positives' scores move towards the negatives'
(P(s|y) shifts, the prior does not). Two batches per hour, one per segment.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from _e2e_support import (
    HTTP_TIMEOUT,
    PI0,
    VERDICTS,
    Labels,
    Processes,
    Scores,
    UserPath,
    assert_problem,
    assert_server_stopped_cleanly,
    check_drift_directions,
    free_port,
    iso,
    plan,
    population_f1,
    population_precision,
    population_rates,
    process_env,
    scrape,
    simulate,
    wait_ready,
)
from _metric_compare import assert_matches_evaluate

from app.exporter import names
from app.exporter.exposition import COMPACT_METRICS

MODEL = "fraud-scorer"
SEGMENTS = ("eu", "us")
PLAN = plan(
    [
        (0, "stable"),
        (1, "stable"),
        (2, "stable"),
        (3, "prior"),
        (4, "prior"),
        (5, "likelihood"),
        (6, "likelihood"),
    ],
    batches_per_window=2,
    rows_per_batch=2500,
)
REFERENCE_WINDOWS = 3
EMPTY_OFFSET = 8
"""A window that only ever receives rejected batches: it must never appear."""
OBJECTIVES = [
    {"metric": "f1", "op": ">=", "target": 0.7},
    {"metric": "recall", "op": ">=", "target": 0.6},
]
SEED = 20261126
POPULATION_TOLERANCE = 0.06
"""Window value vs population value (5,000 rows, >= 100 positives per window)."""


def _first_window() -> datetime:
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    return now - timedelta(hours=12)


def test_embedded_sqlite_user_path(processes: Processes) -> None:
    env = process_env(f"sqlite:///{processes.workdir / 'priorwatch.db'}")
    out = processes.run("migrate", ["migrate"], env)
    assert "database at head" in out
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = processes.start("serve", ["serve", "--port", str(port)], env)
    wait_ready(base, processes)

    with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        first = _first_window()
        user = UserPath(http, MODEL, first, timedelta(hours=1))
        user.register(
            segments=list(SEGMENTS),
            sla=OBJECTIVES,
            drift={
                "reference": {
                    "from": iso(first),
                    "to": iso(user.start(REFERENCE_WINDOWS)),
                }
            },
        )
        rng = np.random.default_rng(SEED)
        user.post_plan(PLAN, rng, SEGMENTS)
        replayed = _replay_and_reuse(user)
        rejected = _bad_input_stores_nothing(user, rng)

        fresh = user.wait_all_fresh(len(PLAN.windows), processes, (None, *SEGMENTS))
        windows = fresh[None]
        _check_windows(user, windows, fresh)
        _check_nothing_counted_twice(user, windows, replayed)
        _check_prior_invariance(windows)
        check_drift_directions(windows, PLAN)
        _check_one_window_with_curves(user, windows)
        _check_sla(user, windows)
        _check_prometheus(user, windows, rejected)

    assert_server_stopped_cleanly(server)


# --- steps ---------------------------------------------------------------------


def _replay_and_reuse(user: UserPath) -> int:
    """Replay a batch: same answer, Idempotent-Replayed; another body under its key: 422.

    Returns the window offset of the replayed batch.
    """
    offset = 3
    original = next(p for p in user.posted if p.answer["window_start"] == iso(user.start(offset)))
    r = user.send(original.body, original.key)
    assert r.status_code == 202, r.text
    assert r.headers["idempotent-replayed"] == "true"
    assert r.json() == original.answer
    other = orjson.loads(original.body)
    other["labels"][0] = 1 - other["labels"][0]
    r = user.send(orjson.dumps(other), original.key)
    assert_problem(r, 422, "idempotency-key-reused")
    return offset


def _bad_input_stores_nothing(user: UserPath, rng: np.random.Generator) -> dict[str, int]:
    """Post bad batches into an empty window: each a problem+json naming the field.

    A rejected request keeps no key: the same key then takes a valid batch.
    Returns the expected rejection counts by reason.
    """
    at = iso(user.start(EMPTY_OFFSET) + timedelta(minutes=10))
    good: dict[str, Any] = {"timestamp": at, "scores": [0.9, 0.1], "labels": [1, 0]}
    cases: list[tuple[dict[str, Any], str]] = [
        ({**good, "scores": [0.9, 1.5]}, "scores"),
        ({**good, "labels": [1, 2]}, "labels"),
        ({**good, "labels": [1, 0, 1]}, "labels"),
        ({**good, "segment": "apac"}, "segment"),
        ({**good, "timestamp": iso(datetime.now(UTC) - timedelta(days=40))}, "timestamp"),
        ({**good, "timestamp": "the day before yesterday"}, "timestamp"),
        ({**good, "labels": None}, "labels"),  # (without the field: unlabelled rows)
    ]
    key = "bad-then-good-0001"
    for body, field in cases:
        assert_problem(user.send(orjson.dumps(body), key), 422, "invalid-input", field)
    assert_problem(user.send(b'{"timestamp": ', key), 400, "malformed-json")
    r = user.http.post(
        f"/v1/models/{MODEL}/batches",
        content=orjson.dumps(good),
        headers={**user.key, "Content-Type": "text/plain", "Idempotency-Key": key},
    )
    assert_problem(r, 415, "unsupported-media-type")
    r = user.http.post(f"/v1/models/{MODEL}/batches", json=good)
    assert_problem(r, 401, "not-authenticated")
    assert r.headers["www-authenticate"].startswith("Bearer")

    # the key was kept by none of them: a valid batch (into a stored window) takes it
    scores, labels = _likelihood_rows(rng)
    posted = user.post_batch(
        user.start(6) + timedelta(minutes=50), scores, labels, segment="eu", key=key
    )
    assert posted.answer["window_start"] == iso(user.start(6))
    return {
        "invalid_input": len(cases),
        "malformed_json": 1,
        "unsupported_media_type": 1,
        "not_authenticated": 1,
        "idempotency_key_reused": 1,
    }


def _likelihood_rows(rng: np.random.Generator) -> tuple[Scores, Labels]:
    w = PLAN.of_kind("likelihood")[-1]
    return simulate(rng, 500, w.prior, w.separation)


# --- checks --------------------------------------------------------------------


def _check_windows(
    user: UserPath, windows: list[dict[str, Any]], fresh: dict[str | None, list[dict[str, Any]]]
) -> None:
    """Contract shape; counts of the raw data; metrics equal to evaluate on it."""
    assert [w["start"] for w in windows] == [iso(user.start(p.offset)) for p in PLAN.windows]
    for w, p in zip(windows, PLAN.windows, strict=True):
        _, labels = user.raw(p.offset)
        assert w["segment"] is None
        assert w["end"] == iso(user.start(p.offset) + timedelta(hours=1))
        assert (w["n"], w["positives"]) == (labels.size, int(labels.sum()))
        assert w["prior"] == pytest.approx(labels.mean(), rel=1e-12)
        assert w["status"] == "fresh"
        assert {"metrics", "reasons", "intervals", "drift", "computed_at"} <= set(w)
        assert "curves" not in w
        if p.offset < REFERENCE_WINDOWS:
            assert w["drift"]["verdict"] == "reference"
        else:
            assert w["drift"]["verdict"] in VERDICTS
            for part in ("prior", "likelihood"):
                assert {"p_value", "effect", "flag"} <= set(w["drift"][part])
            assert set(w["drift"]["attribution"]["auc_pr"]) >= {"total", "prior", "likelihood"}
        # every metric the worker stored is evaluate's on the same raw rows
        assert_matches_evaluate(w["metrics"], user.expected(p.offset))
        for name, bounds in w["intervals"].items():
            if bounds["lower"] is None:  # an unsupported regime: null on purpose, with why
                assert bounds["upper"] is None and bounds["reason"], name
                continue
            assert bounds["lower"] <= w["metrics"][name] <= bounds["upper"], name
    for segment in SEGMENTS:
        seg = fresh[segment]
        assert [w["start"] for w in seg] == [w["start"] for w in windows]
        for w, p in zip(seg, PLAN.windows, strict=True):
            _, labels = user.raw(p.offset, segment)
            assert (w["segment"], w["n"]) == (segment, labels.size)
    eu_last = fresh["eu"][-1]
    assert_matches_evaluate(eu_last["metrics"], user.expected(PLAN.windows[-1].offset, "eu"))


def _check_nothing_counted_twice(
    user: UserPath, windows: list[dict[str, Any]], replayed: int
) -> None:
    rows = sum(int(p.answer["count"]) for p in user.posted)
    assert sum(w["n"] for w in windows) == rows
    (w,) = [w for w in windows if w["start"] == iso(user.start(replayed))]
    assert w["n"] == PLAN.batches_per_window * PLAN.rows_per_batch
    r = user.http.get(
        f"/v1/models/{MODEL}/windows/{iso(user.start(EMPTY_OFFSET))}", headers=user.key
    )
    assert_problem(r, 404, "window-not-found")


def _check_prior_invariance(windows: list[dict[str, Any]]) -> None:
    """Calibrated metrics stay at their population value at pi0; raw precision follows pi."""
    by_kind: dict[str, list[dict[str, Any]]] = {"stable": [], "prior": [], "likelihood": []}
    for w, p in zip(windows, PLAN.windows, strict=True):
        by_kind[p.kind].append(w)
    stable = PLAN.of_kind("stable")[0]
    shifted = PLAN.of_kind("prior")[0]
    cal_precision = population_precision(stable.separation, PI0)
    cal_f1 = population_f1(stable.separation, PI0)
    recall, fpr = population_rates(stable.separation)
    for kind, plan_w in (("stable", stable), ("prior", shifted)):
        for w in by_kind[kind]:
            m = w["metrics"]
            assert m["calibrated_precision"] == pytest.approx(
                cal_precision, abs=POPULATION_TOLERANCE
            )
            assert m["calibrated_f1"] == pytest.approx(cal_f1, abs=POPULATION_TOLERANCE)
            assert m["recall"] == pytest.approx(recall, abs=POPULATION_TOLERANCE)
            assert m["fpr"] == pytest.approx(fpr, abs=0.01)
            # raw precision follows the window's own prior (Bayes' rule)
            assert m["precision"] == pytest.approx(
                population_precision(plan_w.separation, w["prior"]), abs=0.1
            )
    moved = population_precision(stable.separation, stable.prior) - population_precision(
        shifted.separation, shifted.prior
    )
    assert moved > 0.4  # in the population, the raw precision really moves
    raw_drop = np.mean([w["metrics"]["precision"] for w in by_kind["stable"]]) - np.mean(
        [w["metrics"]["precision"] for w in by_kind["prior"]]
    )
    calibrated_drop = np.mean(
        [w["metrics"]["calibrated_precision"] for w in by_kind["stable"]]
    ) - np.mean([w["metrics"]["calibrated_precision"] for w in by_kind["prior"]])
    assert raw_drop > 0.3
    assert abs(calibrated_drop) < raw_drop / 8


def _check_one_window_with_curves(user: UserPath, windows: list[dict[str, Any]]) -> None:
    listed = windows[5]
    one = user.get(f"/windows/{listed['start']}")
    assert {k: v for k, v in one.items() if k != "curves"} == listed
    curves = one["curves"]
    assert {"roc", "pr", "calibrated_pr"} <= set(curves)
    roc = curves["roc"]
    fpr, tpr = np.array(roc["fpr"], dtype=float), np.array(roc["tpr"], dtype=float)
    assert 2 <= fpr.size <= 200 and fpr.size == tpr.size == len(roc["threshold"])
    assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0.0, 0.0, 1.0, 1.0)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    # the downsampled ROC curve still encloses the reported area
    area = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))
    assert area == pytest.approx(listed["metrics"]["auc_roc"], abs=5e-3)
    for name in ("pr", "calibrated_pr"):
        curve = curves[name]
        assert 2 <= len(curve["recall"]) <= 200
        assert len(curve["recall"]) == len(curve["precision"])
        assert all(0.0 <= v <= 1.0 for v in curve["recall"])
        assert all(v is None or 0.0 <= v <= 1.0 for v in curve["precision"])
    r = user.http.get(
        f"/v1/models/{MODEL}/windows/{iso(user.start(5) + timedelta(minutes=5))}",
        headers=user.key,
    )
    assert_problem(r, 422, "invalid-input")


def _check_sla(user: UserPath, windows: list[dict[str, Any]]) -> None:
    """At pi0: stable and prior-shift windows meet the objectives, likelihood ones breach."""
    report = user.get("/sla", **{"from": iso(user.first)})
    assert [o["evaluated_as"] for o in report["objectives"]] == ["calibrated_f1", "recall"]
    assert [w["start"] for w in report["windows"]] == [w["start"] for w in windows]
    for sw, w, p in zip(report["windows"], windows, PLAN.windows, strict=True):
        assert sw["n"] == w["n"] and sw["window_status"] == "fresh"
        for o in sw["objectives"]:
            assert o["value"] == w["metrics"][o["evaluated_as"]]
            assert o["evidence"] == "interval"  # the whole interval decides (docs/reading.md)
            met, breached = o["lower"] >= o["target"], o["upper"] < o["target"]
            assert o["status"] == ("met" if met else "breached" if breached else "inconclusive")
        assert sw["status"] == ("breached" if p.kind == "likelihood" else "met"), sw
        if p.kind == "prior":  # the raw F1 would breach: the report reads it at pi0
            assert w["metrics"]["f1"] < OBJECTIVES[0]["target"] <= w["metrics"]["calibrated_f1"]
    summary = report["summary"]
    met, breached = len(PLAN.windows) - 2, 2
    assert (summary["windows"], summary["windows_met"], summary["windows_breached"]) == (
        len(PLAN.windows),
        met,
        breached,
    )
    assert summary["compliance_ratio"] == pytest.approx(met / (met + breached))

    r = user.http.get(
        f"/v1/models/{MODEL}/sla",
        params={"from": iso(user.first)},
        headers={**user.key, "Accept": "text/csv"},
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert r.text.splitlines()[0].split(",") == [
        "window_start",
        "window_end",
        "segment",
        "n",
        "prior",
        "objective",
        "metric",
        "evaluated_as",
        "op",
        "target",
        "value",
        "lower",
        "upper",
        "evidence",
        "rule",
        "status",
        "reason",
    ]
    expected = [(sw, o) for sw in report["windows"] for o in sw["objectives"]]
    assert len(rows) == len(expected)
    for row, (sw, o) in zip(rows, expected, strict=True):
        assert (row["window_start"], row["objective"], row["status"]) == (
            sw["start"],
            o["objective"],
            o["status"],
        )
        assert float(row["value"]) == o["value"]  # numbers round-trip exactly
        assert float(row["prior"]) == sw["prior"] and int(row["n"]) == sw["n"]


def _check_prometheus(
    user: UserPath, windows: list[dict[str, Any]], rejected: dict[str, int]
) -> None:
    text, get = scrape(user.http)

    assert get("priorwatch_batches_ingested_total", model=MODEL) == len(user.posted)
    rows = sum(int(p.answer["count"]) for p in user.posted)
    assert get("priorwatch_predictions_ingested_total", model=MODEL) == rows
    for reason, count in rejected.items():
        assert get("priorwatch_batches_rejected_total", reason=reason) == count, reason
    assert get("priorwatch_dirty_windows") == 0
    latest = windows[-1]
    compact = COMPACT_METRICS[names.WINDOW_METRIC]  # the default exposition's metrics
    for name, value in latest["metrics"].items():
        got = get("priorwatch_window_metric", model=MODEL, segment="all", metric=name)
        exposed = value is not None and name in compact
        assert got == (pytest.approx(value, rel=1e-12) if exposed else None), name
    assert compact <= latest["metrics"].keys()
    end = datetime.fromisoformat(latest["end"].replace("Z", "+00:00")).timestamp()
    assert get("priorwatch_window_end_timestamp_seconds", model=MODEL, segment="all") == end
    assert get("priorwatch_drift_flag", model=MODEL, segment="all", kind="likelihood") == 1
    assert get("priorwatch_drift_flag", model=MODEL, segment="all", kind="prior") == 0
    f1 = {"objective": "f1_ge"}  # no target in the labels; metric and op on the target's
    assert get("priorwatch_sla_objective_met", model=MODEL, segment="all", **f1) == 0
    assert get("priorwatch_sla_objective_target", model=MODEL, **f1, metric="f1", op=">=") == 0.7
    # the two latest windows are P(s|y)-shifted and flagged
    assert (
        get("priorwatch_drift_streak_windows", model=MODEL, segment="all", kind="likelihood") == 2
    )
    examples = {
        c: get("priorwatch_window_examples", model=MODEL, segment="all", **{"class": c})
        for c in ("positive", "negative")
    }
    assert examples == {
        "positive": latest["positives"],
        "negative": latest["n"] - latest["positives"],
    }

    if shutil.which("promtool") is None:
        return
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
