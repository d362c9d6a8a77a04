"""Windows claimed, computed and stored in groups (SQLite and PostgreSQL, real migrations):
the share of a claim, two claimers, and one window of a group fenced out, failing,
or not computed because the worker stops."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from _worker_support import (
    aggregate_rows,
    metrics_rows,
    post_batch,
    register_model,
    utcnow,
    window_starts,
)
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import queue
from app.db.models import ALL_SEGMENTS, BatchDelta, WindowAggregate, WindowMetrics
from app.db.session import _sqlite_writer_lock, write_transaction
from app.services.models.config import ModelConfig
from app.services.models.registry import get_model, update_model
from app.services.models.settings import ModelUpdate
from app.services.refresh import groups as window_refresh
from app.services.refresh.groups import (
    ClaimedWindow,
    Computed,
    ModelCache,
    Outcome,
    RefreshPolicy,
    claim_windows,
    persist_group,
    refresh_group,
)
from app.services.windows.compute import WindowResult
from app.services.windows.reference_cache import ReferenceCache
from app.timegrid import window_length
from app.worker.jobs import DatabaseJobs

WAIT_SECONDS = 60.0

DUMMY = WindowResult(metrics={"f1": 0.5}, reasons={}, intervals={}, drift=None, curves=None)


def _fill(
    factory: sessionmaker[Session], settings: Settings, windows: int, **fields: Any
) -> tuple[ModelConfig, list[datetime]]:
    """A model with one batch in each of ``windows`` windows, posted oldest first."""
    model = register_model(factory, **fields)
    starts = window_starts(model, windows)
    rng = np.random.default_rng(windows)
    for start in starts:
        post_batch(factory, model, settings, at=start, rng=rng, n=200)
    return model, starts


def _claim(factory: sessionmaker[Session], group_size: int) -> list[ClaimedWindow]:
    with factory() as session:
        return claim_windows(session, lease_seconds=60, group_size=group_size)


def _persist(
    factory: sessionmaker[Session],
    computed: list[Computed],
    released: list[ClaimedWindow] | None = None,
) -> list[Outcome]:
    with factory() as session:
        return persist_group(session, computed, released or [])


def _deltas(factory: sessionmaker[Session], start: datetime) -> int:
    with factory() as session:
        return int(
            session.scalar(
                sa.select(sa.func.count())
                .select_from(BatchDelta)
                .where(BatchDelta.window_start == start)
            )
            or 0
        )


def test_a_claim_takes_half_of_the_claimable_windows_up_to_the_group_size(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    _, starts = _fill(factory, settings, 10)
    sizes = []
    claimed: list[ClaimedWindow] = []
    while group := _claim(factory, group_size=4):
        sizes.append(len(group))
        claimed += group
        keys = [c.claim.key for c in group]
        assert keys == sorted(keys)
    assert sizes == [4, 3, 1, 1, 1]  # 10 -> 4 (cap), 6 -> 3, 3 -> 1, 2 -> 1, 1 -> 1
    assert [c.claim.window_start for c in claimed[:4]] == starts[:4]  # oldest changes first
    assert sorted(c.claim.window_start for c in claimed) == starts
    assert all(c.claim.attempt == 1 and len(c.batch_ids) == 1 for c in claimed)
    assert all(c.sums.n == 200 and c.claim.stored_version is None for c in claimed)


def test_a_claim_reads_the_stored_result_of_its_own_window(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    """The stored version, intervals and note a claim returns are those of the claimed
    window, not of another window's stored row (on SQLite the claim's RETURNING clause
    once compared the key with itself and read the first stored row)."""
    model, starts = _fill(factory, settings, 3)
    jobs = DatabaseJobs(factory, lease_seconds=60, claim_group_size=1)
    while (group := jobs.claim()) is not None:  # the three windows
        jobs.run(group)
    post_batch(factory, model, settings, at=starts[2], rng=np.random.default_rng(0), n=200)
    (claimed,) = _claim(factory, group_size=1)
    assert claimed.claim.window_start == starts[2]
    with factory() as session:
        stored = session.get(WindowMetrics, claimed.claim.key)
        others = session.scalars(sa.select(WindowMetrics.intervals)).all()
    assert stored is not None and stored.intervals and len(others) == 3
    assert sum(intervals == stored.intervals for intervals in others) == 1  # told apart
    assert claimed.claim.stored_version == stored.aggregate_version
    assert claimed.claim.stored_intervals == stored.intervals
    assert claimed.claim.stored_note is None


def test_two_workers_claiming_groups_never_claim_a_window_twice(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model, starts = _fill(factory, settings, 24)
    start_line = threading.Barrier(2)
    claimed: list[list[tuple[int, str, datetime]]] = [[], []]
    failures: list[BaseException] = []

    def work(me: int) -> None:
        try:
            start_line.wait(WAIT_SECONDS)
            while group := _claim(factory, group_size=4):
                claimed[me] += [c.claim.key for c in group]
                outcomes = _persist(factory, [Computed(c, DUMMY) for c in group])
                assert set(outcomes) == {Outcome.STORED}
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_SECONDS)
    assert not failures, failures
    every = claimed[0] + claimed[1]
    assert len(every) == len(set(every)) == 24
    rows = aggregate_rows(factory, model.id)
    assert {r.claim_attempt for r in rows} == {1}  # each window claimed exactly once
    assert {(r.version, r.dirty) for r in rows} == {(1, False)}
    stored = metrics_rows(factory, model.id)
    assert sorted(start for _, start in stored) == starts


def test_a_fenced_out_window_leaves_the_rest_of_its_group_stored(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model, starts = _fill(factory, settings, 6)
    group = _claim(factory, group_size=3)
    assert [c.claim.window_start for c in group] == starts[:3]
    with factory() as session, write_transaction(session):  # e.g. its reference changed
        queue.invalidate_windows(
            session,
            model.id,
            now=utcnow(),
            start_from=starts[1],
            start_to=starts[1] + window_length(model.window),
        )

    outcomes = _persist(factory, [Computed(c, DUMMY) for c in group])
    assert outcomes == [Outcome.STORED, Outcome.FENCED_OUT, Outcome.STORED]
    stored = metrics_rows(factory, model.id)
    assert {start for _, start in stored} == {starts[0], starts[2]}
    assert {r.aggregate_version for r in stored.values()} == {1}
    rows = {r.window_start: r for r in aggregate_rows(factory, model.id)}
    assert (rows[starts[0]].version, rows[starts[0]].dirty) == (1, False)
    fenced = rows[starts[1]]
    assert (fenced.version, fenced.n, fenced.dirty, fenced.claim_attempt) == (0, 0, True, 2)
    assert _deltas(factory, starts[1]) == 1  # its delta waits for the next claim
    assert _deltas(factory, starts[0]) == _deltas(factory, starts[2]) == 0


def test_on_sqlite_batches_are_stored_while_a_claim_reads_its_deltas(
    factory: sessionmaker[Session], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite the claim's write transaction holds its ``UPDATE`` alone: the deltas
    are read and folded after its commit, with the process's writer lock free, so a
    batch is stored meanwhile; the claim folds what it read and leaves that batch
    waiting for the next claim."""
    if not settings.is_sqlite:
        pytest.skip("the process's SQLite writer lock")
    model, starts = _fill(factory, settings, 1)
    read_deltas = queue.claimed_deltas

    def claimed_deltas(session: Session, claims: Any) -> Any:
        writer = _sqlite_writer_lock(session.get_bind())
        assert writer.acquire(blocking=False), "the claim reads its deltas under the writer lock"
        writer.release()
        post_batch(factory, model, settings, at=starts[0], rng=np.random.default_rng(7), n=100)
        return read_deltas(session, claims)

    monkeypatch.setattr(queue, "claimed_deltas", claimed_deltas)
    (claimed,) = _claim(factory, group_size=1)
    assert len(claimed.batch_ids) == 1  # read in a snapshot taken before the batch
    assert _persist(factory, [Computed(claimed, DUMMY)]) == [Outcome.STORED_STILL_DIRTY]
    assert _deltas(factory, starts[0]) == 1
    (row,) = aggregate_rows(factory, model.id)
    assert (row.version, row.n) == (1, 200)


def test_a_failing_window_of_a_group_is_stored_as_an_error_and_the_others_fresh(
    factory: sessionmaker[Session], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, starts = _fill(factory, settings, 6)
    group = _claim(factory, group_size=3)
    real = window_refresh.compute_window_result
    failing = group[1].sums

    def compute(model: ModelConfig, sums: Any, *args: Any, **kwargs: Any) -> WindowResult:
        if sums is failing:
            raise FloatingPointError("impossible aggregate")
        return real(model, sums, *args, **kwargs)

    monkeypatch.setattr(window_refresh, "compute_window_result", compute)
    with factory() as session:
        outcomes = refresh_group(session, group, ReferenceCache())
    assert outcomes == [Outcome.STORED] * 3
    stored = metrics_rows(factory, model.id)
    statuses = [stored[(ALL_SEGMENTS, s)].status for s in starts[:3]]
    assert statuses == ["fresh", "error", "fresh"]
    assert stored[(ALL_SEGMENTS, starts[1])].error == "FloatingPointError: impossible aggregate"
    assert stored[(ALL_SEGMENTS, starts[0])].metrics["prior"] is not None
    assert all(r.version == 1 for r in aggregate_rows(factory, model.id)[:3])  # all folded


def test_a_stop_mid_group_stores_the_computed_windows_and_releases_the_rest(
    factory: sessionmaker[Session], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, starts = _fill(factory, settings, 6)
    stop = threading.Event()
    computed = []

    def compute(*_args: Any, **_kwargs: Any) -> WindowResult:
        computed.append(1)
        stop.set()  # SIGTERM arrives while the group's first window is computed
        return DUMMY

    monkeypatch.setattr(window_refresh, "compute_window_result", compute)
    jobs = DatabaseJobs(factory, lease_seconds=60, claim_group_size=3)
    group = jobs.claim()
    assert group is not None and len(group) == 3
    assert jobs.run(group, stop) == 1
    assert len(computed) == 1
    assert (jobs.outcomes[Outcome.STORED], jobs.outcomes[Outcome.RELEASED]) == (1, 2)

    rows = {r.window_start: r for r in aggregate_rows(factory, model.id)}
    assert (rows[starts[0]].version, rows[starts[0]].lease_expires_at) == (1, None)
    for start in starts[1:3]:  # given back: lease ended, delta still waiting
        assert (rows[start].version, rows[start].lease_expires_at) == (0, None)
        assert _deltas(factory, start) == 1
    assert set(metrics_rows(factory, model.id)) == {(ALL_SEGMENTS, starts[0])}
    again = _claim(factory, group_size=1)  # claimable at once, oldest first
    assert [(c.claim.window_start, c.claim.attempt) for c in again] == [(starts[1], 2)]


def test_a_database_error_rolls_the_whole_group_back(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model, starts = _fill(factory, settings, 4)
    group = _claim(factory, group_size=2)
    assert len(group) == 2
    with factory() as session, session.begin():  # as if another fold had taken one
        session.execute(sa.delete(BatchDelta).where(BatchDelta.window_start == starts[1]))
    with pytest.raises(queue.DoubleFold):
        _persist(factory, [Computed(c, DUMMY) for c in group])
    assert metrics_rows(factory, model.id) == {}
    rows = aggregate_rows(factory, model.id)
    assert {(r.version, r.n) for r in rows} == {(0, 0)}  # nothing folded, first window included
    assert _deltas(factory, starts[0]) == 1


def test_a_group_marks_the_drift_dependents_of_its_windows_after_storing_them(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    """Window 1 uses window 0 as its reference (trailing 1): both in one group, window 1
    is stored, then marked again because window 0's data changed in the same transaction."""
    model, starts = _fill(factory, settings, 4, drift={"reference": {"trailing_windows": 1}})
    group = _claim(factory, group_size=2)
    assert [c.claim.window_start for c in group] == starts[:2]
    outcomes = _persist(factory, [Computed(c, DUMMY) for c in group])
    assert outcomes == [Outcome.STORED, Outcome.STORED]
    rows = {r.window_start: r for r in aggregate_rows(factory, model.id)}
    assert (rows[starts[0]].dirty, rows[starts[0]].claim_attempt) == (False, 1)
    assert (rows[starts[1]].version, rows[starts[1]].dirty, rows[starts[1]].claim_attempt) == (
        1,
        True,
        2,
    )
    assert (rows[starts[2]].dirty, rows[starts[2]].claim_attempt) == (True, 1)  # window 1's
    assert rows[starts[3]].claim_attempt == 0
    stored = metrics_rows(factory, model.id)
    assert {start for _, start in stored} == set(starts[:2])


def test_a_group_whose_dependents_have_no_row_yet_runs_no_marking_statement(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    """The latest window of a segment is the drift reference of a window that does not
    exist yet: its completion locks no dependent row, so it marks nothing and sends no
    ``UPDATE`` of the dirty marks."""
    model, starts = _fill(factory, settings, 1, drift={"reference": {"trailing_windows": 1}})
    group = _claim(factory, group_size=1)
    engine = factory.kw["bind"]
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", seen)
    try:
        assert _persist(factory, [Computed(c, DUMMY) for c in group]) == [Outcome.STORED]
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)
    assert not [s for s in statements if "dirty_since=coalesce" in " ".join(s.split())]
    assert statements  # the listener saw the completion's statements
    (row,) = aggregate_rows(factory, model.id)
    assert (row.window_start, row.version, row.dirty) == (starts[0], 1, False)


def test_a_database_error_while_computing_stores_nothing_of_the_group(
    factory: sessionmaker[Session], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Infrastructure, not the window: the error reaches the loop (which backs off) and
    the group's windows stay leased, to be taken over when their leases end."""
    model, _ = _fill(factory, settings, 4)
    group = _claim(factory, group_size=2)

    def compute(*_args: Any, **_kwargs: Any) -> WindowResult:
        raise sa.exc.OperationalError("SELECT 1", {}, ConnectionError("server closed"))

    monkeypatch.setattr(window_refresh, "compute_window_result", compute)
    with factory() as session, pytest.raises(sa.exc.OperationalError):
        refresh_group(session, group, ReferenceCache())
    assert metrics_rows(factory, model.id) == {}
    leased = [r for r in aggregate_rows(factory, model.id) if r.lease_expires_at is not None]
    assert [(r.window_start, r.version) for r in leased] == [
        (c.claim.window_start, 0) for c in group
    ]


def test_a_group_stores_full_and_summary_results_side_by_side(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    """A closed window whose detail is due gets a full refresh and the open one a summary
    in the same group: the summary keeps the open window's stored detail, the full result
    stamps its own."""
    model = register_model(factory, window="1w")
    *others, closed, current = window_starts(model, 4)
    rng = np.random.default_rng(17)
    for start in (current, closed, current, closed):
        post_batch(factory, model, settings, at=start, rng=rng)
    with factory() as session:  # the open window has a stored detail (version 1)
        (first,) = claim_windows(session, lease_seconds=60)
        assert first.claim.window_start == current
        refresh_group(session, [first], ReferenceCache(), policy=RefreshPolicy(0.0))
    before = metrics_rows(factory, model.id)[(ALL_SEGMENTS, current)]
    assert before.detail_version == 1 and before.curves is not None
    for start in (current, *others):  # 4 windows wait: a claim takes the 2 oldest changes
        post_batch(factory, model, settings, at=start, rng=rng)
    with factory() as session, write_transaction(session):  # as after the closed one's summary
        due = queue.database_now(session)
        session.execute(
            sa.update(WindowAggregate)
            .where(WindowAggregate.model_id == model.id, WindowAggregate.window_start == closed)
            .values(detail_due_at=due)
        )

    group = _claim(factory, group_size=2)
    assert [c.claim.window_start for c in group] == [closed, current]
    with factory() as session:
        outcomes = refresh_group(session, group, ReferenceCache(), policy=RefreshPolicy(300.0))
    assert outcomes == [Outcome.STORED, Outcome.STORED]
    stored = metrics_rows(factory, model.id)
    full, summary = stored[(ALL_SEGMENTS, closed)], stored[(ALL_SEGMENTS, current)]
    assert (full.aggregate_version, full.detail_version) == (1, 1) and full.curves is not None
    assert summary.aggregate_version == 2
    assert (summary.detail_version, summary.curves) == (1, before.curves)  # kept
    assert summary.detail_computed_at == before.detail_computed_at
    rows = {r.window_start: r for r in aggregate_rows(factory, model.id)}
    assert rows[closed].detail_due_at is None
    assert rows[current].detail_due_at is not None  # the summary set its due time


def test_a_worker_reads_and_parses_a_model_once_per_version_of_its_settings(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    """The claims of a worker share its ModelCache: the model row is read by the first
    claim only, until a settings change (its updated_at moves) makes the next claim
    read the new settings."""
    model, _ = _fill(factory, settings, 3)
    models = ModelCache()

    def claim() -> tuple[ModelConfig, list[str]]:
        seen: list[str] = []

        def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            seen.append(statement)

        with factory() as session:
            engine = session.get_bind()
            sa.event.listen(engine, "before_cursor_execute", record)
            try:
                (claimed,) = claim_windows(session, lease_seconds=60, group_size=1, models=models)
            finally:
                sa.event.remove(engine, "before_cursor_execute", record)
        _persist(factory, [Computed(claimed, DUMMY)])
        return claimed.model, [s for s in seen if "FROM model" in s.split("RETURNING")[0]]

    first, reads = claim()
    assert len(reads) == 1 and first.pi0 == 0.1
    second, reads = claim()
    assert reads == [] and second is first
    with factory() as session:
        update_model(session, get_model(session, model.name), ModelUpdate(pi0=0.3), utcnow())
    third, reads = claim()
    assert len(reads) == 1 and third.pi0 == 0.3
