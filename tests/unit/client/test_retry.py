"""Retries of the client (priorwatch_client/retry.py) with an injected clock, sleep and rng."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from app.services.ingest.idempotency import RETENTION_HOURS_GUARANTEED
from priorwatch_client.errors import ApiError, RetriesExhausted
from priorwatch_client.retry import RetryPolicy, retry_after_seconds, send_with_retries

NOW = datetime(2026, 11, 26, 12, tzinfo=UTC)
POLICY = RetryPolicy(initial_s=0.5, max_delay_s=8.0, max_elapsed_s=120.0)


class FakeTime:
    """A monotonic clock that only moves when slept on; records the sleeps."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0.0
        self.sleeps.append(seconds)
        self.t += seconds


def _script(
    *outcomes: int | Exception | tuple[int, dict[str, str]],
) -> Callable[[], httpx.Response]:
    """A request answering the outcomes in turn (status, (status, headers) or an exception)."""
    queue = list(outcomes)
    request = httpx.Request("POST", "http://svc/v1/models/m/batches")

    def send() -> httpx.Response:
        outcome = queue.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        status, headers = outcome if isinstance(outcome, tuple) else (outcome, {})
        body = b'{"type": "urn:priorwatch:problem:x", "title": "X", "status": %d}' % status
        return httpx.Response(status, headers=headers, content=body, request=request)

    send.remaining = queue  # type: ignore[attr-defined]
    return send


def _run(send: Callable[[], httpx.Response], fake: FakeTime, seed: int = 3) -> httpx.Response:
    return send_with_retries(
        send,
        POLICY,
        what="POST batch",
        clock=fake.clock,
        sleep=fake.sleep,
        rng=random.Random(seed),
        now=lambda: NOW,
    )


def test_transient_failures_are_retried_with_full_jitter() -> None:
    fake = FakeTime()
    request = httpx.Request("POST", "http://svc/")
    send = _script(
        httpx.ConnectError("refused", request=request),
        httpx.ReadTimeout("slow", request=request),
        httpx.RemoteProtocolError("dropped", request=request),
        503,
        500,
        202,
    )
    assert _run(send, fake, seed=3).status_code == 202
    # the delays are exactly the full-jitter draws of the same generator
    rng = random.Random(3)
    expected = [rng.uniform(0.0, min(8.0, 0.5 * 2.0**k)) for k in range(5)]
    assert fake.sleeps == expected
    assert all(0.0 <= d <= min(8.0, 0.5 * 2**k) for k, d in enumerate(fake.sleeps))


def test_retry_after_is_a_minimum_on_409_and_429() -> None:
    fake = FakeTime()
    send = _script((409, {"Retry-After": "1"}), (429, {"Retry-After": "7"}), 202)
    assert _run(send, fake).status_code == 202
    assert fake.sleeps[0] >= 1.0 and fake.sleeps[1] == 7.0  # the jitter bound is 1.0 at k = 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 415, 422])
def test_permanent_answers_raise_with_the_problem(status: int) -> None:
    fake = FakeTime()
    send = _script(503, status, 202)
    with pytest.raises(ApiError) as info:
        _run(send, fake)
    assert info.value.status == status
    assert info.value.problem["type"] == "urn:priorwatch:problem:x"
    assert len(fake.sleeps) == 1 and send.remaining == [202]  # type: ignore[attr-defined]


def test_retries_stop_at_the_deadline() -> None:
    fake = FakeTime()
    send = _script(*([503] * 1000))
    with pytest.raises(RetriesExhausted) as info:
        _run(send, fake)
    assert isinstance(info.value.__cause__, ApiError)
    elapsed = sum(fake.sleeps)
    assert elapsed <= POLICY.max_elapsed_s
    # no attempt would have fitted: the next delay would cross the deadline
    assert len(fake.sleeps) >= 10


def test_a_retry_after_beyond_the_deadline_gives_up_at_once() -> None:
    fake = FakeTime()
    with pytest.raises(RetriesExhausted):
        _run(_script((503, {"Retry-After": "3600"})), fake)
    assert fake.sleeps == []


def test_retry_after_forms() -> None:
    assert retry_after_seconds("2.5", NOW) == 2.5
    assert retry_after_seconds("-4", NOW) == 0.0
    assert retry_after_seconds("Thu, 26 Nov 2026 12:00:30 GMT", NOW) == 30.0
    assert retry_after_seconds("soon", NOW) is None
    assert retry_after_seconds(None, NOW) is None


def test_default_retry_time_ends_well_inside_the_idempotency_retention() -> None:
    """A retry after a lost answer must still meet its key: 10 min vs >= 24 h."""
    policy = RetryPolicy()
    assert policy.max_elapsed_s == 600.0
    # the last attempt starts before max_elapsed_s; add one request timeout at most
    assert policy.max_elapsed_s + policy.max_delay_s < RETENTION_HOURS_GUARANTEED * 3600 / 100


def test_odd_answers_still_give_a_problem_and_a_decision() -> None:
    fake = FakeTime()
    request = httpx.Request("POST", "http://svc/")
    answers = iter(
        [
            httpx.Response(502, content=b"<html>bad gateway</html>", request=request),
            httpx.Response(503, headers={"Retry-After": "inf"}, request=request),
            httpx.Response(400, content=b"[1]", request=request),
        ]
    )
    with pytest.raises(ApiError) as info:
        _run(lambda: next(answers), fake)
    assert info.value.status == 400 and info.value.problem == {"status": 400, "detail": "[1]"}
    assert len(fake.sleeps) == 2  # the unusable Retry-After was ignored, not obeyed
    assert retry_after_seconds("Thu, 26 Nov 2026 12:00:09 -0000", NOW) == 9.0
