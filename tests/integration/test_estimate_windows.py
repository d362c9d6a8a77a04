"""Unlabelled batches and the label-free estimate through the HTTP API (SQLite, Postgres).

A model with a fixed drift reference (hours 0-2 of a day, labelled histograms
from the project's binormal sampler at prior 0.1) receives, later that day,
windows of unlabelled rows: scores alone and unlabelled histograms. The
estimate is checked against an independent computation (app.estimation on the
same histograms), and the labels that arrive later give its error.
"""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from _read_support import drain, iso
from _worker_support import fold_pending
from conftest import Api
from prometheus_client.parser import text_string_to_metric_families

from app.db.models import WindowAggregate
from app.drift.histograms import WindowHistograms
from app.drift.simulation import BinormalStream
from app.estimation import MixtureReference, estimate_window
from app.exporter.exposition import COMPACT_METRICS
from app.metrics.binning import default_bin_edges
from app.services.windows.estimate import MORE_LABELLED_REASON

EDGES = default_bin_edges((0.5,))
STREAM = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-1.5)
DAY = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)


def _at(hour: int) -> str:
    return iso(DAY + timedelta(hours=hour, minutes=5))


def _setup(api: Api, rng: np.random.Generator) -> tuple[str, WindowHistograms]:
    api.create_model(
        "fraud",
        window="1h",
        threshold=0.5,
        pi0=0.1,
        cost_ratio=0.5,
        segments=["eu"],
        drift={"reference": {"from": iso(DAY), "to": iso(DAY + timedelta(hours=3))}},
    )
    token = api.create_key()
    reference = []
    for hour in range(3):
        h = STREAM.window(rng, n=30_000, prior=0.1)
        reference.append(h)
        body = {
            "timestamp": _at(hour),
            "segment": "eu",
            "histogram": {
                "positives": h.positives.astype(int).tolist(),
                "negatives": h.negatives.astype(int).tolist(),
            },
        }
        assert api.post_batch("fraud", token, body).status_code == 202
    return token, WindowHistograms.pooled(reference)


def _windows(api: Api, token: str, **params: Any) -> list[dict[str, Any]]:
    r = api.client.get(
        "/v1/models/fraud/windows",
        params={"from": iso(DAY), **params},
        headers=api.bearer(token),
    )
    assert r.status_code == 200, r.text
    return list(r.json()["windows"])


def _scores_of(h: WindowHistograms) -> list[float]:
    """Per-example scores of a histogram: each bin's lower edge, repeated (same bins)."""
    counts = (h.positives + h.negatives).astype(int)
    return np.repeat(EDGES[:-1], counts).tolist()


def test_unlabelled_windows_get_an_estimate_and_later_its_error(api: Api) -> None:
    rng = np.random.default_rng(3)
    token, reference = _setup(api, rng)
    shifted = STREAM.window(rng, n=8_000, prior=0.03)  # hour 5: scores without labels
    r = api.post_batch(
        "fraud",
        token,
        {"timestamp": _at(5), "segment": "eu", "scores": _scores_of(shifted)},
        key="u-5",
    )
    assert r.status_code == 202, r.text
    assert r.json()["count"] == 8_000
    replay = api.post_batch(
        "fraud",
        token,
        {"timestamp": _at(5), "segment": "eu", "scores": _scores_of(shifted)},
        key="u-5",
    )
    assert replay.status_code == 202 and replay.json() == r.json()
    same = STREAM.window(rng, n=6_000, prior=0.1)  # hour 6: an unlabelled histogram
    body = {
        "timestamp": _at(6),
        "histogram": {"unlabelled": (same.positives + same.negatives).astype(int).tolist()},
    }
    assert api.post_batch("fraud", token, body).status_code == 202

    pending = _windows(api, token)
    assert [w["status"] for w in pending if w["n"] == 0] == ["pending", "pending"]
    drain(api.client)
    windows = {w["start"]: w for w in _windows(api, token)}
    w5, w6 = windows[iso(DAY + timedelta(hours=5))], windows[iso(DAY + timedelta(hours=6))]
    assert (w5["n"], w5["n_unlabelled"], w5["status"], w5["prior"]) == (0, 8_000, "fresh", None)
    assert w5["metrics"] == {} and w5["drift"]["verdict"] == "none"
    assert w6["n_unlabelled"] == 6_000
    for w in windows.values():
        if w["n_unlabelled"] == 0:
            assert w["estimate"] is None  # the reference windows

    # the all-traffic window holds both unlabelled batches' hours; the segment only hour 5
    eu = {w["start"]: w for w in _windows(api, token, segment="eu")}
    assert eu[iso(DAY + timedelta(hours=5))]["n_unlabelled"] == 8_000
    assert iso(DAY + timedelta(hours=6)) not in eu

    est = w5["estimate"]
    assert set(est) >= {"n", "prior", "metrics", "fit", "reliable", "error"}
    assert est["error"] is None and est["n"] == 8_000
    expected = estimate_window(
        MixtureReference.from_histograms(reference),
        shifted.positives + shifted.negatives,
        thresholds=[0.5],
        pi0=0.1,
        cost_ratio=0.5,
    )
    assert est["prior"]["value"] == pytest.approx(expected.prior.value, rel=1e-9)
    assert est["prior"]["lower"] < 0.03 < est["prior"]["upper"]
    assert est["fit"]["verdict"] == "prior" and est["reliable"] is True
    assert est["metrics"]["precision"] == pytest.approx(expected.metrics["precision"], rel=1e-9)
    assert w6["estimate"]["fit"]["verdict"] == "none"

    # the labels of hour 5 arrive: the window holds both, the estimate keeps its value
    labels = {
        "positives": shifted.positives.astype(int).tolist(),
        "negatives": shifted.negatives.astype(int).tolist(),
    }
    assert (
        api.post_batch(
            "fraud", token, {"timestamp": _at(5), "segment": "eu", "histogram": labels}
        ).status_code
        == 202
    )
    drain(api.client)
    w5 = {w["start"]: w for w in _windows(api, token, segment="eu")}[iso(DAY + timedelta(hours=5))]
    assert (w5["n"], w5["n_unlabelled"]) == (8_000, 8_000)
    est = w5["estimate"]
    assert est["prior"]["value"] == pytest.approx(expected.prior.value, rel=1e-9)
    for name in ("precision", "f1", "auc_pr", "prior"):
        assert est["error"][name] == pytest.approx(
            est["metrics"][name] - w5["metrics"][name], abs=1e-12
        ), name
    assert abs(est["error"]["precision"]) < 0.1

    # re-windowing: the day merges labelled and unlabelled rows; its labelled rows (the
    # reference hours too) outnumber the unlabelled ones: no error, and the reason
    day = _windows(api, token, segment="eu", granularity="1d")
    assert len(day) == 1 and day[0]["n_unlabelled"] == 8_000
    assert day[0]["estimate"]["n"] == 8_000
    assert day[0]["n"] > 8_000 and day[0]["estimate"]["error"] is None
    assert day[0]["reasons"]["estimate.error"] == MORE_LABELLED_REASON
    assert "estimate.error" not in w5["reasons"]


def test_bad_unlabelled_batches_store_nothing(api: Api) -> None:
    token, _ = _setup(api, np.random.default_rng(4))
    for body, field in (
        ({"timestamp": _at(5), "histogram": {"unlabelled": [1, 2, 3]}}, "histogram.unlabelled"),
        ({"timestamp": _at(5), "scores": [0.2, 1.7]}, "scores"),
        ({"timestamp": _at(5), "scores": [0.2], "labels": None}, "labels"),
    ):
        r = api.post_batch("fraud", token, body)
        assert r.status_code == 422, r.text
        assert field in r.text
    drain(api.client)
    assert all(w["n_unlabelled"] == 0 for w in _windows(api, token))


def test_no_estimate_inside_the_reference_period(api: Api) -> None:
    rng = np.random.default_rng(6)
    token, _ = _setup(api, rng)
    drain(api.client)
    before = {w["start"]: w for w in _windows(api, token, segment="eu")}[iso(DAY)]
    h = STREAM.window(rng, n=2_000, prior=0.1)
    body = {"timestamp": _at(0), "segment": "eu", "scores": _scores_of(h)}
    assert api.post_batch("fraud", token, body).status_code == 202
    drain(api.client)
    after = {w["start"]: w for w in _windows(api, token, segment="eu")}[iso(DAY)]
    assert (after["n_unlabelled"], after["estimate"], after["status"]) == (2_000, None, "fresh")
    assert after["drift"]["verdict"] == "reference"
    assert (after["n"], after["metrics"]) == (before["n"], before["metrics"])


def test_no_reference_no_estimate(api: Api) -> None:
    api.create_model("plain", window="1h", threshold=0.5, pi0=0.1)
    token = api.create_key("plain")
    r = api.post_batch("plain", token, {"timestamp": _at(5), "scores": [0.1, 0.7, 0.4]})
    assert r.status_code == 202, r.text
    drain(api.client)
    r = api.client.get(
        "/v1/models/plain/windows", params={"from": iso(DAY)}, headers=api.bearer(token)
    )
    (w,) = r.json()["windows"]
    assert (w["n"], w["n_unlabelled"], w["status"], w["estimate"]) == (0, 3, "fresh", None)


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _get(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_exposition_keeps_labelled_gauges_on_the_latest_labelled_window(api: Api) -> None:
    rng = np.random.default_rng(5)
    token, _ = _setup(api, rng)
    both = STREAM.window(rng, n=6_000, prior=0.05)  # hour 5: unlabelled, then its labels
    for hist in (
        {"unlabelled": (both.positives + both.negatives).astype(int).tolist()},
        {
            "positives": both.positives.astype(int).tolist(),
            "negatives": both.negatives.astype(int).tolist(),
        },
    ):
        r = api.post_batch(
            "fraud", token, {"timestamp": _at(5), "segment": "eu", "histogram": hist}
        )
        assert r.status_code == 202, r.text
    drain(api.client)
    streak = {"exposition": ["priorwatch_drift_streak_windows"]}  # the prior one too
    r = api.client.patch("/v1/models/fraud", json=streak, headers=api.admin)
    assert r.status_code == 200, r.text
    before = _samples(api.client.get("/metrics").text)
    streaks = {k: v for k, v in before.items() if k[0].endswith("_streak_windows")}
    assert (
        _get(before, "priorwatch_drift_streak_windows", model="fraud", segment="eu", kind="prior")
        == 1
    )
    later = STREAM.window(rng, n=6_000, prior=0.2)  # hour 7: unlabelled only
    body = {
        "timestamp": _at(7),
        "segment": "eu",
        "histogram": {"unlabelled": (later.positives + later.negatives).astype(int).tolist()},
    }
    assert api.post_batch("fraud", token, body).status_code == 202
    drain(api.client)
    windows = {w["start"]: w for w in _windows(api, token, segment="eu")}
    w5, w7 = windows[iso(DAY + timedelta(hours=5))], windows[iso(DAY + timedelta(hours=7))]

    r = api.client.get("/metrics")
    assert r.status_code == 200
    s = _samples(r.text)
    eu = {"model": "fraud", "segment": "eu"}
    end5, end7 = (DAY + timedelta(hours=6)).timestamp(), (DAY + timedelta(hours=8)).timestamp()
    # labelled gauges: the latest window with labels (hour 5), not the unlabelled hour 7
    assert _get(s, "priorwatch_window_end_timestamp_seconds", **eu) == end5
    assert _get(s, "priorwatch_window_metric", **eu, metric="precision") == pytest.approx(
        w5["metrics"]["precision"], rel=1e-15
    )
    # a window of unlabelled rows resets no streak
    assert {k: v for k, v in s.items() if k[0].endswith("_streak_windows")} == streaks
    # estimate gauges: the latest window with unlabelled rows (hour 7)
    assert _get(s, "priorwatch_estimate_window_end_timestamp_seconds", **eu) == end7
    est = w7["estimate"]
    assert _get(s, "priorwatch_window_estimate", **eu, metric="prior") == pytest.approx(
        est["prior"]["value"], rel=1e-15
    )
    assert _get(s, "priorwatch_window_estimate_lower", **eu, metric="prior") == pytest.approx(
        est["prior"]["lower"], rel=1e-15
    )
    assert _get(s, "priorwatch_window_estimate", **eu, metric="f1") == pytest.approx(
        est["metrics"]["f1"], rel=1e-15
    )
    for kind in ("prior", "likelihood"):
        flag = _get(s, "priorwatch_estimate_flag", **eu, kind=kind)
        assert flag == (1.0 if est["fit"]["verdict"] == kind else 0.0)
    assert _get(s, "priorwatch_estimate_flag", **eu, kind="prior") == 1.0  # 0.2 against 0.1
    assert _get(s, "priorwatch_estimate_p_value", **eu, kind="likelihood") == pytest.approx(
        est["fit"]["p_value"], rel=1e-15
    )
    assert _get(s, "priorwatch_estimate_reliable", **eu) == 1.0
    # the error: the latest window with both kinds of rows (hour 5)
    kept = COMPACT_METRICS["priorwatch_estimate_error"]  # the default exposition's
    assert kept & w5["estimate"]["error"].keys()
    for metric, value in w5["estimate"]["error"].items():
        if metric not in kept:
            assert _get(s, "priorwatch_estimate_error", **eu, metric=metric) is None
            continue
        assert _get(s, "priorwatch_estimate_error", **eu, metric=metric) == pytest.approx(
            value, rel=1e-15, abs=1e-300
        )
    # all traffic holds the same rows (no batch without a segment here)
    assert _get(
        s, "priorwatch_window_estimate", model="fraud", segment="all", metric="prior"
    ) == pytest.approx(est["prior"]["value"], rel=1e-12)
    if shutil.which("promtool"):
        check = subprocess.run(
            ["promtool", "check", "metrics"],
            input=r.text,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert check.returncode == 0, check.stdout + check.stderr


def test_unlabelled_rows_count_toward_the_window_ceiling(api: Api, db_engine: sa.Engine) -> None:
    api.create_model("plain", window="1h", threshold=0.5, pi0=0.1)
    token = api.create_key("plain")
    assert api.post_batch("plain", token, {"timestamp": _at(5), "scores": [0.2]}).status_code == 202
    url = db_engine.url.render_as_string(hide_password=False)
    assert fold_pending(url) == 1  # the first batch's delta folded: the aggregate holds it all
    with db_engine.begin() as c:  # a window 10 rows short of 2^53, half of them unlabelled
        c.execute(sa.update(WindowAggregate).values(n=2**52, positives=0, n_unlabelled=2**52 - 10))
    r = api.post_batch("plain", token, {"timestamp": _at(5), "scores": [0.5] * 11})
    assert r.status_code == 422, r.text
    assert "(10 left)" in r.text and r.json()["errors"][0]["field"] == "scores"
    assert (
        api.post_batch("plain", token, {"timestamp": _at(5), "scores": [0.5] * 10}).status_code
        == 202
    )
    assert fold_pending(url) == 1
    with db_engine.connect() as c:
        assert c.execute(sa.select(WindowAggregate.n_unlabelled)).scalar_one() == 2**52
