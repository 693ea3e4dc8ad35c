"""A scripted HTTP server on 127.0.0.1 for provider tests (real sockets, no mocked transport).

Tests queue :class:`Reply` objects (answered in order) and read back the :class:`Received`
requests. A reply is a status with a JSON or raw body, or a list of raw SSE chunks sent with
chunked transfer encoding, in which :data:`DROP`, :data:`HANG` and :data:`AWAIT_CLOSE` steps
break the connection, block until the server stops, or wait until the client hangs up.
"""

from __future__ import annotations

import enum
import json
import select
import socket
import struct
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Step(enum.Enum):
    DROP = "drop"  # close the connection here, mid-body
    HANG = "hang"  # block until the server stops
    AWAIT_CLOSE = "await_close"  # block until the client closes the connection


DROP, HANG, AWAIT_CLOSE = Step.DROP, Step.HANG, Step.AWAIT_CLOSE


def sse(data: Any, event: str | None = None) -> str:
    """One SSE event: ``data`` as JSON (a str is sent as is), with an optional event name."""
    text = data if isinstance(data, str) else json.dumps(data)
    head = "" if event is None else f"event: {event}\n"
    return head + "".join(f"data: {line}\n" for line in text.split("\n")) + "\n"


@dataclass
class Reply:
    """What the server answers to one request."""

    status: int = 200
    json: Any = None
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[str | Step] | None = None
    hang: bool = False  # never send anything; block until the server stops
    reset: bool = False  # answer nothing and reset the connection (TCP RST)


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class ScriptedServer:
    """The server. Use as a context manager; ``url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[Received] = []
        self.stopping = threading.Event()
        self.client_closed = threading.Event()  # set when the server observed a hang-up
        self._connections: set[socket.socket] = set()
        self._httpd = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="scripted-http"
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def reply(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def next_reply(self) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        return Reply(status=500, json={"error": {"message": "no scripted reply left"}})

    def record(self, received: Received) -> None:
        with self._lock:
            self.requests.append(received)

    def track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:  # wake handlers blocked reading a kept-alive connection
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()  # joins every handler thread
        self._thread.join()


@contextmanager
def scripted_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True

    def __init__(self, address: tuple[str, int], handler: type, owner: ScriptedServer) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up mid-answer is what several tests do on purpose


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.owner.track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner.track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        owner.record(
            Received(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
        )
        reply = owner.next_reply()
        if reply.hang:
            owner.stopping.wait()
            self.close_connection = True
            return
        if reply.reset:
            # linger 0: close() sends RST instead of FIN, as a crashed or overloaded peer does
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        try:
            if reply.events is None:
                self._send_whole(reply)
            else:
                self._send_events(reply)
        except OSError:  # the client went away
            self.close_connection = True

    def _send_whole(self, reply: Reply) -> None:
        payload = reply.body if reply.body is not None else json.dumps(reply.json).encode()
        self.send_response(reply.status)
        headers = {"content-type": "application/json", **reply.headers}
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _send_events(self, reply: Reply) -> None:
        owner = self.server.owner
        self.send_response(reply.status)
        headers = {"content-type": "text/event-stream", **reply.headers}
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for item in reply.events or ():
            if item is DROP:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if item is HANG:
                owner.stopping.wait()
                self.close_connection = True
                return
            if item is AWAIT_CLOSE:
                self._await_client_close()
                return
            assert isinstance(item, str)
            data = item.encode()
            try:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            except OSError:
                owner.client_closed.set()  # the client hung up while events were still due
                self.close_connection = True
                return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _await_client_close(self) -> None:
        """Block until the client closes the connection (EOF or reset), or the server stops."""
        owner = self.server.owner
        self.close_connection = True
        while not owner.stopping.is_set():
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if not readable:
                continue
            try:
                data = self.connection.recv(1)
            except OSError:
                data = b""
            if not data:
                owner.client_closed.set()
                return
