"""Upgrade to the delta schema (0003) from a database filled through the old one.

The database is taken down to revision 0002 and filled as the code of that
revision did (a batch row per batch; its counts added to the window
aggregates at once; a stored result), then upgraded. Reads, the exporter's
counters and the next fold must see exactly the old data, and a new batch
through the new path adds to it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import orjson
import pytest
import sqlalchemy as sa
from _worker_support import fold_pending, session_factory_for
from alembic import command

from app.config import Settings
from app.db.migrate import alembic_config, upgrade_to_head
from app.db.models import ALL_SEGMENTS, Model, WindowAggregate, WindowMetrics
from app.db.types import Int64Array, JSONDocument, UTCDateTime
from app.drift.simulation import shifted_logit_scores
from app.exporter.reads import read_models
from app.metrics.binning import default_bin_edges, histogram_counts
from app.metrics.confusion import ConfusionCounts
from app.metrics.probability import ProbabilitySums
from app.services.ingest.batch import ingest_batch
from app.services.models.config import ModelConfig
from app.services.read.windows import stored_windows
from app.timegrid import WindowRange, window_start

N_BINS = 200
THRESHOLD = 0.5


@pytest.fixture
def old_url(database_url: str) -> Iterator[str]:
    """``database_url`` at revision 0002 (the schema before deltas); back at head after."""
    command.downgrade(alembic_config(database_url), "0002")
    yield database_url
    upgrade_to_head(database_url)


def _old_window(
    conn: sa.Connection,
    model_id: int,
    segment: str,
    start: datetime,
    batches: list[tuple[np.ndarray, np.ndarray]],
) -> None:
    """Insert what revision 0002 stored for ``batches`` (scores, labels) in one aggregate."""
    edges = default_bin_edges((THRESHOLD,), n_bins=N_BINS)
    scores = np.concatenate([s for s, _ in batches])
    labels = np.concatenate([y for _, y in batches])
    pos, neg = histogram_counts(scores, labels, edges)
    sums = ProbabilitySums.from_predictions(batches[0][0], batches[0][1])
    for s, y in batches[1:]:
        sums = sums + ProbabilitySums.from_predictions(s, y)  # added batch by batch
    cm = ConfusionCounts.from_predictions(scores, labels, THRESHOLD)
    conn.execute(
        sa.insert(_OLD_AGGREGATE).values(
            model_id=model_id,
            segment=segment,
            window_start=start,
            n=int(scores.size),
            positives=int(labels.sum()),
            hist_positives=pos,
            hist_negatives=neg,
            confusion=[
                {"threshold": THRESHOLD, "tp": cm.tp, "fp": cm.fp, "fn": cm.fn, "tn": cm.tn}
            ],
            sums_positives=int(sums.positives),
            sums_negatives=int(sums.negatives),
            brier_sum=sums.brier_sum,
            log_loss_sum=sums.log_loss_sum,
            score_sum_positive=sums.score_sum_positive,
            score_sum_negative=sums.score_sum_negative,
            version=len(batches),
            dirty=False,
            created_at=start,
            updated_at=start,
            claim_attempt=1,
        )
    )


_OLD_AGGREGATE = sa.table(
    "window_aggregate",
    *(
        sa.column(c)
        for c in ["model_id", "segment", "n", "positives", "version", "dirty", "claim_attempt"]
    ),
    *(sa.column(c, UTCDateTime()) for c in ("window_start", "created_at", "updated_at")),
    *(sa.column(c, Int64Array()) for c in ("hist_positives", "hist_negatives")),
    sa.column("confusion", JSONDocument),
    *(
        sa.column(c)
        for c in [
            "sums_positives",
            "sums_negatives",
            "brier_sum",
            "log_loss_sum",
            "score_sum_positive",
            "score_sum_negative",
        ]
    ),
)
"""window_aggregate as revision 0002 had it."""

_OLD_BATCH = sa.table(
    "batch",
    *(
        sa.column(c)
        for c in [
            "model_id",
            "idempotency_key",
            "request_hash",
            "kind",
            "segment",
            "n",
            "positives",
        ]
    ),
    sa.column("id", sa.Uuid()),
    *(sa.column(c, UTCDateTime()) for c in ("event_at", "window_start", "received_at")),
    sa.column("response", JSONDocument),
)
"""batch as revision 0002 had it."""


def test_upgrade_keeps_old_windows_and_the_new_path_adds_to_them(old_url: str) -> None:
    rng = np.random.default_rng(21)
    now = datetime.now(UTC)
    start = window_start(now - timedelta(hours=1), "1h")
    batches = []
    for n in (300, 200):
        s, y = shifted_logit_scores(rng, n, 0.2, separation=1.5, offset=-2.0)
        batches.append((s, y.astype(np.int64)))
    settings = Settings(_env_file=None, database_url=old_url)  # type: ignore[call-arg]
    with session_factory_for(old_url) as factory:
        with factory() as session, session.begin():
            session.execute(
                sa.insert(Model).values(
                    id=1,
                    name="fraud",
                    window="1h",
                    thresholds=[THRESHOLD],
                    pi0=0.1,
                    segments=["eu"],
                    sla=[],
                    drift={"reference": None},
                    n_bins=N_BINS,
                    bin_edges=default_bin_edges((THRESHOLD,), n_bins=N_BINS),
                    created_at=now,
                    updated_at=now,
                )
            )
            for i, (s, y) in enumerate(batches):
                session.execute(
                    sa.insert(_OLD_BATCH).values(
                        model_id=1,
                        id=uuid.uuid4(),
                        idempotency_key=f"k{i}",
                        request_hash="0" * 64,
                        kind="scores",
                        event_at=start,
                        window_start=start,
                        segment="eu" if i == 0 else None,
                        n=int(s.size),
                        positives=int(y.sum()),
                        response={},
                        received_at=now,
                    )
                )
            conn = session.connection()
            _old_window(conn, 1, ALL_SEGMENTS, start, batches)
            _old_window(conn, 1, "eu", start, batches[:1])
        before = {(a.segment): (a.n, a.brier_sum, a.log_loss_sum) for a in _old_rows(factory)}

    upgrade_to_head(old_url)

    with session_factory_for(old_url) as factory:
        rows = {a.segment: a for a in _aggregates(factory)}
        assert {k: (a.n, a.brier_sum, a.log_loss_sum) for k, a in rows.items()} == before
        assert (rows[ALL_SEGMENTS].batches, rows["eu"].batches) == (2, 1)  # rebuilt from batches
        with factory() as session:
            (counted,) = read_models(session)
            assert (counted.batches, counted.rows) == (2, 500)
            model = ModelConfig.from_row(session.get(Model, 1))  # type: ignore[arg-type]
            hour = WindowRange(start, start + timedelta(hours=1), "1h")
            (view,) = stored_windows(session, model, ALL_SEGMENTS, hour)
            assert view.n == 500
        # a new batch through the delta path adds to the old sums
        s, y = shifted_logit_scores(rng, 100, 0.2, separation=1.5, offset=-2.0)
        body = {
            "timestamp": (start + timedelta(minutes=5)).isoformat(),
            "scores": s.tolist(),
            "labels": y.astype(int).tolist(),
        }
        with factory() as session:
            ingest_batch(
                session,
                model,
                orjson.dumps(body),
                idempotency_key=None,
                settings=settings,
                now=datetime.now(UTC),
            )
        with factory() as session:
            assert read_models(session)[0].rows == 600  # unfolded delta counted
        assert fold_pending(old_url) == 1
        after = {a.segment: a for a in _aggregates(factory)}[ALL_SEGMENTS]
        assert (after.n, after.batches, after.version) == (600, 3, 3)
        expected = before[ALL_SEGMENTS][1] + ProbabilitySums.from_predictions(s, y).brier_sum
        assert after.brier_sum == pytest.approx(expected, rel=1e-15)
        edges = default_bin_edges((THRESHOLD,), n_bins=N_BINS)
        every_s = np.concatenate([b[0] for b in batches] + [s])
        every_y = np.concatenate([b[1] for b in batches] + [y.astype(np.int64)])
        pos, neg = histogram_counts(every_s, every_y, edges)
        np.testing.assert_array_equal(after.hist_positives, pos)
        np.testing.assert_array_equal(after.hist_negatives, neg)
        with factory() as session:
            stored = session.scalars(sa.select(WindowMetrics)).all()
        assert {(m.segment, m.aggregate_version) for m in stored} == {(ALL_SEGMENTS, 3)}


def _old_rows(factory: sa.orm.sessionmaker[sa.orm.Session]) -> list[sa.Row]:
    with factory() as session:
        return list(
            session.execute(
                sa.text("SELECT segment, n, brier_sum, log_loss_sum FROM window_aggregate")
            ).all()
        )


def _aggregates(factory: sa.orm.sessionmaker[sa.orm.Session]) -> list[WindowAggregate]:
    with factory() as session:
        return list(session.scalars(sa.select(WindowAggregate)))
