"""The SLA gauges and breach streaks judge a partially labelled window on its completed
values, as GET /v1/models/{name}/sla does (SQLite, Postgres).

Model "matured" (hourly windows, segment "eu", objective ``recall >= 0.6``)
receives three windows of scored rows, then the labels of some of them. Hour 0
is labelled only and its labelled recall breaches the objective; hours 1 and 2
hold unlabelled and labelled rows whose labelled recall meets it, but their
completed window (the ``maturity`` document, written here in SQL with fixed
values) breaches it. Judged on the labelled values the latest window would be
met and the streak 0; judged on the completed ones, as the SLA report judges
them, the latest window is breached and the streak counts all three windows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from _read_support import drain
from conftest import Api
from prometheus_client.parser import text_string_to_metric_families

from app.db.models import Model, WindowMetrics
from app.exporter import names
from app.timegrid import window_start

MODEL = "matured"
TARGET = 0.6
OBJECTIVE = {"metric": "recall", "op": ">=", "target": TARGET}
LABELS = {"objective": "recall_ge"}
ROWS = 600
SEPARATION = {0: 0.0, 1: 4.0, 2: 4.0}
"""Per hour: how far the positives' logits sit above the negatives' (0: recall ~0.02,
4: recall ~0.98 at threshold 0.5)."""
COMPLETED = {1, 2}
"""The hours holding unlabelled rows too, with a completed window."""
MATURITY = {
    "labelled": ROWS // 2,
    "scored": ROWS,
    "completeness": 0.5,
    "assumption": "score",
    "prior": {"value": 0.2, "lower": 0.15, "upper": 0.25, "level": 0.95},
    "metrics": {"recall": 0.45},
    "reasons": {},
    "intervals": {"recall": {"lower": 0.38, "upper": 0.52, "level": 0.95}},
}
"""The completed window of hours 1 and 2: its recall interval lies below the target."""


def _post(api: Api, token: str, start: datetime) -> None:
    rng = np.random.default_rng(20261127)
    for hour, separation in SEPARATION.items():
        labels = (rng.random(ROWS) < 0.2).astype(np.int64)
        logits = rng.normal(size=ROWS) - 2.0 + separation * labels
        scores = (1.0 / (1.0 + np.exp(-logits))).round(6)
        at = (start + timedelta(hours=hour, minutes=5)).isoformat()
        body: dict[str, Any] = {"timestamp": at, "segment": "eu"}
        if hour in COMPLETED:  # every row scored first, half of them labelled later
            sent = {**body, "scores": scores.tolist()}
            assert api.post_batch(MODEL, token, sent).status_code == 202
            scores, labels = scores[: ROWS // 2], labels[: ROWS // 2]
        sent = {**body, "scores": scores.tolist(), "labels": labels.tolist()}
        assert api.post_batch(MODEL, token, sent).status_code == 202


def _labelled_bounds(api: Api, start: datetime) -> dict[tuple[str, int], dict[str, float]]:
    """The stored labelled recall interval per (segment key, hour); writes the completed
    window of the hours of :data:`COMPLETED`."""
    factory = api.client.app.state.session_factory  # type: ignore[attr-defined]
    out = {}
    with factory() as session, session.begin():
        model = session.scalars(sa.select(Model).where(Model.name == MODEL)).one()
        for stored in session.scalars(
            sa.select(WindowMetrics).where(WindowMetrics.model_id == model.id)
        ):
            hour = int((stored.window_start - start) / timedelta(hours=1))
            out[(stored.segment, hour)] = stored.intervals["recall"]
            if hour in COMPLETED:
                stored.maturity = MATURITY
    return out


@pytest.fixture
def api(api_factory: Callable[..., Api]) -> tuple[Api, datetime]:
    api = api_factory(backfill_max_age_days=60)
    api.create_model(
        MODEL, window="1h", threshold=0.5, pi0=0.2, segments=["eu"], n_bins=20, sla=[OBJECTIVE]
    )
    token = api.create_key(MODEL)
    start = window_start(datetime.now(UTC), "1h") - timedelta(hours=6)
    _post(api, token, start)
    drain(api.client)
    return api, start


def test_gauges_streaks_and_report_judge_the_completed_window(api: tuple[Api, datetime]) -> None:
    client, start = api[0].client, api[1]
    bounds = _labelled_bounds(api[0], start)
    # the premise: judged on its labelled rows, hour 0 breaches and hours 1 and 2 meet
    for (_, hour), interval in bounds.items():
        if hour in COMPLETED:
            assert interval["lower"] >= TARGET
        else:
            assert interval["upper"] < TARGET
    assert len(bounds) == 2 * len(SEPARATION)  # segment "eu" and all traffic
    r = client.get("/metrics")
    assert r.status_code == 200
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }
    key = api[0].create_key(MODEL)
    for segment in ("eu", "all"):
        labels = frozenset({"model": MODEL, "segment": segment, **LABELS}.items())
        assert samples[(names.SLA_MET, labels)] == 0.0  # breached (labelled: met, 1.0)
        assert samples[(names.SLA_BREACH_STREAK, labels)] == float(len(SEPARATION))
        params = {"from": start.isoformat(), **({"segment": "eu"} if segment == "eu" else {})}
        report = client.get(f"/v1/models/{MODEL}/sla", params=params, headers=Api.bearer(key))
        assert report.status_code == 200, report.text
        by_hour = {
            int((datetime.fromisoformat(w["start"]) - start) / timedelta(hours=1)): w
            for w in report.json()["windows"]
        }
        assert sorted(by_hour) == sorted(SEPARATION)
        for hour, window in by_hour.items():
            (result,) = window["objectives"]
            assert result["status"] == "breached"
            if hour in COMPLETED:
                assert (result["value"], result["upper"]) == (0.45, 0.52)
                assert window["completeness"] == MATURITY["completeness"]
