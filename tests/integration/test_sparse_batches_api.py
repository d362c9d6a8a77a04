"""Sparse histogram batches over HTTP (both backends): accepted, refused, nothing stored."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from app.api.schemas import BATCH_EXAMPLES
from app.db.models import Batch, WindowAggregate


def test_the_documented_sparse_example_is_accepted(api: Any) -> None:
    api.create_model("fraud", threshold=0.5, n_bins=100)
    token = api.create_key("fraud")
    body = copy.deepcopy(BATCH_EXAMPLES["sparse_histogram"]["value"])
    body["timestamp"] = datetime.now(UTC).isoformat()
    r = api.post_batch("fraud", token, body, key="k1")
    assert r.status_code == 202, r.text
    assert r.json()["count"] == 17


def test_bad_sparse_batches_name_the_element_and_store_nothing(
    api: Any, db_engine: sa.Engine
) -> None:
    api.create_model("fraud", threshold=0.5, n_bins=100)
    token = api.create_key("fraud")
    now = datetime.now(UTC).isoformat()
    cases = {
        "histogram.positives.bins[1]": {
            "positives": {"bins": [3, 3], "counts": [1, 1]},
            "negatives": {"bins": [], "counts": []},
        },
        "histogram.sums.score_sum_positive": {
            "positives": {"bins": [3], "counts": [1]},
            "negatives": {"bins": [0], "counts": [1]},
            "sums": {
                "brier_sum": 0.5,
                "log_loss_sum": 1.0,
                "score_sum_positive": 1.5,
                "score_sum_negative": 0.0,
            },
        },
        "histogram.sums.log_loss_sum": {  # past what the worker's fold can hold
            "positives": {"bins": [3], "counts": [1]},
            "negatives": {"bins": [0], "counts": [1]},
            "sums": {
                "brier_sum": 0.6,
                "log_loss_sum": 5e269,
                "score_sum_positive": 0.5,
                "score_sum_negative": 0.5,
            },
        },
        "histogram.unlabelled.counts": {"unlabelled": {"bins": [0]}},
    }
    for i, (field, histogram) in enumerate(cases.items()):
        r = api.post_batch("fraud", token, {"timestamp": now, "histogram": histogram}, key=f"k{i}")
        assert r.status_code == 422, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert [e["field"] for e in r.json()["errors"]] == [field]
    with db_engine.connect() as conn:
        assert conn.scalar(sa.select(sa.func.count()).select_from(Batch)) == 0
        assert conn.scalar(sa.select(sa.func.count()).select_from(WindowAggregate)) == 0
