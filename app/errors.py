"""Errors shared by every layer, with no dependencies (the pure packages import it).

:class:`InvalidInput` is the one error for a bad field value: the metric
library, the drift tests and the services raise it with the offending field,
and the HTTP layer turns it into problem+json naming that field
(app/api/errors.py). Conditions of the service itself (a missing model, a
reused idempotency key) derive from :class:`PriorwatchError`, one class per
condition; the HTTP layer maps each to its problem+json status.
"""

from __future__ import annotations

PROBLEM_PREFIX = "urn:priorwatch:problem:"
"""The prefix of every problem ``type`` URN (problem+json; the exporter counts rejections by it)."""


class InvalidInput(ValueError):
    """Input that no metric can be computed from; ``field`` names what is wrong.

    Examples
    --------
    >>> err = InvalidInput("scores", "must not be empty")
    >>> str(err), err.field, err.reason
    ('scores: must not be empty', 'scores', 'must not be empty')
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class PriorwatchError(Exception):
    """Base of the service's domain errors; ``detail`` is safe to show to clients."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ModelNotFound(PriorwatchError):
    """No model with that name."""


class ModelAlreadyExists(PriorwatchError):
    """A model with that name is already registered."""


class ApiKeyNotFound(PriorwatchError):
    """No key with that id for that model."""


class MalformedBody(PriorwatchError):
    """The request body is not valid JSON (or not a JSON object)."""


class IdempotencyKeyReused(PriorwatchError):
    """The Idempotency-Key was already used with a different request body."""


class RequestInFlight(PriorwatchError):
    """A request with the same Idempotency-Key is still being processed."""

    retry_after_seconds = 1


class StaleCredential(PriorwatchError):
    """The cached authorisation of a batch no longer holds (its model's settings
    changed, or its key was revoked): authorise it again from the database."""


class TooManyUnfoldedDeltas(PriorwatchError):
    """The model already has as many unfolded deltas as its bound allows
    (app/services/ingest/backpressure.py): the workers are down or behind."""

    retry_after_seconds = 5
