"""Shared test helpers: an observed branch and branch/turn invariants.

``Recorder`` and ``assert_one_terminal_per_start`` come from :mod:`lionagi.testing`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from anyio.lowlevel import checkpoint

from lionagi.operations.turn import _active_turn_var
from lionagi.session.branch import Branch
from lionagi.session.session import Session
from lionagi.session.signal import Signal
from lionagi.testing import FunctionModel, Recorder, assert_one_terminal_per_start

__all__ = [
    "Recorder",
    "assert_idle",
    "assert_one_terminal_per_start",
    "closing",
    "echo_model",
    "observed_branch",
]


def echo_model() -> FunctionModel:
    return FunctionModel(lambda messages, **options: "ok")


def observed_branch(**kwargs: Any) -> tuple[Branch, Recorder, Session]:
    """A Branch in a Session whose every signal is recorded."""
    session = Session()
    recorder = Recorder()
    session.observe(Signal, recorder)
    kwargs.setdefault("chat_model", echo_model())
    branch = session.new_branch(**kwargs)
    return branch, recorder, session


def assert_idle(branch: Branch) -> None:
    """No turn is active, the lock is free and this task has no binding."""
    assert branch._active_turn_context is None
    assert not branch._turn_lock.locked()
    assert branch._turn_lock.tasks_waiting == 0
    assert _active_turn_var.get() is None


T = TypeVar("T")


@contextlib.asynccontextmanager
async def closing(stream: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """``contextlib.aclosing`` for any async iterator a stream operation returns: its
    ``aclose()`` is awaited on exit, however the block ends."""
    try:
        yield stream
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


class SerialBodies:
    """Turn bodies that record the order they ran in and fail if two of them ever overlap."""

    def __init__(self) -> None:
        self.order: list[int] = []
        self._active = 0

    def body(self, i: int) -> Callable[[Any], Awaitable[None]]:
        """The ``i``-th body: appends ``i`` to :attr:`order` with a checkpoint inside."""

        async def run(scope: Any) -> None:
            self._active += 1
            assert self._active == 1, "two turn bodies ran at once"
            self.order.append(i)
            await checkpoint()
            self._active -= 1

        return run
