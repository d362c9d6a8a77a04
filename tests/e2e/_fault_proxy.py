"""An HTTP/1.1 proxy that misbehaves on purpose, for the client's delivery tests.

One request per connection (answers carry ``Connection: close``). Each
``POST`` gets one fate, drawn from a seeded generator:

- ``refuse``: answered 503, 429 or 409 (``Retry-After: 0``) by the proxy
  itself; the service never sees it;
- ``drop``: forwarded, the service's full answer read, then the client's
  connection closed without a byte: the request was stored, its answer lost;
- ``pass``: forwarded and answered normally.

Other methods always pass. The proxy runs its own asyncio loop in a thread
and records what it did, including which answers were replays
(``Idempotent-Replayed: true``).
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
from collections import Counter
from dataclasses import dataclass, field

REFUSALS = (
    (503, "Service Unavailable", "not-ready"),
    (429, "Too Many Requests", "too-many-requests"),
    (409, "Conflict", "request-in-flight"),
)
_CONTENT_LENGTH = re.compile(rb"^content-length:\s*(\d+)\s*$", re.IGNORECASE | re.MULTILINE)
_KEY = re.compile(rb"^idempotency-key:\s*(\S+)\s*$", re.IGNORECASE | re.MULTILINE)
_CONNECTION = re.compile(rb"^connection:[^\r\n]*\r\n", re.IGNORECASE | re.MULTILINE)


@dataclass
class FaultProxy:
    """Forward 127.0.0.1:<port> to ``upstream_port``, refusing and dropping some POSTs."""

    upstream_port: int
    rng: random.Random
    refuse: float = 0.25
    drop: float = 0.2
    port: int = 0
    fates: Counter[str] = field(default_factory=Counter)
    dropped_keys: set[bytes] = field(default_factory=set)
    replays_relayed: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None

    def start(self) -> FaultProxy:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._server = loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", 0)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            self._server.close()
            loop.run_until_complete(self._server.wait_closed())
            loop.close()

        self._thread = threading.Thread(target=run, name="fault-proxy", daemon=True)
        self._thread.start()
        assert ready.wait(10.0), "the proxy did not start"
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10.0)

    def _fate(self, head: bytes) -> str:
        if not head.startswith(b"POST "):
            return "pass"
        u = self.rng.random()
        return "refuse" if u < self.refuse else "drop" if u < self.refuse + self.drop else "pass"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = _CONTENT_LENGTH.search(head)
            body = await reader.readexactly(int(length.group(1))) if length else b""
            fate = self._fate(head)
            self.fates[fate] += 1
            if fate == "refuse":
                status, reason, problem = REFUSALS[self.rng.randrange(len(REFUSALS))]
                doc = b'{"type": "urn:priorwatch:problem:%s", "status": %d}' % (
                    problem.encode(),
                    status,
                )
                writer.write(
                    b"HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\n"
                    b"Retry-After: 0\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                    % (status, reason.encode(), len(doc), doc)
                )
                await writer.drain()
                return
            answer = await self._forward(head, body)
            if fate == "drop":
                key = _KEY.search(head)
                if key:
                    self.dropped_keys.add(key.group(1))
                return  # the answer is lost: close without a byte
            if b"\r\nidempotent-replayed: true" in answer.split(b"\r\n\r\n", 1)[0].lower():
                self.replays_relayed += 1
            writer.write(answer)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _forward(self, head: bytes, body: bytes) -> bytes:
        """Send the request upstream with ``Connection: close``; its whole answer."""
        request_line, _, rest = head.partition(b"\r\n")
        rest = _CONNECTION.sub(b"", rest)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        try:
            up_writer.write(request_line + b"\r\nConnection: close\r\n" + rest + body)
            await up_writer.drain()
            return await up_reader.read()  # until the service closes
        finally:
            up_writer.close()
