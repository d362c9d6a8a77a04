"""Where ``ingest`` and ``simulate`` send labelled scores: the Python client.

:func:`open_sender` returns ``app.client.Client`` (aggregation into the model's
bins, retries, idempotency) when it is installed. Until then it returns
:class:`RawBatches`, which has the same ``log``/``close`` surface and posts raw
JSON batches of at most :data:`MAX_ROWS_PER_POST` rows, each with its own
Idempotency-Key, and stops at the first refused batch.
"""

from __future__ import annotations

import importlib
import uuid
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol

import httpx
import numpy as np
import numpy.typing as npt
import orjson

from app.cli.service import EXIT_UNREACHABLE, TIMEOUT, describe_problem, fail

MAX_ROWS_PER_POST = 100_000


class Sender(Protocol):
    """What the commands use of a sender (``app.client.Client`` has it)."""

    def log(
        self,
        scores: npt.ArrayLike,
        labels: npt.ArrayLike,
        timestamp: datetime | None = None,
        segment: str | None = None,
    ) -> Any: ...

    def close(self) -> Any: ...

    def __enter__(self) -> Any: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any: ...


class RawBatches:
    """Posts raw ``scores``/``labels`` batches synchronously (see the module docstring)."""

    def __init__(self, base_url: str, token: str, model: str) -> None:
        self._url = f"{base_url.rstrip('/')}/v1/models/{model}/batches"
        self._http = httpx.Client(timeout=TIMEOUT, headers={"Authorization": f"Bearer {token}"})

    def log(
        self,
        scores: npt.ArrayLike,
        labels: npt.ArrayLike,
        timestamp: datetime | None = None,
        segment: str | None = None,
    ) -> None:
        s = np.asarray(scores, dtype=np.float64)
        y = np.asarray(labels, dtype=np.int64)
        for lo in range(0, s.size, MAX_ROWS_PER_POST):
            doc: dict[str, Any] = {
                "scores": s[lo : lo + MAX_ROWS_PER_POST].tolist(),
                "labels": y[lo : lo + MAX_ROWS_PER_POST].tolist(),
            }
            if timestamp is not None:
                doc["timestamp"] = timestamp.isoformat()
            if segment is not None:
                doc["segment"] = segment
            headers = {"Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())}
            try:
                response = self._http.post(self._url, content=orjson.dumps(doc), headers=headers)
            except httpx.TransportError as exc:
                fail(f"cannot reach the service at {self._url}: {exc}", EXIT_UNREACHABLE)
            if response.status_code >= 400:
                fail(describe_problem(response))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RawBatches:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_sender(base_url: str, token: str, model: str) -> Sender:
    """The Python client of ``model`` when installed, else :class:`RawBatches`."""
    try:
        client_class = getattr(importlib.import_module("app.client"), "Client", None)
    except ImportError:
        client_class = None
    if client_class is None:
        return RawBatches(base_url, token, model)
    sender: Sender = client_class(base_url, token=token, model=model)
    return sender
