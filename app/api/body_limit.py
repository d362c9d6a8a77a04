"""Request bodies: the size limit (413), the read timeout (408) and Content-Encoding
(gzip or 415).

The limit is checked on the declared ``Content-Length`` before the
application runs, and on the bytes actually received (chunked bodies, or a
client that lies about the length) while the body is streamed in. A route may
have a smaller limit of its own (``/v1/evaluate``).

``Content-Encoding: gzip`` bodies are inflated as they arrive, never past the
limit: each chunk is decompressed with ``max_length`` = what the limit still
allows + 1, so a compression bomb costs at most the limit in memory before
its 413. The application sees the decoded body (the header removed).
``identity`` (or no header) passes through; any other coding, or several,
gets 415 with ``Accept-Encoding: gzip, identity``.

The whole body must arrive within ``body_timeout_seconds`` of the request's
headers: a read still waiting for the client then ends in 408
``body-timeout`` with ``Connection: close`` (a trickling client is
disconnected, it holds nothing meanwhile). Reads after the end of the body
(a wait for the client's disconnect) are not bounded.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Mapping

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import ProblemError, body_too_large, problem_response, problem_type

ACCEPTED_ENCODINGS = "gzip, identity"
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip header and trailer, not raw deflate


def unsupported_encoding(encoding: str) -> ProblemError:
    return ProblemError(
        415,
        "unsupported-media-type",
        f"Content-Encoding {encoding!r} is not supported: send gzip or identity",
        headers={"Accept-Encoding": ACCEPTED_ENCODINGS},
    )


def body_timeout(seconds: float) -> ProblemError:
    return ProblemError(
        408,
        "body-timeout",
        f"the request body did not arrive within {seconds:g} s of its headers",
        headers={"Connection": "close"},
    )


def malformed_gzip(reason: str) -> ProblemError:
    return ProblemError(400, "malformed-json", f"the gzip body cannot be decoded: {reason}")


class GzipReader:
    """Inflate a gzip stream chunk by chunk, refusing to produce more than ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.produced = 0
        self._inflater = zlib.decompressobj(_GZIP_WBITS)

    def feed(self, data: bytes, *, last: bool) -> bytes:
        """The decoded bytes of ``data``; 413 past the limit, 400 when corrupt or truncated."""
        try:
            out = self._inflater.decompress(data, self.limit - self.produced + 1)
        except zlib.error as exc:
            raise malformed_gzip(str(exc)) from None
        self.produced += len(out)
        if self.produced > self.limit:
            raise body_too_large(self.limit)
        if self._inflater.unused_data:
            raise malformed_gzip("data after the end of the gzip stream")
        if last and not self._inflater.eof:
            raise malformed_gzip("the stream is truncated")
        return out


class BodySizeLimitMiddleware:
    """Pure ASGI middleware.

    ``max_body_bytes`` is the largest accepted (decoded) body;
    ``route_limits`` maps a path to a smaller limit of its own;
    ``body_timeout_seconds`` bounds the wait for the whole body.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        body_timeout_seconds: float,
        route_limits: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_seconds = body_timeout_seconds
        self.route_limits = dict(route_limits or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.route_limits.get(scope.get("path", ""), self.max_body_bytes)
        headers = Headers(scope=scope)
        encoding = headers.get("content-encoding", "").strip().lower()
        declared = headers.get("content-length")
        error: ProblemError | None = None
        if encoding == "x-gzip":  # the old name, equivalent (RFC 9110)
            encoding = "gzip"
        if encoding not in ("", "identity", "gzip"):
            error = unsupported_encoding(headers["content-encoding"])
        elif declared is not None and declared.isdigit() and int(declared) > limit:
            error = body_too_large(limit)
        if error is not None:
            response = problem_response(
                error.status_code,
                type_=problem_type(error.slug),
                detail=error.detail,
                instance=scope.get("path"),
                headers={**(error.headers or {}), "Connection": "close"},
            )
            await response(scope, receive, send)
            return
        gzip = GzipReader(limit) if encoding == "gzip" else None
        if gzip is not None:  # the application sees the decoded body
            scope = {**scope, "headers": _without_encoding(scope["headers"])}
        received = 0
        complete = False
        deadline = asyncio.get_running_loop().time() + self.body_timeout_seconds

        async def limited_receive() -> Message:
            nonlocal received, complete
            if complete:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise body_timeout(self.body_timeout_seconds) from None
            complete = not message.get("more_body", False)
            if message["type"] == "http.request":
                body = message.get("body", b"")
                if gzip is not None:
                    body = gzip.feed(body, last=not message.get("more_body", False))
                    message = {**message, "body": body}
                received += len(body)
                if received > limit:
                    raise body_too_large(limit)
            return message

        await self.app(scope, limited_receive, send)


def _without_encoding(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    dropped = (b"content-encoding", b"content-length")
    return [(name, value) for name, value in raw if name.lower() not in dropped]
