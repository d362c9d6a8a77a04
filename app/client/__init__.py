"""Python client of a priorwatch service (no FastAPI, no SQLAlchemy: numpy and httpx).

>>> from app.client import Client
>>> with Client("http://127.0.0.1:8000", token="pw_...", model="fraud") as pw:  # doctest: +SKIP
...     pw.log(scores, labels)

See docs/client.md.
"""

from app.client.aio import AsyncClient
from app.client.client import Client
from app.client.errors import (
    ApiError,
    BufferFull,
    ClientError,
    DeliveryError,
    RetriesExhausted,
    UndeliveredBatch,
)
from app.client.retry import RetryPolicy
from app.client.types import ModelInfo, ObjectiveResult, SlaReport, SlaWindow, Window

__all__ = [
    "ApiError",
    "AsyncClient",
    "BufferFull",
    "Client",
    "ClientError",
    "DeliveryError",
    "ModelInfo",
    "ObjectiveResult",
    "RetriesExhausted",
    "RetryPolicy",
    "SlaReport",
    "SlaWindow",
    "UndeliveredBatch",
    "Window",
]
