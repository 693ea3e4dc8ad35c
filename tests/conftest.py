"""Every async test in tests/ runs once on asyncio and once on trio (anyio's pytest plugin).

The shared fixtures of tests/fixtures.py (``server``, ``processes``) are available to every test.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from tests.backends import BACKENDS
from tests.fixtures import processes, server

_HERE = Path(__file__).parent

__all__ = ["BACKENDS", "anyio_backend", "processes", "server"]


@pytest.fixture(params=[pytest.param((name, {}), id=name) for name in BACKENDS])
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    backend: tuple[str, dict[str, object]] = request.param
    return backend


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
