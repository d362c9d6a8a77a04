"""Rejected batch requests by reason (per process): ``priorwatch_batches_rejected_total``.

An ASGI middleware watches ``POST /v1/models/{name}/batches``: every answer
with status >= 400 counts once under the reason of its problem type, the
slug of ``urn:priorwatch:problem:<slug>`` with ``-`` turned into ``_``
(``invalid_input``, ``malformed_json``, ``body_too_large``,
``unsupported_media_type``, ``model_not_found``, ``not_authenticated``,
``permission_denied``, ``idempotency_key_reused``, ``request_in_flight``,
``too_many_unfolded_deltas``, ...), ``http_<status>`` for a problem without
a priorwatch type, and ``internal_error`` when the handler raised. The
reasons are the API's fixed problem types, so the label set is bounded.
Replays of an accepted batch are not rejections.

The counter lives in the process (each API replica counts its own; Prometheus
sums them); it is not stored.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import orjson
from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from app.errors import PROBLEM_PREFIX
from app.exporter import names

if TYPE_CHECKING:  # ASGI types only: the middleware needs no web framework
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

BATCHES_PATH = re.compile(r"^/v1/models/[^/]+/batches/?$")
"""Paths whose failed POSTs count as rejected batches."""
MAX_PROBLEM_BYTES = 64 * 1024
"""Most bytes of an error body read to find its problem type."""
INTERNAL_ERROR = "internal_error"


class RejectionCounter(Collector):
    """Thread-safe counts of rejected batch requests by reason, exposed as
    ``priorwatch_batches_rejected_total{reason}`` (a counter without ``_created``).

    Examples
    --------
    >>> c = RejectionCounter()
    >>> c.inc("invalid_input"); c.inc("invalid_input")
    >>> c.counts()
    {'invalid_input': 2}
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def inc(self, reason: str) -> None:
        with self._lock:
            self._counts[reason] = self._counts.get(reason, 0) + 1

    def counts(self) -> dict[str, int]:
        """A copy of the counts by reason."""
        with self._lock:
            return dict(self._counts)

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            names.BATCHES_REJECTED,
            "Rejected batch requests by reason (this process)",
            labels=["reason"],
        )
        for reason, count in sorted(self.counts().items()):
            family.add_metric([reason], count)
        yield family

    def describe(self) -> Iterable[Metric]:
        return ()


def rejection_reason(status: int, body: bytes) -> str:
    """The reason label of an error answer (module docstring)."""
    try:
        problem = orjson.loads(body)
    except orjson.JSONDecodeError:
        problem = None
    problem_type = problem.get("type") if isinstance(problem, dict) else None
    if isinstance(problem_type, str) and problem_type.startswith(PROBLEM_PREFIX):
        slug = problem_type[len(PROBLEM_PREFIX) :]
        if re.fullmatch(r"[a-z0-9-]{1,64}", slug):
            return slug.replace("-", "_")
    return f"http_{status}"


class RejectionCountingMiddleware:
    """Counts failed ``POST .../batches`` answers in ``counter`` by reason.

    Install it outermost (after every other ``add_middleware``) so that it also
    sees the answers of the other middlewares (e.g. body size 413).
    """

    def __init__(self, app: ASGIApp, counter: RejectionCounter) -> None:
        self.app = app
        self.counter = counter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or not BATCHES_PATH.match(scope.get("path", ""))
        ):
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = {"status": None, "body": bytearray(), "counted": False}

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["status"] = int(message["status"])
            elif message["type"] == "http.response.body" and (state["status"] or 0) >= 400:
                body: bytearray = state["body"]
                if len(body) < MAX_PROBLEM_BYTES:
                    body.extend(message.get("body", b"")[: MAX_PROBLEM_BYTES - len(body)])
                if not message.get("more_body", False) and not state["counted"]:
                    state["counted"] = True
                    self.counter.inc(rejection_reason(state["status"], bytes(body)))
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception:
            if not state["counted"]:
                state["counted"] = True
                self.counter.inc(INTERNAL_ERROR)
            raise
