"""Fixtures for the MCP tests: the test server over stdio or HTTP, and a probe listener."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

from lionagi.mcp import McpServer
from tests.mcp.servers import SERVER, MakeServer, Probe, http_server


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def make_server(transport: str) -> Iterator[MakeServer]:
    """``make_server(**kw)`` builds an McpServer for the test server over ``transport``."""
    with contextlib.ExitStack() as stack:

        def make(**kw: Any) -> McpServer:
            if transport == "stdio":
                return McpServer.stdio(sys.executable, [str(SERVER)], name="test", **kw)
            running = stack.enter_context(http_server())
            return McpServer.http(running.url, name="test", **kw)

        yield make


@pytest.fixture
async def probe() -> AsyncIterator[Probe]:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    probe = Probe(listener.listeners[0])  # type: ignore[arg-type]
    try:
        yield probe
    finally:
        await probe.aclose()
