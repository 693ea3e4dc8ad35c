"""Every async test in tests/ runs once on asyncio and once on trio (anyio's pytest plugin).

Shared fixtures: ``server`` (a scripted HTTP server on 127.0.0.1) and ``processes`` (every
subprocess the code under test starts, killed at teardown if still running).
"""

from __future__ import annotations

import inspect
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.abc import Process

from tests.backends import BACKENDS
from tests.processes import spawned_processes
from tests.service.http_server import ScriptedServer

_HERE = Path(__file__).parent


@pytest.fixture(params=[pytest.param((name, {}), id=name) for name in BACKENDS])
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    backend: tuple[str, dict[str, object]] = request.param
    return backend


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


@pytest.hookimpl(hookwrapper=True)
def pytest_pycollect_makeitem(
    collector: pytest.Collector, name: str, obj: object
) -> Generator[None, Any, None]:
    # Runs before anyio's own hook, so the marker is seen when it parametrizes the backend.
    function = getattr(obj, "hypothesis", None)
    inner = function.inner_test if function is not None else obj
    if (
        inspect.iscoroutinefunction(inner)
        and _HERE in collector.path.parents
        and not any(m.name == "anyio" for m in getattr(obj, "pytestmark", ()))
    ):
        pytest.mark.anyio(obj)
    yield
