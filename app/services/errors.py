"""Domain errors of the service layer, one base, named by condition.

Bad field values are :class:`app.errors.InvalidInput` (field +
reason), shared with the metric library; the HTTP layer maps every error here
to problem+json (app/api/errors.py).
"""

from __future__ import annotations


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
    (app/services/backpressure.py): the workers are down or behind."""

    retry_after_seconds = 5
