"""Use the client from asyncio code: every call runs in a worker thread.

:class:`AsyncClient` wraps a :class:`~priorwatch_client.client.Client` and awaits
each of its methods through :func:`asyncio.to_thread`, so binning (numpy),
back-pressure waits, flushes and reads never block the event loop. The
wrapped client keeps its own background sender thread; nothing of it is tied
to a loop, so an ``AsyncClient`` may be used from any loop (or several, one
after the other).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from types import TracebackType
from typing import Any

from priorwatch_client.client import Client
from priorwatch_client.types import ModelInfo, SlaReport, Window


class AsyncClient:
    """The asyncio face of :class:`Client` (same parameters, awaitable methods)."""

    def __init__(self, base_url: str, token: str, model: str, **options: Any) -> None:
        self.sync = Client(base_url, token, model, **options)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def model_info(self, *, refresh: bool = False) -> ModelInfo:
        return await asyncio.to_thread(self.sync.model_info, refresh=refresh)

    async def log(
        self,
        scores: Any,
        labels: Any,
        timestamp: datetime | float | None = None,
        segment: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> None:
        await asyncio.to_thread(
            self.sync.log, scores, labels, timestamp, segment, idempotency_key=idempotency_key
        )

    async def log_scores(
        self,
        scores: Any,
        timestamp: datetime | float | None = None,
        segment: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> None:
        await asyncio.to_thread(
            self.sync.log_scores, scores, timestamp, segment, idempotency_key=idempotency_key
        )

    async def flush(self, timeout: float | None = None) -> None:
        await asyncio.to_thread(self.sync.flush, timeout)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def windows(
        self,
        from_: datetime | None = None,
        to: datetime | None = None,
        segment: str | None = None,
        granularity: str | None = None,
    ) -> tuple[Window, ...]:
        return await asyncio.to_thread(self.sync.windows, from_, to, segment, granularity)

    async def window(
        self, start: datetime, segment: str | None = None, granularity: str | None = None
    ) -> Window | None:
        return await asyncio.to_thread(self.sync.window, start, segment, granularity)

    async def sla(
        self, from_: datetime | None = None, to: datetime | None = None, segment: str | None = None
    ) -> SlaReport:
        return await asyncio.to_thread(self.sync.sla, from_, to, segment)
