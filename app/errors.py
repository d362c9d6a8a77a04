"""Errors shared by every layer, with no dependencies (the pure packages import it).

:class:`InvalidInput` is the one error for a bad field value: the metric
library, the drift tests and the services raise it with the offending field,
and the HTTP layer turns it into problem+json naming that field
(app/api/errors.py). Conditions of the service itself (a missing model, a
reused idempotency key) are in :mod:`app.services.errors`.
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
