"""The worker's cache of summed drift references (SQLite and PostgreSQL): the same sums
as the rows read one by one, a new entry when a reference window changes, the versions
of a group's references and their missing sums read at once, and eviction by bytes."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest
import sqlalchemy as sa
from _worker_support import aggregate_rows, metrics_rows, post_batch, register_model, window_starts
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db.models import ALL_SEGMENTS
from app.db.references import ReferenceRows
from app.services.models.config import ModelConfig
from app.services.refresh.groups import Outcome, claim_windows, refresh_group
from app.services.windows import reference_cache
from app.services.windows.reference_cache import ENTRY_BYTES, ReferenceCache
from app.services.windows.sums import WindowSums
from app.timegrid import window_length


def _drain(factory: sessionmaker[Session]) -> None:
    """Fold and compute every waiting window."""
    while True:
        with factory() as session:
            group = claim_windows(session, lease_seconds=60, group_size=8)
            if not group:
                return
            refresh_group(session, group, ReferenceCache())


def _fleet(
    factory: sessionmaker[Session], settings: Settings, windows: int
) -> tuple[ModelConfig, list[datetime]]:
    model = register_model(factory, drift={"reference": {"trailing_windows": 1}})
    starts = window_starts(model, windows)
    rng = np.random.default_rng(7)
    for start in starts:
        post_batch(factory, model, settings, at=start, rng=rng, n=300)
    _drain(factory)
    return model, starts


def _summed(
    factory: sessionmaker[Session], model: ModelConfig, starts: list[datetime]
) -> WindowSums:
    """The independent sum: the ORM rows of those windows, merged."""
    rows = [r for r in aggregate_rows(factory, model.id) if r.window_start in starts]
    total = WindowSums.merge(WindowSums.from_row(r) for r in rows)
    assert total is not None
    return total


def _assert_same(a: WindowSums | None, b: WindowSums) -> None:
    assert a is not None
    assert (a.n, a.positives, a.confusion, a.sums) == (b.n, b.positives, b.confusion, b.sums)
    for x, y in [
        (a.hist_positives, b.hist_positives),
        (a.hist_negatives, b.hist_negatives),
        (a.unlabelled, b.unlabelled),
    ]:
        assert (x is None) == (y is None)
        if x is not None and y is not None:
            assert x.dtype == np.int64 and np.array_equal(x, y)


def _get(
    cache: ReferenceCache, factory: sessionmaker[Session], model: ModelConfig, start: datetime
) -> WindowSums | None:
    """The reference of the window after ``start`` (trailing 1: the window at ``start``)."""
    with factory() as session:
        return cache.get(ReferenceRows(session), model, ALL_SEGMENTS, start, _next(model, start))


def _next(model: ModelConfig, start: datetime) -> datetime:
    return start + window_length(model.window)


def test_a_cached_reference_equals_the_rows_summed_and_follows_their_versions(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model, starts = _fleet(factory, settings, 3)
    cache = ReferenceCache()
    first = _get(cache, factory, model, starts[0])
    _assert_same(first, _summed(factory, model, starts[:1]))
    assert len(cache) == 1
    _assert_same(_get(cache, factory, model, starts[0]), _summed(factory, model, starts[:1]))
    assert len(cache) == 1  # same versions: the entry is reused
    # a new batch in the reference window moves its version: a new entry, the new sum
    post_batch(factory, model, settings, at=starts[0], rng=np.random.default_rng(8), n=50)
    _drain(factory)
    again = _get(cache, factory, model, starts[0])
    _assert_same(again, _summed(factory, model, starts[:1]))
    assert again is not None and first is not None and again.n == first.n + 50
    assert len(cache) == 2


def _counting(session: Session) -> list[str]:
    """The SQL statements run on ``session``'s connection from now on (appended as they run)."""
    seen: list[str] = []
    sa.event.listen(
        session.connection(),
        "before_cursor_execute",
        lambda _conn, _cursor, statement, *_: seen.append(statement),
    )
    return seen


def test_a_group_reads_its_versions_and_its_missing_sums_at_once_and_forgets_them(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model, starts = _fleet(factory, settings, 3)
    expected = [_summed(factory, model, [start]) for start in starts[:2]]
    cache = ReferenceCache()
    periods = [(model.id, ALL_SEGMENTS, start, _next(model, start)) for start in starts[:2]]
    for loads in (1, 0):  # the second group finds both sums cached: no row is read again
        with factory() as session:
            seen = _counting(session)
            with cache.versions_read(ReferenceRows(session), [*periods, None]):
                got = [
                    cache.get(
                        ReferenceRows(session), model, ALL_SEGMENTS, start, _next(model, start)
                    )
                    for start in starts[:2]
                ]
            assert len(seen) == 1 + loads  # one versions query, one for the missing sums
        for one, want in zip(got, expected, strict=True):
            _assert_same(one, want)
        assert len(cache) == 2 and cache._versions == {} and cache._loaded == {}


def test_a_group_reads_ahead_the_sums_of_a_bounded_number_of_windows(
    factory: sessionmaker[Session], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past READ_AHEAD_WINDOWS, a reference is read by its own get (same sums)."""
    monkeypatch.setattr(reference_cache, "READ_AHEAD_WINDOWS", 1)
    model, starts = _fleet(factory, settings, 3)
    cache = ReferenceCache()
    periods = [(model.id, ALL_SEGMENTS, start, _next(model, start)) for start in starts[:2]]
    with factory() as session:
        seen = _counting(session)
        with cache.versions_read(ReferenceRows(session), periods):
            assert len(seen) == 2  # the versions, then the first reference's rows
            got = [
                cache.get(ReferenceRows(session), model, ALL_SEGMENTS, start, _next(model, start))
                for start in starts[:2]
            ]
        assert len(seen) == 3  # the second reference's rows, by its get
    for one, start in zip(got, starts[:2], strict=True):
        _assert_same(one, _summed(factory, model, [start]))


def test_the_cache_drops_the_least_recently_used_entries_beyond_its_bytes(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model, starts = _fleet(factory, settings, 4)
    sizes = []
    for start in starts[:3]:
        one = ReferenceCache()
        _get(one, factory, model, start)
        sizes.append(one.nbytes)
    # each histogram stored as its non-empty bins: 4-byte indices and 4-byte counts
    total = _summed(factory, model, starts[:1])
    hists = [total.hist_positives, total.hist_negatives, total.unlabelled]
    arrays = sum(8 * np.count_nonzero(h) for h in hists if h is not None)
    assert sizes[0] == 2 * ENTRY_BYTES + arrays  # a reference of one window
    cache = ReferenceCache(max_bytes=sizes[0] + sizes[1])
    _get(cache, factory, model, starts[0])
    _get(cache, factory, model, starts[1])
    assert (len(cache), cache.nbytes) == (2, sizes[0] + sizes[1])
    _get(cache, factory, model, starts[0])  # now the most recently used
    _get(cache, factory, model, starts[2])  # evicts starts[1]'s
    assert cache.nbytes <= cache.max_bytes
    kept = {key[2][0][0] for key in cache._entries}
    assert starts[1] not in kept and starts[2] in kept
    assert starts[0] in kept or sizes[0] + sizes[2] > cache.max_bytes


def test_a_cache_of_no_bytes_keeps_nothing_and_still_answers(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    model, starts = _fleet(factory, settings, 2)
    cache = ReferenceCache(max_bytes=0)
    _assert_same(_get(cache, factory, model, starts[0]), _summed(factory, model, starts[:1]))
    assert (len(cache), cache.nbytes) == (0, 0)


def test_the_empty_periods_of_a_segment_share_one_entry_of_fixed_size(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    """The key is the windows' versions, not the period: no window, one entry (None)."""
    model, starts = _fleet(factory, settings, 1)
    before = starts[0] - 10 * window_length(model.window)
    cache = ReferenceCache()
    for k in range(4):
        assert _get(cache, factory, model, before + k * window_length(model.window)) is None
    assert (len(cache), cache.nbytes) == (1, ENTRY_BYTES)


def test_a_read_ahead_serves_the_next_group_of_the_same_periods_without_a_query(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    """What a claim reads ahead (its transaction) serves the run's versions_read of the same
    periods: no statement, the same sums; a read-ahead of other periods is not used."""
    model, starts = _fleet(factory, settings, 3)
    cache = ReferenceCache()
    periods = [(model.id, ALL_SEGMENTS, start, _next(model, start)) for start in starts[:2]]

    def run(wanted: list[reference_cache.Period]) -> tuple[list[str], list[WindowSums | None]]:
        with factory() as session:
            seen = _counting(session)
            with cache.versions_read(ReferenceRows(session), wanted):
                got = [cache.get(ReferenceRows(session), *_args(model, p)) for p in wanted]
        return seen, got

    with factory() as session:
        cache.read_ahead(ReferenceRows(session), [*periods, None])
    seen, got = run(periods)
    assert seen == []
    for one, start in zip(got, starts[:2], strict=True):
        _assert_same(one, _summed(factory, model, [start]))
    with factory() as session:
        cache.read_ahead(ReferenceRows(session), periods[:1])
    seen, got = run(periods)  # not the periods read ahead: its own versions (sums cached)
    assert len(seen) == 1
    seen, _ = run(periods)  # a read-ahead serves one group only
    assert len(seen) == 1


def _args(
    model: ModelConfig, period: reference_cache.Period
) -> tuple[ModelConfig, str, datetime, datetime]:
    return model, period[1], period[2], period[3]


def test_a_reference_folded_after_the_claim_read_it_fences_the_window_out(
    factory: sessionmaker[Session], settings: Settings
) -> None:
    """The claim reads the group's references ahead; when a reference window is folded
    before the group is stored, the window computed on the old reference is fenced out
    and computed again on the new one."""
    model, starts = _fleet(factory, settings, 2)
    rng = np.random.default_rng(9)
    post_batch(factory, model, settings, at=starts[1], rng=rng, n=40)
    cache = ReferenceCache()
    with factory() as session:
        (claimed,) = claim_windows(session, lease_seconds=60, group_size=1, references=cache)
    assert claimed.claim.window_start == starts[1]
    post_batch(factory, model, settings, at=starts[0], rng=rng, n=50)
    _drain(factory)  # folds the reference window, marks its dependent (claimed) window
    with factory() as session:
        assert refresh_group(session, [claimed], cache) == [Outcome.FENCED_OUT]
    _drain(factory)
    rows = {r.window_start: r for r in aggregate_rows(factory, model.id)}
    assert not rows[starts[1]].dirty and rows[starts[1]].version == 2
    stored = metrics_rows(factory, model.id)[(ALL_SEGMENTS, starts[1])]
    assert stored.aggregate_version == 2 and stored.status == "fresh"
