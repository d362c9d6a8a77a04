"""Label maturity through the HTTP API (SQLite, Postgres): every prediction of an hour is
posted without its label, then the labels known so far (60% of the positives, 15% of the
negatives) with the predictions' own timestamps; the worker completes the window.

The labelled rows' prior is biased upwards (about 0.2 for a true prior of 0.06); the
completed prior is close to the truth and its interval covers it; class-conditional
metrics are the labelled ones exactly (class assumption); the SLA report judges the
completed values and carries each window's completeness.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from _read_support import drain, iso
from conftest import Api

from app.drift.simulation import shifted_logit_scores
from app.maturity import LABELS_EXCEED_SCORES, NO_LABELS
from app.services.windows.maturity import ASSUMPTION_NONE

DAY = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)
ROWS = 20_000
PRIOR = 0.06


def _at(hour: int) -> str:
    return iso(DAY + timedelta(hours=hour, minutes=5))


def _hour(
    api: Api, token: str, hour: int, rng: np.random.Generator, *, labelled: tuple[float, float]
) -> npt.NDArray[np.int64]:
    """Post an hour's predictions without labels, then the labels of a share of the
    positives and of the negatives; returns the true labels of every prediction."""
    scores, labels = shifted_logit_scores(rng, ROWS, PRIOR, separation=2.0, offset=-2.0)
    body = {"timestamp": _at(hour), "scores": scores.tolist()}
    assert api.post_batch("m", token, body).status_code == 202
    share = np.where(labels == 1, labelled[0], labelled[1])
    known = rng.random(ROWS) < share
    if known.any():
        body = {
            "timestamp": _at(hour),
            "scores": scores[known].tolist(),
            "labels": labels[known].astype(int).tolist(),
        }
        assert api.post_batch("m", token, body).status_code == 202
    return labels.astype(np.int64)


def _windows(api: Api, token: str, model: str = "m", **params: Any) -> dict[str, Any]:
    r = api.client.get(
        f"/v1/models/{model}/windows",
        params={"from": iso(DAY), **params},
        headers=api.bearer(token),
    )
    assert r.status_code == 200, r.text
    return {w["start"]: w for w in r.json()["windows"]}


def _start(hour: int) -> str:
    return iso(DAY + timedelta(hours=hour))


def test_a_partially_labelled_window_is_completed(api: Api) -> None:
    api.create_model("m", pi0=0.05, sla=[{"metric": "recall", "op": ">=", "target": 0.3}])
    token = api.create_key("m")
    rng = np.random.default_rng(22)
    truths = [_hour(api, token, hour, rng, labelled=(0.6, 0.15)) for hour in (1, 2)]
    _hour(api, token, 3, rng, labelled=(0.0, 0.0))  # no label yet
    drain(api.client)
    windows = _windows(api, token)
    for hour, truth in zip((1, 2), truths, strict=True):
        w = windows[_start(hour)]
        maturity, true_prior = w["maturity"], float(truth.mean())
        assert w["prior"] > 0.15  # the labelled rows over-represent the positives
        assert "maturity" not in w["reasons"]
        assert (maturity["labelled"], maturity["scored"]) == (w["n"], ROWS)
        assert maturity["completeness"] == pytest.approx(w["n"] / ROWS, abs=1e-12)
        assert maturity["assumption"] == "class"
        prior = maturity["prior"]
        assert abs(prior["value"] - true_prior) < 0.01
        assert prior["lower"] <= true_prior <= prior["upper"]
        assert maturity["metrics"]["prior"] == pytest.approx(prior["value"], abs=1e-9)
        for name in ("recall", "fpr", "calibrated_f1", "auc_roc"):  # class-conditional
            assert maturity["metrics"][name] == pytest.approx(w["metrics"][name], abs=1e-12)
        assert maturity["metrics"]["brier"] is None
        assert maturity["reasons"]["brier"] == "not-completable"
        assert maturity["fit"] is not None and maturity["fit"]["reliable"] is True
        assert {"prior", "precision", "calibrated_f1"} <= set(maturity["intervals"])
        precision = maturity["intervals"]["precision"]
        assert precision["lower"] <= maturity["metrics"]["precision"] <= precision["upper"]
        assert w["estimate"] is None and w["reasons"]["estimate"]  # no drift reference
    assert windows[_start(3)]["maturity"] is None
    assert windows[_start(3)]["reasons"]["maturity"] == NO_LABELS

    (day,) = _windows(api, token, granularity="1d").values()  # hour 3 has no label yet
    assert day["maturity"] is None and day["reasons"]["maturity"] == NO_LABELS
    parts = [windows[_start(h)]["maturity"] for h in (1, 2)]

    # the SLA report judges the completed recall and says each window's completeness
    report = api.client.get(
        "/v1/models/m/sla", params={"from": iso(DAY)}, headers=api.bearer(token)
    ).json()
    by_start = {w["start"]: w for w in report["windows"]}
    for hour, part in zip((1, 2), parts, strict=True):
        row = by_start[_start(hour)]
        assert row["completeness"] == pytest.approx(part["completeness"], abs=1e-12)
        assert row["objectives"][0]["value"] == pytest.approx(part["metrics"]["recall"], abs=1e-12)
    html = api.client.get(
        "/v1/models/m/sla",
        params={"from": iso(DAY)},
        headers={**api.bearer(token), "Accept": "text/html"},
    )
    assert html.status_code == 200
    assert f"{100.0 * parts[0]['completeness']:.0f}%" in html.text


def test_merged_windows_sum_the_completions_of_their_hours(api: Api) -> None:
    api.create_model("m", pi0=0.05)
    token = api.create_key("m")
    rng = np.random.default_rng(5)
    for hour in (1, 2):
        _hour(api, token, hour, rng, labelled=(0.6, 0.15 if hour == 1 else 0.4))
    drain(api.client)
    hours = [w["maturity"] for w in _windows(api, token).values()]
    (six,) = _windows(api, token, granularity="6h").values()
    merged = six["maturity"]
    whole = [h["labelled"] / h["completeness"] for h in hours]
    expected_prior = sum(h["prior"]["value"] * n for h, n in zip(hours, whole, strict=True))
    assert merged["prior"]["value"] == pytest.approx(expected_prior / sum(whole), rel=1e-9)
    assert merged["completeness"] == pytest.approx(
        sum(h["labelled"] for h in hours) / sum(whole), rel=1e-12
    )
    assert merged["scored"] == 2 * ROWS
    assert merged["intervals"]["prior"]["lower"] < merged["prior"]["value"]
    assert "intervals" not in merged["reasons"]  # each hour drawn, the draws summed
    for name in ("precision", "recall", "f1"):
        interval = merged["intervals"][name]
        assert interval["lower"] <= merged["metrics"][name] <= interval["upper"], name


def test_a_fully_labelled_window_completes_to_its_labelled_metrics(api: Api) -> None:
    api.create_model("m", pi0=0.05, thresholds=[0.5, 0.3], cost_ratio=0.4)
    token = api.create_key("m")
    _hour(api, token, 1, np.random.default_rng(9), labelled=(1.0, 1.0))
    drain(api.client)
    (w,) = _windows(api, token).values()
    assert w["maturity"]["completeness"] == 1.0
    for name, value in w["maturity"]["metrics"].items():
        if name in ("brier", "log_loss"):
            assert value is None
        elif value is None:
            assert w["metrics"][name] is None, name
        else:
            assert value == pytest.approx(w["metrics"][name], abs=1e-12), name
    assert w["estimate"] is None and w["reasons"]["estimate"]  # no reference: says why


def test_windows_not_completed_say_why(api: Api) -> None:
    api.create_model("m", pi0=0.05, label_missingness="none")
    api.create_model("extra", pi0=0.05)
    token, extra = api.create_key("m"), api.create_key("extra")
    rng = np.random.default_rng(3)
    _hour(api, token, 1, rng, labelled=(0.6, 0.15))
    scores, labels = shifted_logit_scores(rng, 2_000, PRIOR, separation=2.0, offset=-2.0)
    for body in (
        {"timestamp": _at(1), "scores": scores[:500].tolist()},
        {"timestamp": _at(1), "scores": scores.tolist(), "labels": labels.tolist()},
    ):
        assert api.post_batch("extra", extra, body).status_code == 202
    drain(api.client)
    (w,) = _windows(api, token).values()
    assert w["maturity"] is None and w["reasons"]["maturity"] == ASSUMPTION_NONE
    assert w["reasons"]["estimate"]
    (x,) = _windows(api, extra, model="extra").values()
    assert x["maturity"] is None and x["reasons"]["maturity"] == LABELS_EXCEED_SCORES
    # changing the setting recomputes the windows
    r = api.client.patch("/v1/models/m", json={"label_missingness": "score"}, headers=api.admin)
    assert r.status_code == 200, r.text
    drain(api.client)
    (w,) = _windows(api, token).values()
    assert w["maturity"]["assumption"] == "score" and "maturity" not in w["reasons"]
    assert w["maturity"]["fit"] is None


def test_late_labels_within_the_label_horizon(api_factory: Callable[..., Api]) -> None:
    api = api_factory()
    api.create_model("m", pi0=0.05, label_horizon="90d")
    token = api.create_key("m")
    rng = np.random.default_rng(4)
    _hour(api, token, 1, rng, labelled=(0.0, 0.0))
    late = api_factory(backfill_max_age_days=1.0)  # the predictions are now 2 days old
    labels = {"timestamp": _at(1), "scores": [0.7, 0.2], "labels": [1, 0]}
    assert late.post_batch("m", token, labels).status_code == 202
    for body in (
        {**labels, "timestamp": _at(2)},  # a window without predictions
        {"timestamp": _at(1), "scores": [0.3]},  # predictions themselves come in time
    ):
        r = late.post_batch("m", token, body)
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["field"] == "timestamp"
    assert (
        late.client.patch("/v1/models/m", json={"label_horizon": None}, headers=late.admin).json()[
            "label_horizon"
        ]
        is None
    )
    r = late.post_batch("m", token, labels)
    assert r.status_code == 422 and "backfill" in r.text
