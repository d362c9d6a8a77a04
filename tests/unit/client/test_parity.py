"""The client's own binning, sums and window times equal the service's, bit for bit.

priorwatch_client ships without the server, so it keeps a copy of the few
functions it needs (priorwatch_client.binning, .sums, .windows). These tests
hold each copy to the service's function on the same inputs: identical
counts, identical float sums, identical refusals (field and reason), identical
window starts and timestamps. tests/integration/test_client_inprocess.py
checks the same end to end, against what the service stores.
"""

from __future__ import annotations

from dataclasses import astuple
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import timegrid
from app.errors import InvalidInput
from app.metrics import probability
from app.metrics.binning import check_bin_edges, default_bin_edges, histogram_counts
from app.metrics.validation import check_scores_labels
from priorwatch_client import InvalidInput as ClientInvalidInput
from priorwatch_client import binning as client_binning
from priorwatch_client import sums as client_sums
from priorwatch_client import windows as client_windows

EDGES = default_bin_edges((0.5, 0.2), n_bins=3000)


def _rows(rng: np.random.Generator, n: int) -> tuple[Any, Any]:
    labels = rng.random(n) < 0.1
    scores = 1.0 / (1.0 + np.exp(-(rng.normal(size=n) * 3.0 + 3.0 * labels - 4.0)))
    return scores, labels


CORNERS = (
    np.array([0.0, 1.0, 0.5, 0.2, EDGES[1], EDGES[-2], np.nextafter(0.5, 0.0), 1e-300]),
    np.array([1, 0, 1, 0, 1, 1, 0, 1]),
)


@pytest.mark.parametrize("n", [1, 7, 1000, 100_000])
def test_counts_and_sums_equal_the_services(n: int) -> None:
    rng = np.random.default_rng(n)
    for scores, labels in (_rows(rng, n), CORNERS):
        mine = client_binning.histogram_counts(scores, labels, EDGES)
        theirs = histogram_counts(scores, labels, EDGES)
        for a, b in zip(mine, theirs, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        ours = client_sums.ProbabilitySums.from_predictions(scores, labels)
        service = probability.ProbabilitySums.from_predictions(scores, labels)
        assert astuple(ours) == astuple(service)  # every float bit for bit
        added = astuple(ours + ours)
        assert added == astuple(service + service)
        assert client_sums.LOG_LOSS_EPS == probability.LOG_LOSS_EPS


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.0, 1.0), st.booleans()),
        min_size=1,
        max_size=50,
    )
)
def test_any_rows_bin_and_sum_alike(rows: list[tuple[float, bool]]) -> None:
    scores = [s for s, _ in rows]
    labels = [int(y) for _, y in rows]
    mine = client_binning.histogram_counts(scores, labels, EDGES)
    theirs = histogram_counts(scores, labels, EDGES)
    assert all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True))
    ours = client_sums.ProbabilitySums.from_predictions(scores, labels)
    assert astuple(ours) == astuple(probability.ProbabilitySums.from_predictions(scores, labels))


BAD_ROWS = [
    ([[0.1]], [1]),
    ([0.1], [[1]]),
    ([], []),
    ([0.1, 0.2], [1]),
    ([0.1, float("nan")], [1, 0]),
    ([0.1, 1.5], [1, 0]),
    ([0.1, -0.0, -1e-9], [1, 0, 1]),
    ([0.1, 0.2], [1, 2]),
    ([0.1, 0.2], [-1, 0]),
    ([0.1, 0.2], [1.0, 0.5]),
    ([0.1, 0.2], ["a", "b"]),
    ([0.1], np.array([1], dtype=np.uint8)),
    ([0.1, 0.9], [1.0, 0.0]),
    ([0.1, 0.9], [True, False]),
]


@pytest.mark.parametrize(("scores", "labels"), BAD_ROWS)
def test_rows_are_refused_or_accepted_alike(scores: Any, labels: Any) -> None:
    try:
        expected: Any = check_scores_labels(scores, labels)
    except InvalidInput as exc:
        with pytest.raises(ClientInvalidInput) as info:
            client_binning.check_scores_labels(scores, labels)
        assert (info.value.field, info.value.reason) == (exc.field, exc.reason)
        assert isinstance(info.value, ValueError)
        return
    got = client_binning.check_scores_labels(scores, labels)
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize(
    "edges",
    [
        [0.0, 0.5, 1.0],
        [0.0, 1.0],
        [0.5],
        [[0.0, 1.0]],
        [0.1, 1.0],
        [0.0, 0.9],
        [0.0, 0.5, 0.5, 1.0],
    ],
)
def test_bin_edges_are_checked_alike(edges: Any) -> None:
    try:
        expected = check_bin_edges(edges)
    except InvalidInput as exc:
        with pytest.raises(ClientInvalidInput) as info:
            client_binning.check_bin_edges(edges)
        assert (info.value.field, info.value.reason) == (exc.field, exc.reason)
        return
    assert np.array_equal(client_binning.check_bin_edges(edges), expected)


def test_window_starts_and_timestamps_equal_the_services() -> None:
    assert client_windows.WINDOW_LENGTHS == timegrid.WINDOW_LENGTHS
    rng = np.random.default_rng(5)
    base = datetime(1969, 6, 1, tzinfo=UTC)
    offsets = rng.integers(0, 80 * 365 * 86400 * 10**6, size=300)
    moments = [base + timedelta(microseconds=int(us)) for us in offsets]
    moments += [
        datetime(2026, 3, 2, tzinfo=UTC),  # a Monday: a week's start
        datetime(2026, 3, 1, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 3, 2, 1, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(1970, 1, 1, tzinfo=UTC),
    ]
    for at in moments:
        for window in timegrid.WINDOW_LENGTHS:
            start = client_windows.window_start(at, window)
            assert start == timegrid.window_start(at, window), (at, window)
            assert start.utcoffset() == timedelta(0)
        assert client_windows.isoformat_z(at) == timegrid.isoformat_z(at)
    with pytest.raises(ValueError, match="timezone-aware"):
        client_windows.window_start(datetime(2026, 1, 1), "1h")
    with pytest.raises(KeyError):
        client_windows.window_start(moments[0], "2h")
