"""Label maturity in GET /metrics through the real app (SQLite, Postgres).

Model "late" (hourly windows, segment "eu") receives, through the batches API,
every prediction of some past windows without its label and then the labels
known so far, with the prediction's own timestamp (the delayed-label
protocol). The completeness curve and the overdue count must match the rows
posted (counted here, independently of the service), and the latest window
holding both kinds of rows must expose the stored ``maturity`` document as it
is. The model's label settings and the latest window's maturity document
are written in SQL here (fixed values the scrape must show as they are).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from _read_support import drain
from conftest import Api
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.db.labels import overdue_windows
from app.db.models import ALL_SEGMENTS, Model, WindowMetrics
from app.exporter import names
from app.exporter.maturity import MaturityCollector
from app.timegrid import window_start

MODEL = "late"
HORIZON = timedelta(days=2)
"""The model's ``label_horizon`` ("2d")."""


@dataclass(frozen=True)
class Sent:
    """One window's rows as posted: scored (without labels) and labelled so far."""

    ended_ago: timedelta
    scored: int
    labelled: int
    segment: str | None = "eu"


SENT = (
    Sent(timedelta(hours=2), 80, 40),  # the latest window holding both kinds of rows
    Sent(timedelta(days=1), 100, 30),
    Sent(timedelta(days=7), 100, 100),
    Sent(timedelta(days=10), 40, 0),  # no label at all: overdue all the same
    Sent(timedelta(days=20), 30, 29, None),  # all traffic only; 96.7%: on time
    Sent(timedelta(days=20, hours=1), 30, 28, None),  # 93.3%: overdue
    Sent(timedelta(days=30), 50, 20),
    Sent(timedelta(days=40), 10, 10),
)
MATURITY = {
    "labelled": 40,
    "scored": 80,
    "completeness": 0.5,
    "assumption": "class",
    "prior": {"value": 0.061, "lower": 0.04, "upper": 0.09, "level": 0.95},
    "metrics": {"precision": 0.58, "f1": 0.49, "recall": 0.42, "brier": None},
    "intervals": {"precision": {"lower": 0.4, "upper": 0.7, "level": 0.95}},
    "fit": {"p_value": 0.31, "reliable": True},
}


@dataclass
class Posted:
    api: Api
    now: datetime
    """The top of the hour the windows were posted against (every window's end is a
    whole number of hours before it)."""


@pytest.fixture
def posted(api_factory: Callable[..., Api]) -> Posted:
    api = api_factory(backfill_max_age_days=60)
    api.create_model(MODEL, window="1h", threshold=0.5, segments=["eu"], n_bins=20)
    token = api.create_key(MODEL)
    now = window_start(datetime.now(UTC), "1h")
    rng = np.random.default_rng(20261127)
    for sent in SENT:
        at = (now - sent.ended_ago - timedelta(minutes=30)).isoformat()
        scores = rng.random(sent.scored).round(4)
        labels = (rng.random(sent.scored) < 0.2).astype(int)
        segment = {} if sent.segment is None else {"segment": sent.segment}
        body = {"timestamp": at, **segment, "scores": scores.tolist()}
        assert api.post_batch(MODEL, token, body).status_code == 202
        if sent.labelled:
            body["labels"] = labels[: sent.labelled].tolist()
            body["scores"] = scores[: sent.labelled].tolist()
            assert api.post_batch(MODEL, token, body).status_code == 202
    drain(api.client)
    factory = api.client.app.state.session_factory  # type: ignore[attr-defined]
    with factory() as session, session.begin():
        model = session.scalars(sa.select(Model).where(Model.name == MODEL)).one()
        model.label_missingness, model.label_horizon = "class", "2d"
        latest = now - timedelta(hours=3)
        for stored in session.scalars(
            sa.select(WindowMetrics).where(
                WindowMetrics.model_id == model.id, WindowMetrics.window_start == latest
            )
        ):
            stored.maturity = MATURITY
    return Posted(api, now)


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _expected_curve() -> dict[tuple[str, str], float]:
    ages = {timedelta(days=1): "1d", timedelta(days=7): "7d", timedelta(days=30): "30d"}
    out = {}
    for sent in SENT:
        if sent.ended_ago in ages:
            for segment in ("all", "eu") if sent.segment else ("all",):
                out[(segment, ages[sent.ended_ago])] = sent.labelled / sent.scored
    return out


def _expected_overdue(segment: str) -> int:
    return sum(
        s.ended_ago >= HORIZON
        and s.labelled < 0.95 * s.scored
        and (segment == "all" or s.segment == segment)
        for s in SENT
    )


def test_the_curve_and_the_overdue_windows_follow_the_rows_posted(posted: Posted) -> None:
    factory = posted.api.client.app.state.session_factory  # type: ignore[attr-defined]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MaturityCollector(factory, clock=lambda: posted.now))
    samples = _samples(generate_latest(registry).decode())
    curve = {
        (labels["segment"], labels["age"]): value
        for (name, key), value in samples.items()
        if name == names.LABEL_COMPLETENESS and (labels := dict(key))["model"] == MODEL
    }
    assert curve == pytest.approx(_expected_curve(), abs=1e-12)
    assert len(curve) == 6
    for segment in ("all", "eu"):
        key = (names.LABELS_OVERDUE, frozenset({("model", MODEL), ("segment", segment)}))
        assert samples[key] == _expected_overdue(segment)
    assert _expected_overdue("all") == 3 and _expected_overdue("eu") == 2


def test_the_scrape_shows_the_stored_maturity_and_passes_promtool(posted: Posted) -> None:
    r = posted.api.client.get("/metrics")
    assert r.status_code == 200
    samples = _samples(r.text)

    def get(name: str, segment: str, **labels: str) -> Any:
        every = {"model": MODEL, "segment": segment, **labels}
        return samples.get((name, frozenset(every.items())))

    for segment in ("all", "eu"):
        assert get(names.WINDOW_LABEL_COMPLETENESS, segment) == 0.5
        assert get(names.WINDOW_COMPLETED, segment, metric="prior") == 0.061
        assert get(names.WINDOW_COMPLETED, segment, metric="precision") == 0.58
        assert get(names.WINDOW_COMPLETED, segment, metric="f1") == 0.49
        assert get(names.WINDOW_COMPLETED, segment, metric="recall") is None  # compact
        assert get(names.LABELS_OVERDUE, segment) == _expected_overdue(segment)
    if shutil.which("promtool") is not None:
        done = subprocess.run(
            ["promtool", "check", "metrics"],
            input=r.text,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_models_without_a_horizon_or_completion_export_neither(posted: Posted) -> None:
    posted.api.create_model("plain", window="1h", threshold=0.5)
    text = posted.api.client.get("/metrics").text
    plain = [k for k in _samples(text) if ("model", "plain") in k[1]]
    assert {name for name, _ in plain}.isdisjoint(
        {names.LABELS_OVERDUE, names.LABEL_COMPLETENESS, names.WINDOW_LABEL_COMPLETENESS}
    )
    factory = posted.api.client.app.state.session_factory  # type: ignore[attr-defined]
    with factory() as session:
        model_id = session.scalars(sa.select(Model.id).where(Model.name == MODEL)).one()
        counts = overdue_windows(session, {model_id: posted.now - HORIZON})
        assert overdue_windows(session, {}) == {}
    assert counts == {(model_id, ALL_SEGMENTS): 3, (model_id, "eu"): 2}
