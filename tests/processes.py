"""Recording the subprocesses a test starts, so it can prove they are gone."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from anyio.abc import Process


@contextlib.contextmanager
def spawned_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Process]]:
    """Every process started through ``anyio.open_process``, recorded the moment it is
    spawned. On exit, anything still running is killed with its process group (each fake CLI
    leads its own group), so a failing test leaves nothing behind."""
    processes: list[Process] = []
    real = anyio.open_process

    async def spy(*args: Any, **kwargs: Any) -> Process:
        process = await real(*args, **kwargs)
        processes.append(process)
        return process

    monkeypatch.setattr(anyio, "open_process", spy)
    try:
        yield processes
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
