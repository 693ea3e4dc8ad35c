"""The MCP test server over stdio or HTTP, and the probe its blocking tools report to."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from anyio.abc import SocketAttribute, SocketListener, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from lionagi.mcp import McpServer

__all__ = ["SERVER", "Connection", "HttpServer", "MakeServer", "Probe", "http_server"]

SERVER = Path(__file__).with_name("mcp_server.py")
MakeServer = Callable[..., McpServer]


@dataclass
class HttpServer:
    url: str
    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def http_server() -> Iterator[HttpServer]:
    """The test server on streamable HTTP at a free port of 127.0.0.1, killed on exit."""
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode().split()
        assert line[:1] == ["PORT"], f"the HTTP test server did not start: {line!r}"
        yield HttpServer(f"http://127.0.0.1:{line[1]}/mcp", process)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


class Connection:
    """One tool call's reports, one line each."""

    def __init__(self, stream: SocketStream) -> None:
        self.stream = stream
        self._lines = BufferedByteReceiveStream(stream)

    async def line(self) -> str:
        return (await self._lines.receive_until(b"\n", 1024)).decode()

    async def started(self) -> int:
        """The pid in the ``started <pid>`` report a tool sends first."""
        kind, pid = (await self.line()).split()
        assert kind == "started"
        return int(pid)


class Probe:
    """A listener the test server's ``block``/``crash`` tools connect to, once per call."""

    def __init__(self, listener: SocketListener) -> None:
        self._listener = listener
        port = listener.extra(SocketAttribute.local_port)
        self.address = f"127.0.0.1:{port}"
        self._connections: list[Connection] = []

    async def accept(self) -> Connection:
        """The next tool call's connection."""
        connection = Connection(await self._listener.accept())
        self._connections.append(connection)
        return connection

    async def aclose(self) -> None:
        for connection in self._connections:
            await connection.stream.aclose()
        await self._listener.aclose()
