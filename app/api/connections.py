"""The connections of ``priorwatch serve``: uvicorn's h11 protocol with a header timeout.

uvicorn closes a keep-alive connection left idle ``timeout_keep_alive``
seconds after a response, but nothing bounds a connection before its first
request, nor one whose request line and headers stop half-way (a new byte
even cancels the keep-alive timer): such connections stay open until the
client leaves or the process runs out of file descriptors.

:class:`HeaderTimeoutProtocol` closes a connection whose request headers
are not complete ``header_timeout_seconds`` after it opened, or after the
first byte of the request (later requests on a keep-alive connection). Once
the headers are in, the body has its own bound (app/api/body_limit.py);
between requests uvicorn's keep-alive timeout applies. The headers' size is
bounded by h11 (``h11_max_incomplete_event_size``, 16 KiB by default: a
larger head gets 400).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from app.config import Settings


class ServerConfig(Config):
    """uvicorn's configuration serving through :class:`HeaderTimeoutProtocol`."""

    def __init__(self, app: Any, *, header_timeout_seconds: float, **options: Any) -> None:
        super().__init__(app, http=HeaderTimeoutProtocol, **options)
        self.header_timeout_seconds = header_timeout_seconds


def server_config(app: Any, settings: Settings, **options: Any) -> ServerConfig:
    """How ``priorwatch serve`` serves ``app``: the header and keep-alive timeouts of
    ``settings``, uvicorn's ``options`` (host, port, log level)."""
    return ServerConfig(
        app,
        header_timeout_seconds=settings.header_timeout_seconds,
        timeout_keep_alive=settings.keep_alive_seconds,
        **options,
    )


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol; closes a connection whose request headers are late."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        assert isinstance(config, ServerConfig)
        self.header_timeout_seconds = config.header_timeout_seconds
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _watch_headers(self) -> None:
        """Time the headers while h11 waits for them; stop once a request has them."""
        if self.conn.their_state is not h11.IDLE:
            self._cancel_header_timer()
        elif self._header_timer is None and not self.transport.is_closing():
            self._header_timer = self.loop.call_later(
                self.header_timeout_seconds, self._headers_late
            )

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE:
            self.timeout_keep_alive_handler()  # closes the connection

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
