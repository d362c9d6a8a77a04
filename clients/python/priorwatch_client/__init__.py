"""Python client of a priorwatch service (no FastAPI, no SQLAlchemy: numpy and httpx).

>>> from priorwatch_client import Client
>>> with Client("http://127.0.0.1:8000", token="pw_...", model="fraud") as pw:  # doctest: +SKIP
...     pw.log(scores, labels)

See docs/client.md.
"""

from priorwatch_client.aio import AsyncClient
from priorwatch_client.client import Client
from priorwatch_client.errors import (
    ApiError,
    BufferFull,
    ClientError,
    DeliveryError,
    InvalidInput,
    RetriesExhausted,
    UndeliveredBatch,
)
from priorwatch_client.retry import RetryPolicy
from priorwatch_client.types import ModelInfo, ObjectiveResult, SlaReport, SlaWindow, Window

__all__ = [
    "ApiError",
    "AsyncClient",
    "BufferFull",
    "Client",
    "ClientError",
    "DeliveryError",
    "InvalidInput",
    "ModelInfo",
    "ObjectiveResult",
    "RetriesExhausted",
    "RetryPolicy",
    "SlaReport",
    "SlaWindow",
    "UndeliveredBatch",
    "Window",
]
