"""The label-maturity families from stored documents and counts (no database): which
window each series reads, the ages of the completeness curve, overdue counts, omissions,
the compact exposition, and a text exposition promtool accepts."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.db.labels import WindowCompleteness
from app.db.models import ALL_SEGMENTS
from app.exporter import names
from app.exporter.maturity import StoredMaturity, ended_ago, horizon_cutoff, maturity_series
from app.exporter.names import MATURITY_FAMILIES
from app.exporter.reads import ModelRow
from app.exporter.text import Series, render_series

NOW = datetime(2026, 11, 27, 10, 30, tzinfo=UTC)


def _model(**overrides: Any) -> ModelRow:
    values: dict[str, Any] = {
        "id": 1,
        "name": "fraud",
        "window": "1h",
        "segments": frozenset({"eu", "all"}),
        "objectives": (),
        "batches": 0,
        "rows": 0,
        "label_missingness": "class",
        "label_horizon": "2d",
    }
    values.update(overrides)
    return ModelRow(**values)


def _document(completeness: float, prior: float | None) -> dict[str, Any]:
    """A maturity document as the worker stores it."""
    return {
        "labelled": 300,
        "scored": 1000,
        "completeness": completeness,
        "assumption": "class",
        "prior": {"value": prior, "lower": 0.04, "upper": 0.07, "level": 0.95},
        "metrics": {"precision": 0.61, "f1": 0.55, "recall": 0.5, "brier": None},
        "intervals": {"precision": {"lower": 0.5, "upper": 0.7, "level": 0.95}},
        "fit": {"p_value": 0.4, "reliable": True},
    }


def _values(samples: Series, family: str) -> dict[tuple[str, ...], float]:
    return dict(samples[family])


def test_the_latest_document_gives_completeness_and_completed_metrics() -> None:
    stored = [
        StoredMaturity(1, ALL_SEGMENTS, _document(0.3, 0.055)),
        StoredMaturity(1, "eu", _document(0.25, None)),  # an undefined prior is omitted
        StoredMaturity(1, "gone", _document(0.9, 0.1)),  # deregistered segment
        StoredMaturity(7, ALL_SEGMENTS, _document(0.9, 0.1)),  # unknown model
        StoredMaturity(1, "all", _document(0.9, 0.1)),  # a segment named "all": not exposed
    ]
    out = maturity_series([_model()], stored, [], {}, NOW)
    assert _values(out, names.WINDOW_LABEL_COMPLETENESS) == {
        ("fraud", "all"): 0.3,
        ("fraud", "eu"): 0.25,
    }
    completed = _values(out, names.WINDOW_COMPLETED)
    assert completed[("fraud", "all", "prior")] == 0.055
    assert ("fraud", "eu", "prior") not in completed
    assert completed[("fraud", "eu", "precision")] == 0.61
    assert ("fraud", "all", "brier") not in completed  # null: not completable
    assert completed[("fraud", "all", "recall")] == 0.5  # every one: trimmed as read


@pytest.mark.parametrize(
    ("window", "age", "start"),
    [
        ("1h", timedelta(days=1), datetime(2026, 11, 26, 9, tzinfo=UTC)),
        ("1h", timedelta(days=7), datetime(2026, 11, 20, 9, tzinfo=UTC)),
        ("1d", timedelta(days=1), datetime(2026, 11, 25, tzinfo=UTC)),
        ("5m", timedelta(days=30), datetime(2026, 10, 28, 10, 25, tzinfo=UTC)),
    ],
)
def test_the_window_that_ended_an_age_ago(window: str, age: timedelta, start: datetime) -> None:
    # at 10:30 the 1h window that ended a day ago is [09:00, 10:00) of the day before;
    # the 1d one is the day before yesterday (yesterday's ends only tonight, a day ago)
    assert ended_ago(_model(window=window), NOW, age) == start


def test_the_curve_takes_each_age_s_window_only() -> None:
    model = _model()
    day, week, month = (datetime(2026, 11, 26, 9, tzinfo=UTC), datetime(2026, 11, 20, 9,
                        tzinfo=UTC), datetime(2026, 10, 28, 9, tzinfo=UTC))  # fmt: skip
    curve = [
        WindowCompleteness(1, ALL_SEGMENTS, day, 300, 1000),
        WindowCompleteness(1, ALL_SEGMENTS, week, 900, 1000),
        WindowCompleteness(1, ALL_SEGMENTS, month, 1001, 1000),  # a float32 neighbour
        WindowCompleteness(1, "eu", day + timedelta(hours=1), 5, 10),  # not an age's window
        WindowCompleteness(1, "eu", week, 0, 10),
    ]
    out = _values(maturity_series([model], [], curve, {}, NOW), names.LABEL_COMPLETENESS)
    assert out == {
        ("fraud", "all", "1d"): 0.3,
        ("fraud", "all", "7d"): 0.9,
        ("fraud", "all", "30d"): 1.001,
        ("fraud", "eu", "7d"): 0.0,
    }


def test_overdue_counts_every_segment_of_models_with_a_horizon() -> None:
    models = [_model(), _model(id=2, name="churn", label_horizon=None)]
    out = maturity_series(models, [], [], {(1, "eu"): 3, (2, ALL_SEGMENTS): 4}, NOW)
    assert _values(out, names.LABELS_OVERDUE) == {("fraud", "all"): 0.0, ("fraud", "eu"): 3.0}


def test_the_horizon_cutoff_keeps_windows_that_ended_a_horizon_ago() -> None:
    assert horizon_cutoff(_model(label_horizon=None), NOW) is None
    # at 10:30, the windows starting before 10:00 two days ago ended by 10:00 then, at
    # least 2 days ago; the one starting at 10:00 ends at 11:00, less than 2 days ago
    cutoff = horizon_cutoff(_model(), NOW)
    assert cutoff == datetime(2026, 11, 25, 10, tzinfo=UTC)
    assert horizon_cutoff(_model(window="1d", label_horizon="90d"), NOW) == datetime(
        2026, 8, 29, tzinfo=UTC
    )


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_the_maturity_families() -> None:
    stored = [StoredMaturity(1, ALL_SEGMENTS, _document(0.3, 0.055))]
    curve = [WindowCompleteness(1, "eu", datetime(2026, 11, 26, 9, tzinfo=UTC), 3, 10)]
    samples = maturity_series([_model()], stored, curve, {(1, "eu"): 2}, NOW)
    text = render_series(MATURITY_FAMILIES, samples)
    parsed = {f.name for f in text_string_to_metric_families(text)}
    assert parsed == {spec.name for spec in MATURITY_FAMILIES}
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
