"""Client-side aggregation, batching and back-pressure (priorwatch_client), on a mock service."""

from __future__ import annotations

import random
import threading
from dataclasses import astuple
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from builders import model_config

from app.config import Settings
from app.errors import InvalidInput
from app.metrics.binning import default_bin_edges, histogram_counts
from app.metrics.probability import ProbabilitySums
from app.services.ingest.parse import parse_batch
from priorwatch_client import (
    BufferFull,
    Client,
    ClientError,
    DeliveryError,
    RetriesExhausted,
    RetryPolicy,
)
from priorwatch_client import InvalidInput as ClientInvalidInput
from priorwatch_client.aggregate import Binner

NOW = datetime(2026, 11, 26, 12, 30, tzinfo=UTC)
EDGES = default_bin_edges((0.5, 0.2), n_bins=3000)
MODEL = model_config((0.5, 0.2), name="fraud", segments=frozenset({"eu"}), bin_edges=EDGES)
SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]


def _sample(rng: np.random.Generator, n: int) -> tuple[Any, Any]:
    labels = rng.random(n) < 0.05
    return 1.0 / (1.0 + np.exp(-(rng.normal(size=n) * 2.5 + 3.0 * labels - 4.0))), labels


def test_client_histograms_equal_the_services_binning_bit_for_bit() -> None:
    rng = np.random.default_rng(17)
    binner = Binner.of(EDGES.tolist(), "1h")
    calls = [_sample(rng, n) for n in (1, 10, 1000, 50_000, 7)]
    calls.append((np.array([0.0, 1.0, 0.5, 0.2, float(EDGES[1])]), np.array([0, 1, 1, 0, 1])))
    total_pos = np.zeros(binner.n_bins, dtype=np.int64)
    total_neg = np.zeros(binner.n_bins, dtype=np.int64)
    for scores, labels in calls:
        (pos, neg), sums, rows = binner.labelled(scores, labels)
        total_pos, total_neg = total_pos + pos, total_neg + neg
        # per call: the service's parsing of the same rows as a scores batch
        doc = {"timestamp": "2026-11-26T12:00:00Z", "scores": list(scores), "labels": list(labels)}
        parsed = parse_batch(
            orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY), MODEL, SETTINGS, NOW
        )
        np.testing.assert_array_equal(pos, parsed.hist_positives)  # type: ignore[arg-type]
        np.testing.assert_array_equal(neg, parsed.hist_negatives)  # type: ignore[arg-type]
        assert astuple(sums) == astuple(parsed.sums) and rows == parsed.n
    all_scores = np.concatenate([np.asarray(s, dtype=float) for s, _ in calls])
    all_labels = np.concatenate([np.asarray(y).astype(bool) for _, y in calls])
    # independent binning of all rows: one index per score by brute-force search
    index = np.searchsorted(EDGES, all_scores, side="right") - 1
    index[all_scores == 1.0] = binner.n_bins - 1
    np.testing.assert_array_equal(
        total_pos, np.bincount(index[all_labels], minlength=binner.n_bins)
    )
    np.testing.assert_array_equal(
        total_neg, np.bincount(index[~all_labels], minlength=binner.n_bins)
    )
    np.testing.assert_array_equal(
        (total_pos, total_neg), histogram_counts(all_scores, all_labels, EDGES)
    )


class MockService:
    """A priorwatch look-alike: model metadata, and batches parsed by the real parser."""

    def __init__(self, gate: threading.Event | None = None, fail_first: int = 0) -> None:
        self.gate = gate
        self.fail_first = fail_first
        self.posts: list[tuple[str, bytes]] = []
        self.stored: list[Any] = []
        self.received = threading.Event()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/models/fraud":
            doc = {"name": "fraud", "window": "1h", "thresholds": [0.5, 0.2], "segments": ["eu"]}
            return httpx.Response(200, json={**doc, "pi0": 0.1, "n_bins": MODEL.n_bins})
        if path == "/v1/models/fraud/bins":
            return httpx.Response(200, json={"edges": EDGES.tolist()})
        assert path == "/v1/models/fraud/batches" and request.method == "POST"
        if self.gate is not None:
            assert self.gate.wait(30.0)
        body = request.read()
        self.posts.append((request.headers["idempotency-key"], body))
        self.received.set()
        if len(self.posts) <= self.fail_first:
            return httpx.Response(503, json={"type": "urn:priorwatch:problem:not-ready"})
        try:
            parsed = parse_batch(body, MODEL, SETTINGS, datetime.now(UTC))
        except InvalidInput as exc:
            problem = {"type": "urn:priorwatch:problem:invalid-input", "status": 422}
            errors = [{"field": exc.field, "reason": exc.reason}]
            return httpx.Response(422, json={**problem, "errors": errors})
        self.stored.append(parsed)
        return httpx.Response(202, json={"batch_id": "b", "count": parsed.n})


def _client(service: MockService, **options: Any) -> Client:
    options.setdefault("flush_interval_s", 3600.0)
    return Client(
        "http://svc",
        "pw_token",
        "fraud",
        transport=httpx.MockTransport(service),
        rng=random.Random(2),
        sleep=lambda s: None,
        **options,
    )


def test_a_retried_batch_reuses_its_key_and_bytes() -> None:
    service = MockService(fail_first=2)
    rng = np.random.default_rng(1)
    at = datetime.now(UTC) - timedelta(minutes=5)
    with _client(service) as pw:
        pw.log(*_sample(rng, 1000), timestamp=at, segment="eu")
        pw.flush()
    assert len(service.posts) == 3 and len(set(service.posts)) == 1  # same key, same body
    (parsed,) = service.stored
    assert parsed.n == 1000 and parsed.segment == "eu"


def test_rows_of_one_window_travel_as_one_small_batch() -> None:
    service = MockService()
    rng = np.random.default_rng(2)
    at = datetime.now(UTC).replace(minute=30) - timedelta(hours=1)
    expected = None
    with _client(service) as pw:
        for i in range(20):
            scores, labels = _sample(rng, 50_000)
            pw.log(scores, labels, timestamp=at + timedelta(seconds=i))
            sums = ProbabilitySums.from_predictions(scores, labels)
            expected = sums if expected is None else expected + sums
        pw.log_scores([], timestamp=at)  # nothing to send
        pw.log([], [], timestamp=at)
        pw.flush()
    (body,) = [b for _, b in service.posts]
    assert len(body) < 60_000  # a million rows in one batch of tens of kilobytes
    (parsed,) = service.stored
    assert parsed.n == 1_000_000 and parsed.sums == expected
    assert orjson.loads(body)["timestamp"].startswith(
        (at + timedelta(seconds=19)).strftime("%Y-%m-%dT%H:%M:%S")
    )


def test_flushes_by_size_without_being_asked() -> None:
    service = MockService()
    pw = _client(service, flush_rows=100)
    pw.log(np.full(150, 0.3), np.zeros(150, dtype=int), timestamp=datetime.now(UTC))
    assert service.received.wait(30.0)
    pw.close()
    assert sum(p.n for p in service.stored) == 150


def test_full_buffer_blocks_then_raises_and_recovers() -> None:
    gate = threading.Event()
    service = MockService(gate=gate)
    pw = _client(service, max_buffer_rows=1000, block_timeout_s=0.2)
    at = datetime.now(UTC)
    pw.log(np.full(800, 0.3), np.zeros(800, dtype=int), timestamp=at)
    with pytest.raises(BufferFull):
        pw.log(np.full(300, 0.3), np.zeros(300, dtype=int), timestamp=at)
    gate.set()  # the service answers again: room comes back
    pw.log(np.full(300, 0.3), np.zeros(300, dtype=int), timestamp=at)
    pw.close()
    assert sum(p.n for p in service.stored) == 1100


def test_bad_rows_and_segments_are_refused_at_log_time() -> None:
    service = MockService()
    with _client(service) as pw:
        with pytest.raises(ClientInvalidInput) as info:
            pw.log([0.2, 1.5], [0, 1])
        assert info.value.field == "scores"
        with pytest.raises(ValueError, match="not registered"):
            pw.log([0.2], [1], segment="mars")
    assert service.posts == []


def test_retry_policy_is_a_parameter() -> None:
    service = MockService(fail_first=100)
    pw = _client(service, retry=RetryPolicy(initial_s=1.0, max_delay_s=1.0, max_elapsed_s=0.0))
    pw.log([0.4], [1], timestamp=datetime.now(UTC))
    with pytest.raises(DeliveryError) as info:
        pw.close()
    assert len(service.posts) == 1
    (cause,) = info.value.causes
    assert isinstance(cause, RetriesExhausted)
    assert info.value.batches[0].rows == 1 and info.value.batches[0].idempotency_key


def test_event_times() -> None:
    from priorwatch_client.aggregate import event_time

    assert event_time(None, NOW) == NOW
    assert event_time(datetime(2026, 11, 26, 12), NOW) == datetime(2026, 11, 26, 12, tzinfo=UTC)
    assert event_time(NOW.timestamp(), NOW) == NOW
    with pytest.raises(TypeError):
        event_time("2026-11-26", NOW)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        event_time(float("nan"), NOW)


def test_flush_timeout_and_use_after_close() -> None:
    gate = threading.Event()
    service = MockService(gate=gate)
    pw = _client(service)
    pw.log([0.4, 0.6], [0, 1], timestamp=datetime.now(UTC))
    with pytest.raises(TimeoutError):
        pw.flush(timeout=0.05)
    gate.set()
    pw.close()
    pw.close()  # a second close does nothing
    with pytest.raises(ClientError, match="closed"):
        pw.log([0.4], [1])
    assert [p.n for p in service.stored] == [2]


def test_async_client_forwards_every_call() -> None:
    import asyncio

    from priorwatch_client import AsyncClient

    service = MockService()

    async def scenario() -> Any:
        async with AsyncClient(
            "http://svc", "pw_token", "fraud", transport=httpx.MockTransport(service)
        ) as pw:
            info = await pw.model_info()
            await pw.log_scores([0.2, 0.3], timestamp=datetime.now(UTC))
            await pw.log([0.2, 0.9], [0, 1], timestamp=datetime.now(UTC))
            await pw.flush()
            return info

    info = asyncio.run(scenario())
    assert info.window == "1h" and info.n_bins == MODEL.n_bins
    stored = sorted(service.stored, key=lambda p: p.n)
    assert [(p.n, p.n_unlabelled) for p in stored] == [(0, 2), (2, 0)]


def test_a_delivery_error_does_not_mask_the_error_leaving_the_block() -> None:
    service = MockService()
    with pytest.raises(KeyError), _client(service) as pw:
        old = datetime.now(UTC) - timedelta(days=60)  # past the backfill age: refused at close
        pw.log_scores([0.5], timestamp=old)
        raise KeyError("the caller's own error")
    assert service.posts and not service.stored
