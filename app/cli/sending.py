"""How ``ingest`` and ``simulate`` send scores: the Python client.

``priorwatch_client.Client`` bins the rows into the model's bins, sends compact
histogram batches with their own Idempotency-Keys (``ingest`` supplies them,
derived from the file: :func:`sent_before` tells the chunks an earlier run
stored) and retries transient failures (docs/client.md). The commands bound
its retries to ``retry_seconds`` (an interactive command should not wait ten
minutes for a service that is down) and turn its errors into the exit codes
of app/cli/service.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from app.cli.service import EXIT_SERVICE, EXIT_UNREACHABLE, EXIT_USAGE, fail
from priorwatch_client import (
    ApiError,
    Client,
    ClientError,
    DeliveryError,
    RetriesExhausted,
    RetryPolicy,
    UndeliveredBatch,
)

KEY_REUSED = ":idempotency-key-reused"
"""The end of the problem type the service answers for a key sent with another body."""


def _unreachable(error: BaseException) -> bool:
    """True for a transport failure, possibly wrapped (RetriesExhausted chains it)."""
    current: BaseException | None = error
    while current is not None:
        if isinstance(current, httpx.TransportError):
            return True
        current = current.__cause__
    return False


@contextmanager
def sending(base_url: str, token: str, model: str, retry_seconds: float) -> Iterator[Client]:
    """The client of ``model``, closed (everything flushed) on leaving the block.

    Any error of the client ends the command: a refused request or batch
    with :data:`EXIT_SERVICE`, a service that stayed unreachable with
    :data:`EXIT_UNREACHABLE`, rows the client refuses (e.g. an unregistered
    segment) with :data:`EXIT_USAGE`.
    """
    retry = RetryPolicy(initial_s=0.2, max_delay_s=5.0, max_elapsed_s=retry_seconds)
    try:
        with Client(base_url, token=token, model=model, retry=retry) as client:
            yield client
    except ApiError as exc:
        fail(str(exc))
    except RetriesExhausted as exc:
        fail(str(exc), EXIT_UNREACHABLE if _unreachable(exc) else EXIT_SERVICE)
    except DeliveryError as exc:
        down = all(_unreachable(c) for c in exc.causes)
        fail(f"{exc}", EXIT_UNREACHABLE if down else EXIT_SERVICE)
    except ClientError as exc:
        fail(str(exc))
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)


def sent_before(client: Client) -> list[UndeliveredBatch]:
    """Flush; the batches refused only because their key was used with another body.

    A chunk's key fixes its rows, so such a batch was sent by an earlier run
    at another time (a file without timestamps is counted at the time it is
    received): it is already counted. Any other refusal is raised.
    """
    try:
        client.flush()
    except DeliveryError as exc:
        pairs = list(zip(exc.batches, exc.causes, strict=True))
        known = [b for b, c in pairs if isinstance(c, ApiError) and c.type.endswith(KEY_REUSED)]
        rest = [(b, c) for b, c in pairs if b not in known]
        if rest:
            raise DeliveryError(tuple(b for b, _ in rest), tuple(c for _, c in rest)) from None
        return known
    return []
