"""Windows of one class only, and labels that cannot be those of the scored rows,
through the HTTP API and the worker (SQLite, Postgres); issue 20, defects 2 and 5."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from _read_support import drain, iso
from conftest import Api

from app.services.windows.estimate import MORE_LABELLED_REASON

DAY = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)


def _at(hour: int) -> str:
    return iso(DAY + timedelta(hours=hour, minutes=5))


def _windows(api: Api, token: str, **params: Any) -> list[dict[str, Any]]:
    r = api.client.get(
        "/v1/models/fraud/windows", params={"from": iso(DAY), **params}, headers=api.bearer(token)
    )
    assert r.status_code == 200, r.text
    return list(r.json()["windows"])


def test_a_window_of_one_class_goes_fresh_and_merges(api: Api) -> None:
    """Three rows labelled [1, 1, 1] left their window pending (ZeroDivisionError in
    the OPRC) and the day's window answered 500; the negatives alike."""
    api.create_model("fraud", window="1h", threshold=0.5, pi0=0.1)
    token = api.create_key()
    for hour, label in ((1, 1), (2, 0)):
        body = {"timestamp": _at(hour), "scores": [0.9, 0.2, 0.6], "labels": [label] * 3}
        assert api.post_batch("fraud", token, body).status_code == 202
    drain(api.client)
    hours = _windows(api, token)
    assert [(w["n"], w["positives"], w["status"]) for w in hours] == [
        (3, 3, "fresh"),
        (3, 0, "fresh"),
    ]
    for w in hours:
        assert w["metrics"]["ops_f1"] is None and w["reasons"]["ops_f1"] == "insufficient_data"
        null_documents = {"estimate", "maturity"}  # labelled rows only: each says why
        assert set(w["reasons"]) == {k for k, v in w["metrics"].items() if v is None} | (
            null_documents
        )
    day = _windows(api, token, granularity="1d")
    assert [(w["n"], w["positives"], w["status"]) for w in day] == [(6, 3, "fresh")]
    r = api.client.get(
        "/v1/models/fraud/windows/" + iso(DAY + timedelta(hours=1)),
        headers=api.bearer(token),
    )
    assert r.status_code == 200, r.text
    oprc = r.json()["curves"]["oprc"]
    assert oprc["ops"] == [None] * len(oprc["recall"])


def test_more_labelled_than_scored_rows_give_no_estimate_error(api: Api) -> None:
    """1,000 unlabelled rows, then 5,000 labelled rows never sent unlabelled: the
    estimate's error was reported as if the estimate had been wrong."""
    api.create_model(
        "fraud",
        window="1h",
        threshold=0.5,
        pi0=0.1,
        drift={"reference": {"from": iso(DAY), "to": iso(DAY + timedelta(hours=1))}},
    )
    token = api.create_key()
    rng = np.random.default_rng(8)

    def rows(n: int, prior: float) -> tuple[list[float], list[int]]:
        labels = rng.random(n) < prior
        scores = np.clip(rng.normal(0.3 + 0.4 * labels, 0.15), 0.0, 1.0)
        return scores.tolist(), labels.astype(int).tolist()

    scores, labels = rows(20_000, 0.2)
    body = {"timestamp": _at(0), "scores": scores, "labels": labels}
    assert api.post_batch("fraud", token, body).status_code == 202
    scores, _ = rows(1_000, 0.2)
    assert (
        api.post_batch("fraud", token, {"timestamp": _at(3), "scores": scores}).status_code == 202
    )
    scores, labels = rows(5_000, 0.4)
    body = {"timestamp": _at(3), "scores": scores, "labels": labels}
    assert api.post_batch("fraud", token, body).status_code == 202
    drain(api.client)
    (w,) = [w for w in _windows(api, token) if w["n_unlabelled"]]
    assert (w["n"], w["n_unlabelled"], w["status"]) == (5_000, 1_000, "fresh")
    assert w["estimate"] is not None and w["estimate"]["error"] is None
    assert w["reasons"]["estimate.error"] == MORE_LABELLED_REASON
    assert w["metrics"]["prior"] is not None
