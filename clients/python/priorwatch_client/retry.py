"""Retries with exponential backoff and full jitter, bounded in total time.

A request is retried on what may succeed later: connection errors and
timeouts (``httpx.TransportError``), 5xx, 408, 409 (the same Idempotency-Key
is still being processed), 425 and 429. ``Retry-After`` (seconds or an HTTP
date) is honoured as a minimum wait. Any other 4xx is permanent
(:class:`~priorwatch_client.errors.ApiError`, carrying the problem+json).

Delay before retry k (k = 0, 1, ...): uniform in
[0, min(max_delay_s, initial_s * 2**k)] ("full jitter"), raised to
Retry-After when the service sent one. Retries stop once the next attempt
would start later than ``max_elapsed_s`` after the first
(:class:`~priorwatch_client.errors.RetriesExhausted`). The default, 10 minutes, ends
far inside the service's idempotency-key retention (at least 24 hours), so a
retry of a batch whose first answer was lost is always recognised as a replay.
"""

from __future__ import annotations

import email.utils
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import orjson

from priorwatch_client.errors import ApiError, RetriesExhausted

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
"""4xx answers worth retrying (besides every 5xx)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How long and how often to retry.

    Attributes
    ----------
    initial_s : float
        Upper bound of the first jittered delay.
    max_delay_s : float
        Cap of the exponential bound (a Retry-After may exceed it).
    max_elapsed_s : float
        No attempt starts later than this after the first one (default 600 s,
        far below the service's 24 h idempotency-key retention).
    """

    initial_s: float = 0.2
    max_delay_s: float = 30.0
    max_elapsed_s: float = 600.0

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Full-jitter delay before retry ``attempt`` (0-based)."""
        bound = min(self.max_delay_s, self.initial_s * 2.0 ** min(attempt, 64))
        return rng.uniform(0.0, bound)


def is_retryable(status: int) -> bool:
    """True for 5xx and for 408, 409, 425, 429."""
    return status >= 500 or status in RETRYABLE_STATUS


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """Seconds asked by a ``Retry-After`` header (delta-seconds or HTTP date), or None.

    >>> retry_after_seconds("3", datetime(2026, 1, 1, tzinfo=UTC))
    3.0
    >>> retry_after_seconds("Thu, 01 Jan 2026 00:00:05 GMT", datetime(2026, 1, 1, tzinfo=UTC))
    5.0
    """
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - now).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def problem_of(response: httpx.Response) -> dict[str, object]:
    """The problem+json body of an error answer, or a minimal one."""
    try:
        doc = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        doc = None
    if isinstance(doc, dict):
        return doc
    return {"status": response.status_code, "detail": response.text[:500]}


def send_with_retries(
    request: Callable[[], httpx.Response],
    policy: RetryPolicy,
    *,
    what: str,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    rng: random.Random,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> httpx.Response:
    """Call ``request`` until it answers 2xx/3xx, retrying transient failures.

    Parameters
    ----------
    request : callable
        Sends the request once (the same bytes and Idempotency-Key each time).
    policy : RetryPolicy
    what : str
        Names the request in errors.
    clock, sleep, rng, now
        Monotonic seconds, a sleep, the jitter's generator and the wall
        clock (for Retry-After dates); injected so tests run without waiting.

    Raises
    ------
    ApiError
        A permanent 4xx.
    RetriesExhausted
        Transient failures past ``policy.max_elapsed_s`` (chained to the last).
    """
    started = clock()
    attempt = 0
    while True:
        retry_after: float | None = None
        try:
            response = request()
        except httpx.TransportError as exc:  # connect, read, write, timeouts, dropped connection
            last: Exception = exc
        else:
            if response.status_code < 400:
                return response
            problem = problem_of(response)
            if not is_retryable(response.status_code):
                raise ApiError(response.status_code, problem, what)
            last = ApiError(response.status_code, problem, what)
            retry_after = retry_after_seconds(response.headers.get("retry-after"), now())
        delay = policy.backoff(attempt, rng)
        if retry_after is not None:
            delay = max(delay, retry_after)
        if clock() + delay - started > policy.max_elapsed_s:
            raise RetriesExhausted(
                f"{what}: gave up after {attempt + 1} attempts in "
                f"{clock() - started:.1f} s; last: {last}"
            ) from last
        sleep(delay)
        attempt += 1
