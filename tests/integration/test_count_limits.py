"""Count ceilings: no batch can overflow a window's or a model's totals, and reads of
totals past int64 (stored before the ceilings existed) still answer, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from _worker_support import TEST_N_BINS, fold_pending
from sqlalchemy.orm import Session

from app.db import queries
from app.db.models import ALL_SEGMENTS, Batch, WindowAggregate
from app.services.ingest import batch as ingestion
from app.services.models.engine_cache import EngineCache
from app.services.windows.limits import (
    FOLDED_TOTAL_TTL_SECONDS,
    MAX_BATCH_COUNT,
    MAX_MODEL_COUNT,
    MAX_WINDOW_COUNT,
    UNFOLDED_TOTAL_TTL_SECONDS,
)
from app.timegrid import window_start

PROBLEM = "application/problem+json"


def _cm(tp: int, fp: int = 0, fn: int = 0, tn: int = 0, at: datetime | None = None) -> Any:
    moment = at or datetime.now(UTC)
    return {
        "timestamp": moment.isoformat(),
        "confusion_matrix": {"tp": tp, "fp": fp, "fn": fn, "tn": tn},
    }


def _stored(engine: sa.Engine) -> tuple[int, list[tuple[str, int]]]:
    """Batches, and each aggregate's ``n`` once the worker has folded every delta."""
    fold_pending(engine.url.render_as_string(hide_password=False))
    with Session(engine) as s:
        batches = int(s.scalar(sa.select(sa.func.count()).select_from(Batch)) or 0)
        rows = s.execute(sa.select(WindowAggregate.segment, WindowAggregate.n)).all()
    return batches, sorted((seg, int(n)) for seg, n in rows)


def _refused(r: Any, field: str, limit: str) -> None:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    doc = r.json()
    assert doc["type"] == "urn:priorwatch:problem:invalid-input"
    assert [e["field"] for e in doc["errors"]] == [field], doc
    assert limit in doc["errors"][0]["reason"], doc


@pytest.fixture
def setup(api: Any) -> tuple[Any, str]:
    api.create_model("fraud", n_bins=TEST_N_BINS)
    return api, api.create_key("fraud", ("ingest", "read"))


def test_a_batch_above_2_40_is_refused_and_stores_nothing(
    setup: tuple[Any, str], db_engine: sa.Engine
) -> None:
    api, token = setup
    r = api.post_batch("fraud", token, _cm(MAX_BATCH_COUNT, tn=1))
    _refused(r, "confusion_matrix", f"2^40 = {MAX_BATCH_COUNT} per batch")
    edges = api.client.get("/v1/models/fraud/bins", headers=api.admin).json()["edges"]
    bins = len(edges) - 1
    big_bin = [MAX_BATCH_COUNT + 1] + [0] * (bins - 1)
    body = {
        "timestamp": datetime.now(UTC).isoformat(),
        "histogram": {"positives": big_bin, "negatives": [0] * bins},
    }
    _refused(api.post_batch("fraud", token, body), "histogram.positives", "2^40")
    assert _stored(db_engine) == (0, [])
    # exactly at the ceiling: accepted
    assert api.post_batch("fraud", token, _cm(MAX_BATCH_COUNT)).status_code == 202
    assert _stored(db_engine) == (1, [(ALL_SEGMENTS, MAX_BATCH_COUNT)])


def _set_window_n(engine: sa.Engine, n: int) -> None:
    fold_pending(engine.url.render_as_string(hide_password=False))
    with engine.begin() as c:
        c.execute(sa.update(WindowAggregate).values(n=n, positives=n))


def test_a_full_window_refuses_the_batch_that_would_pass_2_53(
    setup: tuple[Any, str], db_engine: sa.Engine
) -> None:
    api, token = setup
    assert api.post_batch("fraud", token, _cm(1)).status_code == 202
    # the window as ~1,000 batches of 2^43 would leave it: 10 short of the ceiling
    _set_window_n(db_engine, MAX_WINDOW_COUNT - 10)
    r = api.post_batch("fraud", token, _cm(11))
    _refused(r, "confusion_matrix", f"2^53 = {MAX_WINDOW_COUNT} per window (10 left)")
    assert _stored(db_engine) == (1, [(ALL_SEGMENTS, MAX_WINDOW_COUNT - 10)])
    assert api.post_batch("fraud", token, _cm(10)).status_code == 202
    assert _stored(db_engine) == (2, [(ALL_SEGMENTS, MAX_WINDOW_COUNT)])
    # the window is full; another window still takes batches
    _refused(api.post_batch("fraud", token, _cm(1)), "confusion_matrix", "(0 left)")
    earlier = datetime.now(UTC) - timedelta(hours=2)
    assert api.post_batch("fraud", token, _cm(1, at=earlier)).status_code == 202


def _yesterday() -> datetime:
    return window_start(datetime.now(UTC), "1d") - timedelta(days=1)


def _insert_windows(engine: sa.Engine, model_id: int, counts: list[int]) -> None:
    """All-traffic aggregates of yesterday's first hours with the given ``n`` (as older
    code allowed)."""
    now = datetime.now(UTC)
    with engine.begin() as c:
        for i, n in enumerate(counts):
            start = _yesterday() + timedelta(hours=i)
            c.execute(
                sa.insert(WindowAggregate).values(
                    model_id=model_id,
                    segment=ALL_SEGMENTS,
                    window_start=start,
                    n=n,
                    positives=n // 2,
                    confusion=[
                        {"threshold": 0.5, "tp": n // 2, "fp": 0, "fn": 0, "tn": n - n // 2}
                    ],
                    version=1,
                    dirty=False,
                    created_at=now,
                    updated_at=now,
                )
            )


def test_a_model_near_2_62_refuses_the_batch_that_would_pass_it(
    setup: tuple[Any, str], db_engine: sa.Engine
) -> None:
    api, token = setup
    model_id = _model_id(db_engine)
    _insert_windows(db_engine, model_id, [MAX_MODEL_COUNT // 2, MAX_MODEL_COUNT // 2 - 2**20])
    r = api.post_batch("fraud", token, _cm(2**20 + 1))
    _refused(r, "confusion_matrix", f"2^62 = {MAX_MODEL_COUNT} per model")
    assert _stored(db_engine)[0] == 0
    assert api.post_batch("fraud", token, _cm(2**19)).status_code == 202


def test_the_folded_model_total_is_reused_until_stale(
    setup: tuple[Any, str], db_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process sums the model's aggregates (one row per window) at most once per
    FOLDED_TOTAL_TTL_SECONDS; the batches in between read only the unfolded deltas."""
    now = [0.0]
    cache = EngineCache(ttl=FOLDED_TOTAL_TTL_SECONDS, clock=lambda: now[0])
    monkeypatch.setattr(ingestion, "MODEL_TOTAL_CACHE", cache)
    unfolded = EngineCache(ttl=UNFOLDED_TOTAL_TTL_SECONDS, clock=lambda: now[0])
    monkeypatch.setattr(ingestion, "UNFOLDED_TOTAL_CACHE", unfolded)
    api, token = setup
    assert api.post_batch("fraud", token, _cm(2**19)).status_code == 202  # reads the sum: 0
    # windows written behind the cache's back (as by another process's folds)
    folded = [MAX_MODEL_COUNT // 2, MAX_MODEL_COUNT // 2 - 2**20]
    _insert_windows(db_engine, _model_id(db_engine), folded)
    now[0] = FOLDED_TOTAL_TTL_SECONDS - 0.5
    # the cached sum (0): accepted, though the stored total would refuse it
    assert api.post_batch("fraud", token, _cm(2**20)).status_code == 202
    now[0] = FOLDED_TOTAL_TTL_SECONDS + UNFOLDED_TOTAL_TTL_SECONDS  # both caches stale
    # stale: the sum is read again; with the unfolded deltas (2^19 + 2^20) the
    # model is past the ceiling, which one more example passes
    r = api.post_batch("fraud", token, _cm(1))
    _refused(r, "confusion_matrix", f"2^62 = {MAX_MODEL_COUNT} per model")
    model_id = _model_id(db_engine)
    assert cache.get(api.client.app.state.engine, model_id) == float(sum(folded))


def test_the_unfolded_deltas_sums_are_reused_until_stale(
    setup: tuple[Any, str], db_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process sums the unfolded deltas (a scan of every delta waiting) at most once
    per UNFOLDED_TOTAL_TTL_SECONDS per window; the batches in between read only the
    window's aggregates (and the model's, while MODEL_TOTAL_CACHE holds them)."""
    now = [0.0]
    cache = EngineCache(ttl=UNFOLDED_TOTAL_TTL_SECONDS, clock=lambda: now[0])
    monkeypatch.setattr(ingestion, "UNFOLDED_TOTAL_CACHE", cache)
    api, token = setup
    # the model 2^19 short of its ceiling; the batches go to a window of their own
    _insert_windows(
        db_engine, _model_id(db_engine), [MAX_MODEL_COUNT // 2, MAX_MODEL_COUNT // 2 - 2**19]
    )
    at = _yesterday() + timedelta(hours=5)
    # reads the sums (nothing waits yet)
    assert api.post_batch("fraud", token, _cm(2**18, at=at)).status_code == 202
    now[0] = UNFOLDED_TOTAL_TTL_SECONDS - 0.5
    # the cached sums (nothing waiting): accepted, though the stored deltas would refuse it
    assert api.post_batch("fraud", token, _cm(2**18 + 1, at=at)).status_code == 202
    now[0] = UNFOLDED_TOTAL_TTL_SECONDS + 0.5
    # stale: read again, the two deltas waiting pass the ceiling, which one more example passes
    _refused(api.post_batch("fraud", token, _cm(1, at=at)), "confusion_matrix", "2^62")
    key = (_model_id(db_engine), queries.BatchTarget(window_start(at, "1h"), None))
    expected = queries.UnfoldedTotals((2**19 + 1,), float(2**19 + 1))
    assert cache.get(api.client.app.state.engine, key) == expected


def _model_id(engine: sa.Engine) -> int:
    with engine.connect() as c:
        return int(c.execute(sa.text("SELECT id FROM model WHERE name = 'fraud'")).scalar_one())


def test_totals_past_int64_stored_earlier_still_read(
    setup: tuple[Any, str], db_engine: sa.Engine
) -> None:
    """GET /metrics answered 500 for every model once a model's rows passed 2^63 (SQLite)."""
    api, token = setup
    model_id = _model_id(db_engine)
    big = 2**62
    _insert_windows(db_engine, model_id, [big, big])
    r = api.client.get("/metrics")
    assert r.status_code == 200, r.text
    line = next(
        x for x in r.text.splitlines() if x.startswith("priorwatch_predictions_ingested_total{")
    )
    assert float(line.rsplit(" ", 1)[1]) == pytest.approx(2.0 * big)  # the windows' sum
    # a day merged from the two windows counts 2^63: refused with the reason, not a 500
    r = api.client.get(
        "/v1/models/fraud/windows",
        params={"granularity": "1d", "from": _yesterday().isoformat()},
        headers=api.bearer(token),
    )
    _refused(r, "granularity", "more than 2^63 - 1")
    # the hours themselves read
    r = api.client.get(
        "/v1/models/fraud/windows",
        params={"from": _yesterday().isoformat()},
        headers=api.bearer(token),
    )
    assert r.status_code == 200, r.text
