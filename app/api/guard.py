"""The innermost middleware: every request ends in a complete answer, in bounded time.

* An exception no handler took (a bug) becomes a clean problem+json 500; the
  traceback is logged once. Starlette's own last-resort handler would send the
  500 and then re-raise, and uvicorn closes the keep-alive connection after a
  re-raised exception without saying so (no ``Connection: close``): the
  client's next request on that connection fails.
* A request that has not started its answer ``deadline_seconds`` after the
  end of its body read gets 503 ``database-unavailable`` with
  ``Retry-After``. The clock runs from the request's arrival, stops while
  the application waits for the client (a body read, bounded on its own:
  app/api/body_limit.py) and starts again from zero when the wait ends, so a
  slow upload is not taken for a database outage. Exempt paths (the
  exposition, which Prometheus bounds with its scrape timeout) have no
  deadline. Server-side timeouts
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
from collections.abc import Collection

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import internal_error_response, unavailable_response

log = logging.getLogger("priorwatch.api")


class ResponseGuardMiddleware:
    """Pure ASGI middleware; install it innermost (first ``add_middleware``).

    Parameters
    ----------
    app : ASGIApp
    deadline_seconds : float
        Longest wait for an answer to start, counted from the end of the body read.
    retry_after_seconds : int
        ``Retry-After`` of the 503 answer.
    exempt_paths : Collection[str]
        Paths without a deadline.
    """

    def __init__(
        self,
        app: ASGIApp,
        deadline_seconds: float,
        retry_after_seconds: int,
        exempt_paths: Collection[str] = (),
    ) -> None:
        self.app = app
        self.deadline_seconds = deadline_seconds
        self.retry_after_seconds = retry_after_seconds
        self.exempt_paths = frozenset(exempt_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answer = _Answer(send)
        if scope.get("path") in self.exempt_paths:
            await self._run(scope, receive, answer)
            return
        # One task runs the request; this one waits until its answer starts, it
        # ends or the clock expires, whichever comes first (each resolves ``decided``
        # from a callback: no task of their own).
        decided = asyncio.get_running_loop().create_future()
        answer.decided = decided
        clock = _Clock(self.deadline_seconds, decided)

        async def clocked_receive() -> Message:
            clock.pause()  # waiting for the client is not waiting for the database
            try:
                return await receive()
            finally:
                clock.restart()

        clock.restart()
        task = asyncio.ensure_future(self._run(scope, clocked_receive, answer))
        task.add_done_callback(lambda _: _decide(decided))
        try:
            await decided
        finally:
            clock.stop()
        if task.done() or answer.started:
            await task
            return
        answer.abandoned = True
        task.add_done_callback(_retrieve)
        log.warning(
            "%s %s: no answer within %.1f s of the body read (database not answering?); "
            "answered 503",
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

    async def _run(self, scope: Scope, receive: Receive, answer: _Answer) -> None:
        try:
            await self.app(scope, receive, answer.send)
        except ClientDisconnect:  # the client left while sending its body: nobody to answer
            log.info("%s %s: the client disconnected", scope.get("method"), scope.get("path"))
        except Exception as exc:
            if answer.started:
                raise  # the answer is under way: only closing the connection is left
            log.error(
                "unhandled error on %s %s", scope.get("method"), scope.get("path"), exc_info=exc
            )
            await internal_error_response(scope.get("path"))(scope, receive, answer.send)


class _Answer:
    """The sending side of one request: whether its answer has started, and whether
    it was abandoned (a 503 was sent instead: what the request sends later is dropped)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        self.abandoned = False
        self.decided: asyncio.Future[None] | None = None

    async def send(self, message: Message) -> None:
        if self.abandoned:
            return
        if message["type"] == "http.response.start":
            self.started = True
            if self.decided is not None:
                _decide(self.decided)
        await self._send(message)


def _decide(decided: asyncio.Future[None]) -> None:
    if not decided.done():
        decided.set_result(None)


class _Clock:
    """Resolves ``expired`` ``seconds`` after its last :meth:`restart`, unless paused
    or stopped."""

    def __init__(self, seconds: float, expired: asyncio.Future[None]) -> None:
        self.seconds = seconds
        self._expired = expired
        self._timer: asyncio.TimerHandle | None = None
        self._stopped = False

    def restart(self) -> None:
        self.pause()
        if not self._stopped:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.seconds, _decide, self._expired)

    def pause(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def stop(self) -> None:
        """Pause for good (the request was answered or abandoned)."""
        self._stopped = True
        self.pause()


def _retrieve(task: asyncio.Future[None]) -> None:
    """Collect the outcome of an abandoned request (it was logged, or it is moot)."""
    if not task.cancelled():
        task.exception()
