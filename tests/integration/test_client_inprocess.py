"""The client against the real app in-process (both backends): stored sums, reads, asyncio.

The client's HTTP goes through a transport that forwards each request to the
app's TestClient, so everything but the socket is real: routes, parsing,
idempotency, the database, and the worker (drained in this thread).
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest
import sqlalchemy as sa
from _read_support import drain
from fastapi.testclient import TestClient

from app.db.models import Model, WindowAggregate
from app.timegrid import window_start
from priorwatch_client import ApiError, AsyncClient, Client, DeliveryError, RetryPolicy

WINDOW_FIELDS = (
    "n",
    "positives",
    "hist_positives",
    "hist_negatives",
    "confusion",
    "sums_positives",
    "sums_negatives",
    "brier_sum",
    "log_loss_sum",
    "score_sum_positive",
    "score_sum_negative",
)


class ForwardToApp(httpx.BaseTransport):
    """An httpx transport that hands every request to the app's TestClient."""

    def __init__(self, app: TestClient) -> None:
        self.app = app
        self.requests: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        r = self.app.request(
            request.method,
            request.url.raw_path.decode(),
            content=request.read(),
            headers=dict(request.headers),
        )
        return httpx.Response(r.status_code, headers=list(r.headers.items()), content=r.content)


def _client(app: TestClient, token: str, model: str, **options: Any) -> Client:
    options.setdefault("flush_interval_s", 3600.0)  # only explicit flushes in these tests
    return Client(
        "http://app", token, model, transport=ForwardToApp(app), rng=random.Random(1), **options
    )


def _sample(rng: np.random.Generator, n: int, prior: float) -> tuple[Any, Any]:
    labels = (rng.random(n) < prior).astype(np.int64)
    logits = rng.normal(size=n) + 2.0 * labels - 2.0
    return 1.0 / (1.0 + np.exp(-logits)), labels


def _aggregates(db_engine: sa.Engine, model: str) -> dict[tuple[datetime, str], Any]:
    with sa.orm.Session(db_engine) as session:
        model_id = session.scalar(sa.select(Model.id).where(Model.name == model))
        rows = session.scalars(
            sa.select(WindowAggregate).where(WindowAggregate.model_id == model_id)
        ).all()
        return {
            (r.window_start.replace(tzinfo=UTC), r.segment): {
                f: getattr(r, f) for f in WINDOW_FIELDS
            }
            for r in rows
        }


def _same_window(a: dict[str, Any], b: dict[str, Any], *, exact_sums: bool) -> None:
    for f in WINDOW_FIELDS:
        if isinstance(a[f], np.ndarray):
            np.testing.assert_array_equal(a[f], b[f], err_msg=f)
        elif isinstance(a[f], float) and not exact_sums:
            assert b[f] == pytest.approx(a[f], rel=1e-13, abs=0.0), f
        else:
            assert a[f] == b[f], f


def test_client_batches_store_exactly_what_scores_batches_store(
    api: Any, client: TestClient, db_engine: sa.Engine
) -> None:
    """Same rows, same calls: sparse histogram batches with sums == scores batches, bit for bit."""
    for name in ("raw", "viaclient"):
        api.create_model(name, window="1h", threshold=0.5, segments=["eu"], n_bins=2000)
    raw_token, client_token = api.create_key("raw"), api.create_key("viaclient")
    rng = np.random.default_rng(11)
    now = datetime.now(UTC)
    hour = window_start(now - timedelta(hours=2), "1h")
    calls = []
    for i in range(6):  # hour 0: no segment; hour 1: calls with and without segment
        at = hour + timedelta(hours=i % 2, minutes=5 + i)
        segment = "eu" if i in (1, 3) else None
        calls.append((at, segment, *_sample(rng, 300 + 50 * i, 0.2)))
    for at, segment, scores, labels in calls:
        body: dict[str, Any] = {
            "timestamp": at.isoformat(),
            "scores": scores.tolist(),
            "labels": labels.tolist(),
        }
        if segment:
            body["segment"] = segment
        assert api.post_batch("raw", raw_token, body).status_code == 202
    with _client(client, client_token, "viaclient") as pw:
        for at, segment, scores, labels in calls:
            pw.log(scores, labels, timestamp=at, segment=segment)
        pw.flush()
        posted = [r for r in pw._sender_http._transport.requests if r.method == "POST"]  # type: ignore[attr-defined]
        # one batch per (window, segment) logged into: hour 0, hour 1 eu, hour 1 none
        assert len(posted) == 3
        assert len({r.headers["idempotency-key"] for r in posted}) == 3
    expected, got = _aggregates(db_engine, "raw"), _aggregates(db_engine, "viaclient")
    assert set(expected) == set(got) and len(got) == 3  # hour 0 *, hour 1 * and eu
    for (start, segment), stored in expected.items():
        # Counts are always exact. Float sums are bit for bit the same unless the
        # service adds the client's segment and no-segment batches of one window
        # in another order than the raw batches (hour 1, all traffic): then they
        # differ by float rounding only.
        mixed = start == hour + timedelta(hours=1) and segment == "*"
        _same_window(stored, got[(start, segment)], exact_sums=not mixed)
    drain(client)
    for name, token in (("raw", raw_token), ("viaclient", client_token)):
        r = client.get(f"/v1/models/{name}/windows", headers=api.bearer(token))
        assert r.status_code == 200
    metrics = [
        [
            w["metrics"]
            for w in client.get(f"/v1/models/{n}/windows", headers=api.bearer(t)).json()["windows"]
        ]
        for n, t in (("raw", raw_token), ("viaclient", client_token))
    ]
    assert metrics[0][0] == metrics[1][0]  # hour 0: identical sums, identical metrics
    assert metrics[0][1].keys() == metrics[1][1].keys()
    for name, value in metrics[0][1].items():
        assert (value is None) == (metrics[1][1][name] is None)
        if value is not None:
            assert metrics[1][1][name] == pytest.approx(value, rel=1e-12, abs=1e-15), name
    assert all(m["brier"] is not None and m["log_loss"] is not None for m in metrics[1])


def test_read_side_returns_typed_windows_and_sla(api: Any, client: TestClient) -> None:
    api.create_model(
        "fraud",
        window="1h",
        threshold=0.5,
        segments=["eu"],
        sla=[{"metric": "recall", "op": ">=", "target": 0.2}],
        n_bins=1000,
    )
    token = api.create_key("fraud")
    rng = np.random.default_rng(5)
    start = window_start(datetime.now(UTC) - timedelta(hours=3), "1h")
    with _client(client, token, "fraud") as pw:
        info = pw.model_info()
        assert (info.window, info.thresholds, info.segments) == ("1h", (0.5,), frozenset({"eu"}))
        for h in range(2):
            pw.log(*_sample(rng, 2000, 0.3), timestamp=start + timedelta(hours=h, minutes=1))
        pw.flush()
        drain(client)
        windows = pw.windows(from_=start, to=start + timedelta(hours=2))
        assert [w.start for w in windows] == [start, start + timedelta(hours=1)]
        assert all(w.n == 2000 and w.status == "fresh" and w.segment is None for w in windows)
        assert windows[0].metrics["recall"] == windows[0].raw["metrics"]["recall"]
        one = pw.window(start)
        assert one is not None and one.curves is not None and one.n == 2000
        assert one.detail is not None and one.detail["current"]  # a closed window: full
        assert pw.window(start - timedelta(hours=5)) is None
        report = pw.sla(from_=start, to=start + timedelta(hours=2))
        assert report.model == "fraud" and len(report.windows) == 2
        assert report.windows[0].objectives[0].metric == "recall"
        assert report.compliance_ratio == report.raw["summary"]["compliance_ratio"]
        with pytest.raises(ApiError) as info_err:
            pw.windows(segment="nowhere")
        assert info_err.value.status == 422 and info_err.value.problem["errors"]


def test_refused_batches_are_reported_by_flush_and_others_still_stored(
    api: Any, client: TestClient
) -> None:
    """A batch the server refuses (422) is reported once; the others are stored, the
    unlabelled rows of log_scores included."""
    api.create_model("fraud", window="1h", threshold=0.5, n_bins=500)
    token = api.create_key("fraud")
    rng = np.random.default_rng(9)
    at = datetime.now(UTC) - timedelta(minutes=1)
    pw = _client(client, token, "fraud", retry=RetryPolicy(max_elapsed_s=5.0))
    scores, labels = _sample(rng, 1000, 0.1)
    pw.log(scores, labels, timestamp=at)
    pw.log_scores(scores[:100], timestamp=at)
    pw.log_scores(scores[:7], timestamp=at - timedelta(days=60))  # past the backfill age
    with pytest.raises(DeliveryError) as info:
        pw.flush()
    (undelivered,) = info.value.batches
    assert undelivered.rows == 7 and b'"unlabelled"' in undelivered.body
    (cause,) = info.value.causes
    assert isinstance(cause, ApiError) and cause.status == 422
    assert cause.problem["errors"][0]["field"] == "timestamp"
    pw.flush()  # reported once
    pw.close()
    drain(client)
    windows = client.get("/v1/models/fraud/windows", headers=api.bearer(token)).json()["windows"]
    assert [(w["n"], w["n_unlabelled"]) for w in windows] == [(1000, 100)]


def test_async_client_logs_flushes_and_reads(api: Any, client: TestClient) -> None:
    api.create_model("fraud", window="1h", threshold=0.5, n_bins=500)
    token = api.create_key("fraud")
    rng = np.random.default_rng(4)
    at = window_start(datetime.now(UTC) - timedelta(hours=1), "1h") + timedelta(minutes=3)
    data = [_sample(rng, 500, 0.3) for _ in range(4)]

    async def scenario() -> int:
        async with AsyncClient(
            "http://app", token, "fraud", transport=ForwardToApp(client), flush_interval_s=3600
        ) as pw:
            await asyncio.gather(*(pw.log(s, y, timestamp=at) for s, y in data))
            await pw.flush()
            drain(client)
            (window,) = await pw.windows(from_=at - timedelta(hours=1))
            return window.n

    assert asyncio.run(scenario()) == 2000


def test_caller_keys_make_a_resend_count_once(api: Any, client: TestClient) -> None:
    """Rows logged with an idempotency_key travel as a batch of their own under that key:
    sent again (another client, same rows, same key) they are a replay, counted once;
    the async client passes the key on."""
    api.create_model("fraud", window="1h", threshold=0.5, n_bins=500)
    token = api.create_key("fraud")
    rng = np.random.default_rng(5)
    at = window_start(datetime.now(UTC) - timedelta(hours=1), "1h") + timedelta(minutes=7)
    scores, labels = _sample(rng, 300, 0.2)
    keys_sent: list[str | None] = []
    for _ in range(2):
        transport = ForwardToApp(client)
        pw = Client("http://app", token, "fraud", transport=transport, flush_interval_s=3600)
        pw.log(scores, labels, timestamp=at, idempotency_key="file-a:0")
        pw.log_scores(scores[:40], timestamp=at, idempotency_key="file-a:1")
        pw.log(scores[:10], labels[:10], timestamp=at)  # no key: a batch apart, fresh key
        pw.close()
        posts = [r for r in transport.requests if r.method == "POST"]
        keys = sorted(r.headers["Idempotency-Key"] for r in posts)
        keys_sent += [k for k in keys if k.startswith("file-a:")]
        assert len(posts) == 3

    async def scenario() -> None:
        async with AsyncClient(
            "http://app", token, "fraud", transport=ForwardToApp(client), flush_interval_s=3600
        ) as pw:
            await pw.log(scores, labels, timestamp=at, idempotency_key="file-a:0")
            await pw.log_scores(scores[:40], timestamp=at, idempotency_key="file-a:1")

    asyncio.run(scenario())
    drain(client)
    assert keys_sent == ["file-a:0", "file-a:1"] * 2
    windows = client.get("/v1/models/fraud/windows", headers=api.bearer(token)).json()["windows"]
    assert [(w["n"], w["n_unlabelled"]) for w in windows] == [(300 + 2 * 10, 40)]


def test_delayed_labels_join_their_predictions_window_only_with_its_timestamp(
    api: Any, client: TestClient
) -> None:
    """The protocol: every prediction without its label at prediction time, the labels
    later with the prediction's timestamp. A label call without it (``timestamp``
    defaults to now) is not refused: its rows land in the window of their arrival."""
    api.create_model("fraud", window="1h", threshold=0.5, n_bins=500)
    token = api.create_key("fraud")
    rng = np.random.default_rng(27)
    predicted_at = window_start(datetime.now(UTC) - timedelta(hours=4), "1h") + timedelta(
        minutes=10
    )
    clock = {"now": predicted_at}
    scores, labels = _sample(rng, 3000, 0.05)
    with _client(client, token, "fraud", now=lambda: clock["now"]) as pw:
        pw.log_scores(scores)  # at prediction time: the default timestamp is right
        clock["now"] = predicted_at + timedelta(hours=2)  # the first labels arrive
        known = np.flatnonzero(labels == 1)[:100]  # the frauds, reported first
        pw.log(scores[known], labels[known], timestamp=predicted_at)
        late = np.arange(2000, 2300)  # forgot the timestamp: the window of arrival
        pw.log(scores[late], labels[late])
        pw.flush()
        drain(client)
        windows = pw.windows(from_=predicted_at - timedelta(hours=1))
    by_start = {w.start: w for w in windows}
    first = by_start[window_start(predicted_at, "1h")]
    assert (first.n_unlabelled, first.n, first.positives) == (3000, 100, 100)
    assert first.maturity == first.raw.get("maturity")
    arrival = by_start[window_start(predicted_at + timedelta(hours=2), "1h")]
    assert (arrival.n_unlabelled, arrival.n) == (0, 300)
    assert arrival.positives == int(labels[late].sum())
