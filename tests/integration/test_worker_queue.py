"""The queue protocol on a real database (SQLite and PostgreSQL, real migrations):
claim, lease, fenced completion, dirty mark, release, invalidation."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import sqlalchemy as sa
from _worker_support import (
    aggregate_rows,
    claim_one,
    metrics_rows,
    persist_one,
    post_batch,
    register_model,
    session_factory_for,
    utcnow,
    window_starts,
)
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import queue
from app.db.models import ALL_SEGMENTS, WindowAggregate
from app.db.session import write_transaction
from app.services.refresh.groups import ClaimedWindow, Outcome, persist_group
from app.services.windows.compute import WindowResult

WAIT_SECONDS = 10.0

DUMMY = WindowResult(
    metrics={"f1": 0.5}, reasons={}, intervals={}, drift={"verdict": None}, curves=None
)


def claim(factory: sessionmaker[Session], lease_seconds: float = 30.0) -> ClaimedWindow | None:
    return claim_one(factory, lease_seconds)


def persist(factory: sessionmaker[Session], claimed: ClaimedWindow) -> Outcome:
    return persist_one(factory, claimed, DUMMY)


def test_claims_oldest_first_and_skips_leased_windows(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model = register_model(factory)
    rng = np.random.default_rng(1)
    first, second = window_starts(model, 2)
    post_batch(factory, model, settings, at=first, rng=rng)
    post_batch(factory, model, settings, at=second, rng=rng)

    a = claim(factory)
    b = claim(factory)
    assert a is not None and b is not None
    assert (a.claim.window_start, b.claim.window_start) == (first, second)
    assert a.claim.attempt == b.claim.attempt == 1
    assert a.claim.version == 0 and a.sums.n == 400  # the aggregate plus its one delta
    assert len(a.batch_ids) == 1
    assert claim(factory) is None  # both leased


def test_completion_clears_the_mark_and_stores_the_version(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model = register_model(factory)
    (start,) = window_starts(model, 1)
    post_batch(factory, model, settings, at=start, rng=np.random.default_rng(2))
    claimed = claim(factory)
    assert claimed is not None
    assert persist(factory, claimed) is Outcome.STORED

    (row,) = aggregate_rows(factory, model.id)
    assert (row.dirty, row.dirty_since, row.lease_expires_at) == (False, None, None)
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    assert (stored.aggregate_version, stored.status, stored.metrics) == (1, "fresh", {"f1": 0.5})
    assert claim(factory) is None


def test_batch_during_computation_keeps_the_window_dirty(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model = register_model(factory)
    (start,) = window_starts(model, 1)
    rng = np.random.default_rng(3)
    post_batch(factory, model, settings, at=start, rng=rng)
    claimed = claim(factory)
    assert claimed is not None
    post_batch(factory, model, settings, at=start, rng=rng)  # arrives while computing

    assert persist(factory, claimed) is Outcome.STORED_STILL_DIRTY
    (row,) = aggregate_rows(factory, model.id)
    assert row.version == 1 and row.n == 400 and row.lease_expires_at is None  # first folded
    with factory() as session:
        stats = queue.queue_stats(session)
    assert stats.dirty_windows == 1 and stats.oldest_dirty_since is not None  # second waits
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    assert (stored.aggregate_version, stored.status) == (1, "fresh")

    again = claim(factory)
    assert again is not None and again.claim.version == 1 and again.sums.n == 800
    assert len(again.batch_ids) == 1
    assert persist(factory, again) is Outcome.STORED
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    assert (stored.aggregate_version, stored.status) == (2, "fresh")


def test_stale_worker_is_fenced_out_after_its_lease_expired(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model = register_model(factory)
    (start,) = window_starts(model, 1)
    rng = np.random.default_rng(4)
    post_batch(factory, model, settings, at=start, rng=rng)
    slow = claim(factory, lease_seconds=0.05)
    assert slow is not None
    time.sleep(0.2)  # the slow worker's lease expires; a batch arrives; another claims
    post_batch(factory, model, settings, at=start, rng=rng)
    fast = claim(factory)
    assert fast is not None and fast.claim.attempt == slow.claim.attempt + 1
    assert fast.claim.version == 0 and len(fast.batch_ids) == 2 and fast.sums.n == 800

    assert persist(factory, fast) is Outcome.STORED
    assert persist(factory, slow) is Outcome.FENCED_OUT  # would have folded its delta again
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, start)]
    assert stored.aggregate_version == 1
    (row,) = aggregate_rows(factory, model.id)
    assert not row.dirty and row.n == 800 and row.batches == 2  # each delta folded once
    assert claim(factory) is None


def test_release_makes_the_window_claimable_at_once(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model = register_model(factory)
    (start,) = window_starts(model, 1)
    post_batch(factory, model, settings, at=start, rng=np.random.default_rng(5))
    held = claim(factory)
    assert held is not None
    with factory() as session:
        assert persist_group(session, [], [held]) == [Outcome.RELEASED]
    (row,) = aggregate_rows(factory, model.id)
    assert row.lease_expires_at is None and row.claim_attempt == 1
    again = claim(factory)
    assert again is not None and again.claim.attempt == 2
    with factory() as session:
        persist_group(session, [], [held])  # the old claim is stale: nothing happens
    (row,) = aggregate_rows(factory, model.id)
    assert row.lease_expires_at is not None and row.claim_attempt == 2  # still held by again


def test_invalidation_fences_out_a_computation_in_progress(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model = register_model(factory)
    first, second = window_starts(model, 2)
    rng = np.random.default_rng(6)
    post_batch(factory, model, settings, at=first, rng=rng)
    post_batch(factory, model, settings, at=second, rng=rng)
    for _ in range(2):
        done = claim(factory)
        assert done is not None and persist(factory, done) is Outcome.STORED
    post_batch(factory, model, settings, at=second, rng=rng)
    in_progress = claim(factory)
    assert in_progress is not None and in_progress.claim.window_start == second

    with factory() as session, write_transaction(session):
        marked = queue.invalidate_windows(session, model.id, now=utcnow())
    assert marked == 2
    assert persist(factory, in_progress) is Outcome.FENCED_OUT
    rows = aggregate_rows(factory, model.id)
    assert all(r.dirty and r.lease_expires_at is None for r in rows)
    keys = set()
    while (c := claim(factory)) is not None:
        keys.add(c.claim.window_start)
        assert persist(factory, c) is Outcome.STORED
    assert keys == {first, second}


def test_queue_stats_count_dirty_and_leased_windows(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model = register_model(factory, segments=["eu"])
    rng = np.random.default_rng(7)
    (start,) = window_starts(model, 1)
    post_batch(factory, model, settings, at=start, rng=rng, segment="eu")  # two aggregates
    with factory() as session:
        stats = queue.queue_stats(session)
    assert (stats.dirty_windows, stats.leased_windows) == (2, 0)
    assert stats.lag_seconds >= 0.0
    held = claim(factory)
    assert held is not None
    with factory() as session:
        stats = queue.queue_stats(session)
    assert (stats.dirty_windows, stats.leased_windows) == (2, 1)
    persist(factory, held)
    with factory() as session:
        assert queue.queue_stats(session).dirty_windows == 1


@pytest.mark.postgres
def test_claim_skips_a_row_locked_by_ingestion_instead_of_waiting(pg_url: str) -> None:
    with session_factory_for(pg_url) as factory:
        settings = Settings(_env_file=None, database_url=pg_url)  # type: ignore[call-arg]
        model = register_model(factory)
        older, newer = window_starts(model, 2)
        rng = np.random.default_rng(8)
        post_batch(factory, model, settings, at=older, rng=rng)
        post_batch(factory, model, settings, at=newer, rng=rng)
        with factory() as blocker:
            blocker.execute(
                sa.select(WindowAggregate)
                .where(WindowAggregate.window_start == older)
                .with_for_update()
            ).all()  # an ingestion transaction holding the oldest window
            # Claim in a thread: if it waited for the lock, it would wait until
            # the rollback below, which only happens after the bounded join.
            result: list[ClaimedWindow | None] = []
            thread = threading.Thread(target=lambda: result.append(claim(factory)))
            thread.start()
            thread.join(WAIT_SECONDS)
            blocked = thread.is_alive()
            blocker.rollback()
            thread.join(WAIT_SECONDS)
            assert not blocked, "the claim waited for a locked row"
            (got,) = result
            assert got is not None and got.claim.window_start == newer
        got = claim(factory)
        assert got is not None and got.claim.window_start == older


def test_invalidation_fences_out_a_first_fold_in_progress(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    """A window whose first fold is being computed (version 0) is fenced out too: its
    drift reference may have received data meanwhile."""
    model = register_model(factory)
    (start,) = window_starts(model, 1)
    post_batch(factory, model, settings, at=start, rng=np.random.default_rng(9))
    in_progress = claim(factory)
    assert in_progress is not None and in_progress.claim.version == 0
    with factory() as session, write_transaction(session):
        assert queue.invalidate_windows(session, model.id, now=utcnow()) == 1
    assert persist(factory, in_progress) is Outcome.FENCED_OUT
    again = claim(factory)
    assert again is not None and len(again.batch_ids) == 1  # the delta is still there
    assert persist(factory, again) is Outcome.STORED


def test_claims_read_a_bounded_sample_of_the_oldest_changes_in_order(
    factory: sessionmaker[Session], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a sample of 2 changes per kind, a window holding many deltas crowds it but
    is the oldest anyway; every window is still claimed, oldest change first."""
    monkeypatch.setattr(queue, "CLAIM_SCAN_ROWS", 2)
    model = register_model(factory)
    rng = np.random.default_rng(5)
    starts = window_starts(model, 5)
    crowded = starts[2]
    for _ in range(4):  # the four oldest deltas all belong to one window
        post_batch(factory, model, settings, at=crowded, rng=rng, n=50)
    for start in (starts[4], starts[0], starts[3], starts[1]):
        post_batch(factory, model, settings, at=start, rng=rng, n=50)

    claimed = []
    while (one := claim(factory)) is not None:
        claimed.append(one)
    assert [c.claim.window_start for c in claimed] == [
        crowded,
        starts[4],
        starts[0],
        starts[3],
        starts[1],
    ]
    assert [len(c.batch_ids) for c in claimed] == [4, 1, 1, 1, 1]  # every delta, not the sample


def test_a_long_queue_is_claimed_in_order_past_the_sample(
    factory: sessionmaker[Session], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue, "CLAIM_SCAN_ROWS", 2)
    model = register_model(factory)
    rng = np.random.default_rng(6)
    starts = window_starts(model, 6)
    order = [starts[i] for i in (3, 5, 0, 4, 1, 2)]
    for start in order:
        post_batch(factory, model, settings, at=start, rng=rng, n=50)
    with factory() as session, write_transaction(session):
        queue.invalidate_windows(
            session, model.id, now=utcnow(), segment=ALL_SEGMENTS, start_from=starts[2]
        )  # dirty marks newer than every delta: they do not jump the queue

    claimed = []
    while (one := claim(factory)) is not None:
        claimed.append(one.claim.window_start)
    assert claimed == order


def test_dependents_of_mixed_range_forms_are_locked_and_marked_in_one_statement(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    """Ranges of different forms (segment or not, bounds, an excluded period) in one
    lock and one mark: exactly the rows some range holds are marked (checked row by
    row against the ranges' definition)."""
    model = register_model(factory, segments=["eu"])
    starts = window_starts(model, 6)
    rng = np.random.default_rng(12)
    for i, start in enumerate(starts):
        post_batch(factory, model, settings, at=start, rng=rng, segment="eu" if i % 2 else None)
    ranges = [
        queue.KeyRange(model.id, "eu", starts[1], starts[2]),
        queue.KeyRange(model.id, exclude=(starts[0], starts[4])),
        queue.KeyRange(model.id, start_from=starts[3], start_to=starts[4]),
        queue.KeyRange(model.id, ALL_SEGMENTS, start_to=starts[1]),
    ]

    def held(row: WindowAggregate, r: queue.KeyRange) -> bool:
        start = row.window_start
        return (
            (r.segment is None or row.segment == r.segment)
            and (r.start_from is None or start >= r.start_from)
            and (r.start_to is None or start < r.start_to)
            and (r.exclude is None or not r.exclude[0] <= start < r.exclude[1])
        )

    expected = {
        (row.segment, row.window_start)
        for row in aggregate_rows(factory, model.id)
        if any(held(row, r) for r in ranges)
    }
    assert 0 < len(expected) < len(aggregate_rows(factory, model.id))
    with factory() as session, write_transaction(session):
        locked = queue.lock_claimed(session, [], ranges)
        assert (locked.held, locked.dependents) == ({}, len(expected))
        assert queue.mark_dependents(session, ranges, utcnow()) == len(expected)
    rows = aggregate_rows(factory, model.id)
    assert {(r.segment, r.window_start) for r in rows if r.dirty} == expected
    assert all(r.claim_attempt == (1 if r.dirty else 0) for r in rows)  # fenced out
