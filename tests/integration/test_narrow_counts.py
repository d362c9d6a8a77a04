"""Histograms stored narrowed on a real database (SQLite and PostgreSQL, real migrations):
an aggregate written in the earlier raw int64 form is read as it was and rewritten narrowed
by its next fold, with the same counts as a window that never held the raw form."""

from __future__ import annotations

import numpy as np
import sqlalchemy as sa
from _worker_support import aggregate_rows, fold_pending, post_batch, register_model, utcnow
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db.types import COUNTS_MAGIC, UTCDateTime

HISTOGRAMS = ("hist_positives", "hist_negatives")


def _raw(factory: sessionmaker[Session], model_id: int) -> list[tuple[bytes, bytes]]:
    with factory() as session:
        rows = session.execute(
            sa.text(
                "SELECT hist_positives, hist_negatives FROM window_aggregate"
                " WHERE model_id = :m ORDER BY segment"
            ),
            {"m": model_id},
        )
        return [(bytes(p), bytes(n)) for p, n in rows]


def _store_raw(factory: sessionmaker[Session], model_id: int) -> None:
    """Rewrite the model's histograms as the service stored them before the narrowing."""
    rows = aggregate_rows(factory, model_id)
    with factory() as session, session.begin():
        for row in rows:
            session.execute(
                sa.text(
                    "UPDATE window_aggregate SET hist_positives = :p, hist_negatives = :n"
                    " WHERE model_id = :m AND segment = :s AND window_start = :w"
                ).bindparams(sa.bindparam("w", type_=UTCDateTime())),
                {
                    "p": np.asarray(row.hist_positives, dtype="<i8").tobytes(),
                    "n": np.asarray(row.hist_negatives, dtype="<i8").tobytes(),
                    "m": model_id,
                    "s": row.segment,
                    "w": row.window_start,
                },
            )


def test_a_raw_aggregate_reads_as_before_and_its_fold_narrows_it(
    factory: sessionmaker[Session], settings: Settings, database_url: str
) -> None:
    raw = register_model(factory, "raw", segments=["eu"])
    narrow = register_model(factory, "narrow", segments=["eu"])
    at = utcnow()
    for model in (raw, narrow):  # the same batches into both
        post_batch(factory, model, settings, at=at, rng=np.random.default_rng(7), segment="eu")
    assert fold_pending(database_url) == 4
    for histograms in _raw(factory, narrow.id):
        assert all(h.startswith(COUNTS_MAGIC) for h in histograms)

    _store_raw(factory, raw.id)
    assert all(not h.startswith(COUNTS_MAGIC) for pair in _raw(factory, raw.id) for h in pair)
    before = aggregate_rows(factory, narrow.id)
    for row, kept in zip(aggregate_rows(factory, raw.id), before, strict=True):
        for name in HISTOGRAMS:  # the raw form reads as the same counts
            assert np.array_equal(getattr(row, name), getattr(kept, name))

    for model in (raw, narrow):
        post_batch(factory, model, settings, at=at, rng=np.random.default_rng(8), segment="eu")
    assert fold_pending(database_url) == 4
    assert _raw(factory, raw.id) == _raw(factory, narrow.id)  # rewritten narrowed, same bytes
    after = zip(aggregate_rows(factory, raw.id), aggregate_rows(factory, narrow.id), strict=True)
    for row, twin in after:
        assert row.n == twin.n == 800 and int(row.hist_positives.sum()) == row.positives
