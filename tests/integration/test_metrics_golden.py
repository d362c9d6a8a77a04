"""The text of GET /metrics on a small varied fleet, line for line against a golden file.

The golden files (tests/integration/data/metrics_golden_<backend>.json) were
written by the exporter before its scrape was made lean (issue 23.3), so a
change of how the text is produced that changes any line fails here. The
fleet holds what the exposition distinguishes: the compact and full
expositions and a model's own setting; registered, all-traffic and
deregistered segments; a latest window of unlabelled rows only (estimates)
over a labelled one; windows holding both kinds of rows (maturity, completed
SLA); flagged and breached windows in a row (streaks); a pending detail; a
window no longer fresh; a model without windows. Each text is read cold,
then warm (every cache filled), unsharded and as each of 4 shards.

The key order of a stored document differs between the backends (PostgreSQL's
jsonb orders keys), so each backend has its own file. To write them again
from the code of the working tree (only to record a deliberate change of the
exposition): ``PRIORWATCH_WRITE_GOLDEN=1 .venv/bin/pytest
tests/integration/test_metrics_golden.py``.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import ALL_SEGMENTS, Model, WindowAggregate, WindowMetrics
from app.exporter.collector import WindowResultsCollector
from app.exporter.estimates import EstimateCollector
from app.exporter.exposition import COMPACT, FULL, Exposition
from app.exporter.maturity import MaturityCollector
from app.exporter.reads import Shard
from app.exporter.streaks import StreakCollector

NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)
"""The maturity part's clock (and the top of the hour the windows end before)."""
DATA = Path(__file__).parent / "data"
SHARDS: tuple[Shard | None, ...] = (None, (0, 4), (1, 4), (2, 4), (3, 4))
SLA = [
    {"metric": "calibrated_f1", "op": ">=", "target": 0.3},
    {"metric": "auc_roc", "op": ">=", "target": 0.7, "evidence": "point", "id": "roc"},
    {"metric": "precision", "op": "<=", "target": 0.9},
]


def _model(i: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"m-{i}",
        "window": "1h",
        "thresholds": [0.5],
        "pi0": 0.05,
        "cost_ratio": 0.7,
        "segments": ["eu", "us"],
        "sla": SLA,
        "drift": {"reference": {"trailing_windows": 3}},
        "n_bins": 4,
        "label_missingness": "class",
        "label_horizon": "2h",
        "bin_edges": [0.0, 0.25, 0.5, 0.75, 1.0],
        "exposition": None,
        "created_at": NOW,
        "updated_at": NOW,
        **fields,
    }


MODELS = [
    _model(1),
    _model(2, exposition="full", label_horizon=None),
    _model(3, exposition=["priorwatch_window_metric_lower"], segments=["eu"]),
    _model(4, exposition="compact", label_missingness="none", sla=[]),
    _model(5),  # no window
    _model(6, name='m "6"\\x', segments=["eu", "us", "all"]),  # escaped labels
]


def _documents(seed: int) -> dict[str, Any]:
    """A window's stored documents, their values varied by ``seed``."""
    v = 0.05 + (seed % 17) / 23

    def interval(x: float) -> dict[str, float]:
        return {"level": 0.95, "lower": x - 0.07, "upper": x + 0.11}

    metrics = {
        "prior": v / 3, "recall": v, "precision": 1 - v, "f1": v * 0.9, "mcc": v - 0.5,
        "calibrated_f1": v * 0.8, "calibrated_precision": v * 0.7, "auc_roc": 0.5 + v / 2,
        "ops_f1": v * 0.6, "brier": None, "specificity": 1.0, "gini": 12,
        "weighted_accuracy": v / 7,
    }  # fmt: skip
    intervals = {name: interval(metrics[name]) for name in ("calibrated_f1", "auc_roc", "mcc")}
    intervals["precision"] = {"level": 0.95, "lower": None, "upper": 0.99}
    drift = {
        "status": "ok",
        "prior": {"flag": seed % 2 == 0, "p_value": v / 10, "effect": v - 0.3, "test": "chi2"},
        "likelihood": {"flag": seed % 3 == 0, "p_value": 1.0, "effect": 0.0, "per_class": {}},
    }
    maturity = {
        "labelled": 40, "scored": 80, "completeness": 0.25 + v / 2, "assumption": "class",
        "prior": {"value": v / 4, "lower": 0.01, "upper": 0.3},
        "metrics": {"precision": 0.9 - v, "f1": v / 2, "recall": v, "calibrated_f1": v / 3,
                    "auc_roc": 0.6 + v / 5, "brier": None},
        "intervals": {"calibrated_f1": interval(v / 3)}, "reasons": {"brier": "undefined"},
    }  # fmt: skip
    estimate = {
        "prior": {"value": v / 5, "lower": v / 6, "upper": v / 4, "p_value": 0.2},
        "metrics": {"precision": v, "f1": v / 2, "recall": None, "auc_pr": v / 9},
        "fit": {"status": "ok", "verdict": "prior" if seed % 2 else "none", "p_value": 0.03},
        "reliable": seed % 4 != 1,
        "error": {"prior": 0.01, "precision": -v / 10, "f1": 0.03, "auc_pr": v / 100},
    }  # fmt: skip
    return {"metrics": metrics, "intervals": intervals, "reasons": {"brier": "no positives"},
            "drift": drift, "maturity": maturity, "estimate": estimate}  # fmt: skip


def _windows(model_id: int) -> list[tuple[str, int, dict[str, Any]]]:
    """(segment, hours before NOW the window starts, what differs) of a model's windows."""
    if model_id == 5:
        return []
    out = []
    for segment in (ALL_SEGMENTS, "eu", "us", "old"):
        for hours in (2, 3, 4, 5, 25):
            out.append((segment, hours, {}))
    out.append((ALL_SEGMENTS, 1, {"n": 0}))  # unlabelled rows only: estimates only
    out.append(("eu", 1, {"status": "stale"}))
    out.append(("us", 1, {"detail_version": None}))  # its detail pending
    out.append(("eu", 8, {"maturity": None, "n_unlabelled": 0}))
    out.append(("us", 169, {}))  # ended 7 days ago: the completeness curve
    return out


def fill(factory: sessionmaker[Session]) -> None:
    aggregates, results = [], []
    counts = np.array([3, 1, 2, 5], dtype=np.int64)
    for model in MODELS:
        for seed, (segment, hours, change) in enumerate(_windows(model["id"])):
            start = NOW - timedelta(hours=hours)
            key = {"model_id": model["id"], "segment": segment, "window_start": start}
            aggregates.append({
                **key, "n": change.get("n", 11), "n_unlabelled": change.get("n_unlabelled", 7),
                "positives": 4, "hist_positives": counts, "hist_negatives": counts,
                "confusion": [{"threshold": 0.5, "tp": 1, "fp": 1, "fn": 1, "tn": 1}],
                "version": 2, "dirty": False, "created_at": NOW, "updated_at": NOW,
            })  # fmt: skip
            documents = _documents(seed + model["id"])
            if "maturity" in change:
                documents["maturity"] = None
            results.append({
                **key, "aggregate_version": 2, "detail_version": change.get("detail_version", 2),
                "computed_at": NOW - timedelta(minutes=seed),
                "status": change.get("status", "fresh"),
                **documents,
            })  # fmt: skip
    with factory() as session, session.begin():
        session.execute(sa.insert(Model), MODELS)
        session.execute(sa.insert(WindowAggregate), aggregates)
        session.execute(sa.insert(WindowMetrics), results)


def texts(factory: sessionmaker[Session], exposition: Exposition) -> dict[str, str]:
    """The text of every shard, each read cold then warm (both must be the same)."""
    out = {}
    for shard in SHARDS:
        collector = WindowResultsCollector(
            factory,
            (
                StreakCollector(factory),
                EstimateCollector(factory),
                MaturityCollector(factory, lambda: NOW),
            ),
            exposition=exposition,
            shard=shard,
        )
        cold = collector.render_text()
        assert collector.render_text() == cold, f"warm scrape of {shard} differs from its cold one"
        out["all" if shard is None else f"{shard[0]}of{shard[1]}"] = cold
    return out


def test_metrics_text_matches_golden(factory: sessionmaker[Session]) -> None:
    fill(factory)
    with factory() as session:
        backend = session.get_bind().dialect.name
    got = {
        f"{name}/{shard}": text
        for name, exposition in (("compact", COMPACT), ("full", FULL))
        for shard, text in texts(factory, exposition).items()
    }
    golden = DATA / f"metrics_golden_{backend}.json"
    if os.environ.get("PRIORWATCH_WRITE_GOLDEN") == "1":
        golden.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"wrote {golden}")
    expected = json.loads(golden.read_text())
    assert sorted(got) == sorted(expected)
    for name in sorted(expected):
        assert got[name].splitlines() == expected[name].splitlines(), name
    assert len(expected["compact/all"].splitlines()) > 300  # the fleet is exposed at all


def _collector(factory: sessionmaker[Session], shard: Shard | None) -> WindowResultsCollector:
    parts = (
        StreakCollector(factory),
        EstimateCollector(factory),
        MaturityCollector(factory, lambda: NOW),
    )
    return WindowResultsCollector(factory, parts, exposition=COMPACT, shard=shard)


def test_a_warm_scrape_after_changes_equals_a_cold_one(factory: sessionmaker[Session]) -> None:
    """Every cache (window text, streaks, maturity) gives what a new collector reads once
    results are recomputed and a model's exposition changes between two scrapes."""
    fill(factory)
    warm = {shard: _collector(factory, shard) for shard in SHARDS}
    before = {shard: collector.render_text() for shard, collector in warm.items()}
    wm = WindowMetrics
    with factory() as session, session.begin():
        latest = NOW - timedelta(hours=2)
        session.execute(
            sa.update(wm)
            .where(wm.window_start == latest, wm.model_id.in_([1, 2]))
            .values(
                computed_at=NOW + timedelta(minutes=5),
                maturity=_documents(99)["maturity"],
                metrics=_documents(98)["metrics"],
            )
        )
        session.execute(sa.update(Model).where(Model.id == 3).values(exposition="full"))
    for shard, collector in warm.items():
        after = collector.render_text()
        assert after == _collector(factory, shard).render_text()
        if shard is None or shard[0] in (1, 2, 3):  # the models changed
            assert after != before[shard]
