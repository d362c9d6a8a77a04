"""A delta the worker cannot fold is quarantined; its group's other windows go fresh.

The poison is written into ``batch_delta`` directly (ingestion refuses such
sums since docs/api.md's bounds): a log loss sum of 1e300, beyond the range
of the fold's fixed-point sums (2^896). Before the quarantine, folding it
raised in the claim, the whole claimed group rolled back, and every claim
after it failed the same way: the other windows of the group stayed pending
for good, and re-windowing the victim answered 500.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

from app.db import queue
from app.db.models import BatchDelta, QuarantinedDelta
from app.db.session import _sqlite_writer_lock, write_transaction
from app.metrics.probability import ProbabilitySums
from app.services.refresh.groups import Computed, Outcome, claim_windows, persist_group
from app.worker.jobs import DatabaseJobs

MODELS = ("fraud", "churn", "spam", "ads")
"""fraud is the victim; the three others are bystanders."""
POISON_LOG_LOSS = 1e300


def _batch(rng: np.random.Generator, n: int = 300) -> dict[str, Any]:
    labels = (rng.random(n) < 0.3).astype(int)
    scores = np.clip(rng.normal(0.3 + 0.4 * labels, 0.15), 0.0, 1.0)
    return {
        "timestamp": datetime.now(UTC).isoformat(),
        "scores": scores.tolist(),
        "labels": labels.tolist(),
    }


def _poison(factory: sessionmaker[Session], batch_id: uuid.UUID) -> None:
    """Give the delta of ``batch_id`` a log loss sum no batch of rows can have."""
    with factory() as session, session.begin():
        delta = session.scalars(sa.select(BatchDelta).where(BatchDelta.batch_id == batch_id)).one()
        assert delta.sums is not None
        sums = ProbabilitySums(*delta.sums)
        delta.sums = ProbabilitySums(
            sums.positives,
            sums.negatives,
            sums.brier_sum,
            POISON_LOG_LOSS,
            sums.score_sum_positive,
            sums.score_sum_negative,
        ).as_array()


def _counter(text: str, name: str, model: str) -> float:
    match = re.search(rf'^{name}{{model="{model}"}} (\S+)$', text, re.MULTILINE)
    assert match is not None, f"{name} of {model} not exposed"
    return float(match.group(1))


def test_a_poison_delta_is_quarantined_and_its_group_goes_fresh(
    api: Any, factory: sessionmaker[Session]
) -> None:
    rng = np.random.default_rng(20)
    tokens = {}
    for name in MODELS:
        api.create_model(name, n_bins=200)
        tokens[name] = api.create_key(name)
    posted = []
    for name in ("fraud", "fraud", *MODELS[1:]):  # the victim's deltas are the oldest
        r = api.post_batch(name, tokens[name], _batch(rng))
        assert r.status_code == 202, r.text
        posted.append(r.json())
    poison = uuid.UUID(posted[1]["batch_id"])
    _poison(factory, poison)

    jobs = DatabaseJobs(factory, lease_seconds=60, claim_group_size=8)
    first = jobs.claim()  # half of the 4 waiting windows: the victim's and churn's
    assert first is not None
    assert [w.model.name for w in first] == ["fraud", "churn"]
    assert jobs.run(first) == 2
    while (group := jobs.claim()) is not None:
        jobs.run(group)

    for name in MODELS:
        (window,) = api.client.get(
            f"/v1/models/{name}/windows", headers=api.bearer(tokens[name])
        ).json()["windows"]
        assert window["status"] == "fresh", (name, window)
        assert 0 < window["metrics"]["log_loss"] < 1  # the poison is not in it
        if name == "fraud":
            assert window["n"] == 300  # the good batch only
            assert window["error"].startswith("1 delta quarantined, not counted")
            assert f"batch {poison}: OverflowError" in window["error"]
        else:
            assert window["n"] == 300 and "error" not in window

    with factory() as session:
        (row,) = session.scalars(sa.select(QuarantinedDelta)).all()
        assert row.batch_id == poison and row.n == 300 and row.n_unlabelled == 0
        assert row.reason.startswith("OverflowError")
        assert session.scalar(sa.select(sa.func.count()).select_from(BatchDelta)) == 0

    exposition = api.client.get("/metrics").text
    assert _counter(exposition, "priorwatch_deltas_quarantined_total", "fraud") == 1
    assert _counter(exposition, "priorwatch_deltas_quarantined_total", "churn") == 0
    # the quarantined batch was accepted: it still counts as ingested
    assert _counter(exposition, "priorwatch_batches_ingested_total", "fraud") == 2
    assert _counter(exposition, "priorwatch_predictions_ingested_total", "fraud") == 600

    # a later refresh of the window (a new batch) still says what was left out
    r = api.post_batch("fraud", tokens["fraud"], _batch(rng))
    assert r.status_code == 202, r.text
    while (group := jobs.claim()) is not None:
        jobs.run(group)
    (window,) = api.client.get(
        "/v1/models/fraud/windows", headers=api.bearer(tokens["fraud"])
    ).json()["windows"]
    assert window["status"] == "fresh" and window["n"] == 600
    assert window["error"].startswith("1 delta quarantined, not counted")
    assert f"batch {poison}: OverflowError" in window["error"]

    r = api.client.get(
        "/v1/models/fraud/windows",
        params={"granularity": "6h"},
        headers=api.bearer(tokens["fraud"]),
    )
    assert r.status_code == 200, r.text
    assert [w["n"] for w in r.json()["windows"]] == [600]


def test_re_windowing_skips_a_poison_delta_the_worker_has_not_reached(
    api: Any, factory: sessionmaker[Session]
) -> None:
    """Before the worker quarantines it, a read folds the window without it (as the
    worker will) instead of answering 500."""
    rng = np.random.default_rng(21)
    api.create_model("fraud", n_bins=200)
    token = api.create_key("fraud")
    batches = [api.post_batch("fraud", token, _batch(rng, 100)).json() for _ in range(2)]
    _poison(factory, uuid.UUID(batches[0]["batch_id"]))
    r = api.client.get(
        "/v1/models/fraud/windows", params={"granularity": "1d"}, headers=api.bearer(token)
    )
    assert r.status_code == 200, r.text
    assert [w["n"] for w in r.json()["windows"]] == [100]


def test_on_sqlite_a_claim_fenced_out_before_its_quarantine_quarantines_nothing(
    api: Any, factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite the claim commits before its deltas are read, so its window can be
    fenced out (here: the model's settings change) before the unfoldable delta is
    quarantined: the delta then stays for the new claimant, and the old claim
    writes nothing."""
    engine = factory.kw["bind"]
    if engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL quarantines in the claim's transaction")
    rng = np.random.default_rng(22)
    api.create_model("fraud", n_bins=200)
    token = api.create_key("fraud")
    batches = [api.post_batch("fraud", token, _batch(rng, 100)).json() for _ in range(2)]
    poison = uuid.UUID(batches[0]["batch_id"])
    _poison(factory, poison)
    read_deltas = queue.claimed_deltas

    def fenced_meanwhile(session: Session, claims: Any) -> Any:
        (claim,) = claims
        writer = _sqlite_writer_lock(engine)
        assert writer.acquire(blocking=False), "the claim reads its deltas under the writer lock"
        writer.release()
        with factory() as other, write_transaction(other):
            queue.invalidate_windows(other, claim.model_id, now=datetime.now(UTC))
        return read_deltas(session, claims)

    monkeypatch.setattr(queue, "claimed_deltas", fenced_meanwhile)
    with factory() as session:
        (claimed,) = claim_windows(session, lease_seconds=60)
    monkeypatch.undo()
    assert [q.batch_id for q in claimed.quarantined] == [poison]
    with factory() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(QuarantinedDelta)) == 0
        outcomes = persist_group(session, [Computed(claimed, None, "not stored")])
    assert outcomes == [Outcome.FENCED_OUT]
    with factory() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(BatchDelta)) == 2

    jobs = DatabaseJobs(factory, lease_seconds=60)
    while (group := jobs.claim()) is not None:  # the new claimant quarantines it
        jobs.run(group)
    with factory() as session:
        (row,) = session.scalars(sa.select(QuarantinedDelta)).all()
        assert row.batch_id == poison
