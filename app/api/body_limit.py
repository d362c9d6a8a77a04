"""Refuse request bodies above the configured size (413 problem+json).

Checked twice: on the declared ``Content-Length`` before the application runs,
and on the bytes actually received (chunked bodies, or a client that lies
about the length), while the body is streamed in.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import body_too_large, problem_response, problem_type


class BodySizeLimitMiddleware:
    """Pure ASGI middleware; ``max_body_bytes`` is the largest accepted body."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            error = body_too_large(limit)
            response = problem_response(
                413,
                type_=problem_type(error.slug),
                detail=error.detail,
                instance=scope.get("path"),
                headers={"Connection": "close"},
            )
            await response(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise body_too_large(limit)
            return message

        await self.app(scope, limited_receive, send)
