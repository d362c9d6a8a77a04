"""Exceptions of the client: bad rows, a refused request, a delivery given up, a full buffer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class ClientError(Exception):
    """Base class of the client's errors about the service and delivery."""


class InvalidInput(ValueError):
    """Rows (or bin edges) the service would refuse, refused by ``log`` before sending.

    ``field`` names what is wrong (``scores``, ``labels``) and ``reason`` why,
    in the words of the service's problem+json ``errors``.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class ApiError(ClientError):
    """A permanent refusal by the service (4xx other than 408/409/425/429).

    Attributes
    ----------
    status : int
        The HTTP status.
    problem : Mapping
        The ``application/problem+json`` body (``type``, ``title``,
        ``detail``, ``errors`` naming the fields at fault), or ``{}`` when the
        answer was not one.
    """

    def __init__(self, status: int, problem: Mapping[str, Any], what: str) -> None:
        detail = problem.get("detail") or problem.get("title") or "no detail"
        super().__init__(f"{what}: HTTP {status} {problem.get('type', '')}: {detail}")
        self.status = status
        self.problem = dict(problem)

    @property
    def type(self) -> str:
        """The problem type URI, e.g. ``urn:priorwatch:problem:invalid-input``."""
        return str(self.problem.get("type", ""))


@dataclass(frozen=True)
class UndeliveredBatch:
    """A batch the client could not deliver, to send again by hand if wanted.

    Sending ``body`` again with the same ``idempotency_key`` (POST
    ``/v1/models/{model}/batches``) within the service's key retention (at
    least 24 h) is safe: if the first attempt was stored after all, the
    service answers the stored result and counts nothing twice.
    """

    model: str
    idempotency_key: str
    body: bytes
    rows: int


class DeliveryError(ClientError):
    """Batches that were not acknowledged: refused for good, or retries given up.

    Attributes
    ----------
    batches : tuple of UndeliveredBatch
        What was not delivered (body and idempotency key of each).
    causes : tuple of Exception
        The last error of each batch (an :class:`ApiError`, or the transport
        error / retryable answer that was still occurring at the deadline).
    """

    def __init__(self, batches: tuple[UndeliveredBatch, ...], causes: tuple[Exception, ...]):
        rows = sum(b.rows for b in batches)
        first = causes[0] if causes else None
        super().__init__(f"{len(batches)} batch(es), {rows} rows, not delivered; first: {first}")
        self.batches = batches
        self.causes = causes


class RetriesExhausted(ClientError):
    """Transient failures went on past the retry policy's deadline."""


class BufferFull(ClientError):
    """``log`` waited ``block_timeout_s`` for room in the bounded buffer and found none."""
