"""A cap on how many requests of one route run at once (429 beyond it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from app.api.errors import ProblemError

RETRY_AFTER_SECONDS = 1


class ConcurrencyCap:
    """At most ``limit`` holders of :meth:`slot` at a time.

    Used from the event loop only (async routes), so the counter needs no lock.
    """

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        self.what = what
        self.active = 0

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one slot for the ``with`` block; 429 with Retry-After when none is free."""
        if self.active >= self.limit:
            raise ProblemError(
                429,
                "too-many-requests",
                f"{self.limit} {self.what} already running; retry after {RETRY_AFTER_SECONDS} s",
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
