"""A slow HTTP client for tests: one request written by hand over a socket, in pieces.

Headers first (optionally with ``Expect: 100-continue``: the server answers
``100 Continue`` when the application starts reading the body, that is once
the caller is authorised), then the body in parts, at the test's pace. The
answers are parsed with h11, as a client.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

import h11

RECV_BYTES = 65536


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class SlowRequest:
    """One request to ``127.0.0.1:port``; every wait is bounded by ``timeout`` seconds."""

    port: int
    timeout: float = 30.0
    sock: socket.socket = field(init=False)
    conn: h11.Connection = field(init=False)
    _final: h11.Response | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        self.conn = h11.Connection(h11.CLIENT)

    def send_head(
        self, method: str, path: str, headers: dict[str, str], *, expect_continue: bool = False
    ) -> None:
        fields = [("Host", "127.0.0.1"), *headers.items()]
        if expect_continue:
            fields.append(("Expect", "100-continue"))
        self.sock.sendall(self.conn.send(h11.Request(method=method, target=path, headers=fields)))

    def send_raw(self, data: bytes) -> None:
        """Bytes as they are (a partial request line or header, a piece of the body)."""
        self.sock.sendall(data)

    def send_body(self, data: bytes, *, last: bool = False) -> None:
        """A piece of the body (``last``: and the end of the request)."""
        events: list[h11.Event] = [h11.Data(data=data)] if data else []
        if last:
            events.append(h11.EndOfMessage())
        self.sock.sendall(b"".join(self.conn.send(event) or b"" for event in events))

    def _next_event(self) -> h11.Event | type[h11.PAUSED] | type[h11.NEED_DATA]:
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.conn.receive_data(self.sock.recv(RECV_BYTES))

    def read_interim_or_answer(self) -> int:
        """The status of the next response event: 100 (go on with the body) or final."""
        event = self._next_event()
        assert isinstance(event, h11.InformationalResponse | h11.Response), event
        if isinstance(event, h11.Response):
            self._final = event
        return int(event.status_code)

    def answer(self) -> Answer:
        """The final response, whole."""
        head = self._final
        while head is None:
            event = self._next_event()
            if isinstance(event, h11.Response):
                head = event
        body = bytearray()
        while True:
            event = self._next_event()
            if isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
        headers = {k.decode().lower(): v.decode() for k, v in head.headers}
        return Answer(int(head.status_code), headers, bytes(body))

    def answer_waiting(self) -> bool:
        """Whether the server has sent anything not read yet (no wait)."""
        self.sock.setblocking(False)
        try:
            return bool(self.sock.recv(1, socket.MSG_PEEK))
        except BlockingIOError:
            return False
        finally:
            self.sock.settimeout(self.timeout)

    def closed_by_server(self) -> bool:
        """Whether the server closes the connection (True) within the timeout (False:
        it stays open, or the server sent something)."""
        try:
            return self.sock.recv(RECV_BYTES) == b""
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()
