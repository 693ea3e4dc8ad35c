"""Recording the subprocesses a test starts, so it can prove they are gone; the fake CLI model."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process

from lionagi.service.imodel import iModel

FAKE = Path(__file__).parent / "service" / "fake_claude.py"
"""A stand-in for the ``claude`` CLI; ``FAKE_CLAUDE_MODE`` chooses how it behaves."""


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


def fake_model(
    mode: str, tmp_path: Path, *, model: str = "sonnet", timeout: float | None = 60, **kw: Any
) -> iModel:
    """A ``claude_code`` model running :data:`FAKE` in ``mode``; pids go to ``tmp_path/pids``."""
    env = {"FAKE_CLAUDE_MODE": mode, "FAKE_CLAUDE_PID_FILE": str(tmp_path / "pids")}
    env.update(kw.pop("env", {}))
    return iModel(
        "claude_code",
        model,
        executable=[sys.executable, str(FAKE)],
        env=env,
        timeout=timeout,
        **kw,
    )


def pids(tmp_path: Path) -> list[int]:
    """The pids the fake CLI recorded (one per run)."""
    return [int(p) for p in (tmp_path / "pids").read_text().split()]


def assert_gone(pid: int) -> None:
    """No process has this pid any more."""
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def assert_reaped(process: Process) -> None:
    """The process exited and was waited for."""
    assert process.returncode is not None
    assert_gone(process.pid)
