"""A small MCP server the MCP tests start: over stdio, or over streamable HTTP on 127.0.0.1.

``python mcp_server.py`` serves stdio; ``python mcp_server.py --http`` binds a free port on
127.0.0.1, prints ``PORT <n>`` and serves streamable HTTP at ``/mcp``. The ``block`` and
``crash`` tools report to ``probe`` (``host:port`` of a listener the test owns): they send
``started <pid>`` when they begin and, for ``block``, ``cancelled`` when the client cancels
the request, so a test waits on events, never on sleeps.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

logging.getLogger("mcp").setLevel(logging.CRITICAL)  # failing tools are part of the tests
server = MCPServer("lionagi-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat text."""
    return " ".join([text] * times)


@server.tool()
def lookup(key: str) -> dict[str, Any]:
    """Structured data for a key."""
    return {"key": key, "length": len(key)}


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason."""
    raise ValueError(f"refused: {reason}")


@server.tool()
def headers(ctx: Context) -> dict[str, str]:
    """The request's ``x-test-*`` and ``authorization`` headers (none over stdio)."""
    seen = ctx.headers or {}
    return {k: v for k, v in seen.items() if k.startswith("x-test-") or k == "authorization"}


@server.tool()
async def grow(tool: str, ctx: Context) -> str:
    """Adds a tool ``tool`` (doubles a number) and tells the client its tools changed: as a
    ``subscriptions/listen`` event (protocol 2026-07-28) and as the earlier protocols'
    ``notifications/tools/list_changed``."""

    def double(x: int) -> int:
        return 2 * x

    server.add_tool(double, name=tool, description="Double a number.")
    await _tools_changed(ctx)
    return tool


@server.tool()
async def shrink(tool: str, ctx: Context) -> str:
    """Removes the tool ``tool`` and tells the client, as :func:`grow` does."""
    server.remove_tool(tool)
    await _tools_changed(ctx)
    return tool


async def _tools_changed(ctx: Context) -> None:
    await ctx.notify_tools_changed()  # reaches subscriptions/listen streams (2026-07-28)
    await ctx.session.send_tool_list_changed()  # reaches clients of the earlier protocols


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


async def _probe(probe: str, message: str) -> anyio.abc.SocketStream:
    host, port = probe.rsplit(":", 1)
    stream = await anyio.connect_tcp(host, int(port))
    await stream.send(f"{message}\n".encode())
    return stream


@server.tool()
async def block(probe: str) -> str:
    """Never returns; reports its start and its cancellation to the probe."""
    stream = await _probe(probe, f"started {os.getpid()}")
    try:
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await stream.send(b"cancelled\n")
            await stream.aclose()
    return "unreachable"


@server.tool()
async def crash(probe: str) -> str:
    """The server process dies while answering."""
    stream = await _probe(probe, f"started {os.getpid()}")
    await stream.aclose()
    os._exit(3)


def serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    anyio.run(uvicorn.Server(config).serve, [sock])


if __name__ == "__main__":
    if "--http" in sys.argv:
        serve_http()
    else:
        server.run("stdio")
