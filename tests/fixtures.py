"""Fixtures shared by tests/ and tests_trio/ (their conftest.py files import them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from anyio.abc import Process

from tests.processes import spawned_processes
from tests.service.http_server import ScriptedServer

__all__ = ["processes", "server"]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    """A scripted HTTP server on 127.0.0.1, stopped (every connection closed) at teardown."""
    with ScriptedServer() as running:
        yield running


@pytest.fixture
def processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Process]]:
    """Every process the code under test starts; anything left is killed at teardown."""
    with spawned_processes(monkeypatch) as recorded:
        yield recorded
