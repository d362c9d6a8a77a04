"""The innermost middleware: every request ends in a complete answer, in bounded time.

* An exception no handler took (a bug) becomes a clean problem+json 500; the
  traceback is logged once. Starlette's own last-resort handler would send the
  500 and then re-raise, and uvicorn closes the keep-alive connection after a
  re-raised exception without saying so (no ``Connection: close``): the
  client's next request on that connection fails.
* A request that has not started its answer after ``deadline_seconds`` gets
  503 ``database-unavailable`` with ``Retry-After``. Server-side timeouts
  (``statement_timeout``, ``lock_timeout``, connect and pool timeouts) end a
  slow database call on their own; the deadline covers a database that does
  not answer at all (a frozen server, a dead network path), where a call
  blocks in its thread. That thread finishes in the background once the
  database answers again, its answer dropped: a batch it stores then is found
  by the client's retry with the same ``Idempotency-Key`` (a replay), so
  nothing is counted twice.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import internal_error_response, unavailable_response

logger = logging.getLogger("priorwatch.api")


class ResponseGuardMiddleware:
    """Pure ASGI middleware; install it innermost (first ``add_middleware``).

    Parameters
    ----------
    app : ASGIApp
    deadline_seconds : float
        Longest wait for an answer to start.
    retry_after_seconds : int
        ``Retry-After`` of the 503 answer.
    """

    def __init__(self, app: ASGIApp, deadline_seconds: float, retry_after_seconds: int) -> None:
        self.app = app
        self.deadline_seconds = deadline_seconds
        self.retry_after_seconds = retry_after_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = asyncio.Event()
        abandoned = False

        async def guarded_send(message: Message) -> None:
            if abandoned:
                return
            if message["type"] == "http.response.start":
                started.set()
            await send(message)

        task = asyncio.ensure_future(self._run(scope, receive, guarded_send, started))
        waiter = asyncio.ensure_future(started.wait())
        try:
            await asyncio.wait(
                {task, waiter}, timeout=self.deadline_seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waiter.cancel()
        if task.done() or started.is_set():
            await task
            return
        abandoned = True
        task.add_done_callback(_retrieve)
        logger.warning(
            "%s %s: no answer within %.1f s (database not answering?); answered 503",
            scope.get("method"),
            scope.get("path"),
            self.deadline_seconds,
        )
        response = unavailable_response(
            f"the database did not answer within {self.deadline_seconds:g} s",
            instance=scope.get("path"),
            retry_after_seconds=self.retry_after_seconds,
        )
        await response(scope, receive, send)

    async def _run(
        self, scope: Scope, receive: Receive, send: Send, started: asyncio.Event
    ) -> None:
        try:
            await self.app(scope, receive, send)
        except Exception as exc:
            if started.is_set():
                raise  # the answer is under way: only closing the connection is left
            logger.error(
                "unhandled error on %s %s", scope.get("method"), scope.get("path"), exc_info=exc
            )
            await internal_error_response(scope.get("path"))(scope, receive, send)


def _retrieve(task: asyncio.Future[None]) -> None:
    """Collect the outcome of an abandoned request (it was logged, or it is moot)."""
    if not task.cancelled():
        task.exception()
