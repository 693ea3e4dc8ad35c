"""Trio-native tests: run by pytest-trio (MockClock, Sequencer, wait_all_tasks_blocked)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from tests.fixtures import processes, server

__all__ = ["processes", "server"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here not in item.path.parents:
            continue
        function = getattr(item, "function", None)
        if function is not None and inspect.iscoroutinefunction(function):
            item.add_marker(pytest.mark.trio)
