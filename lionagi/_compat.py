"""The one place that knows which event loop is running.

anyio covers everything lionagi needs except two things, which need the native API of the
backend:

- starting a task from synchronous code with no task group at hand (an out-of-turn message
  signal, or finalizing a stream turn whose stream object was dropped). Failures of such tasks
  are logged, never raised into the loop: on trio a system task that raises would end the run;
- telling which task and which event loop are running, cheaply: the turn driver asks at every
  item of a stream turn and at every turn, and ``anyio.get_current_task()`` and
  ``anyio.lowlevel.current_token()`` build an object each time, a few times the cost of the
  native lookup (:func:`current_task`, :func:`current_loop`);
- a cancel scope at the native price (:func:`new_cancel_scope`): each item of a stream turn
  opens one, and on trio anyio's scope is a wrapper around trio's own that costs about 1.4x it;
- anyio's ``checkpoint_if_cancelled`` without its per-call lookup of the running backend
  (:func:`checkpoint_if_cancelled`): every turn takes its Branch's lock through one.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Awaitable, Callable
from types import ModuleType, TracebackType
from typing import Any, Protocol

from anyio import (
    CancelScope,
    NoEventLoopError,
    TaskInfo,
    get_cancelled_exc_class,
    get_running_tasks,
)
from anyio.abc import AsyncBackend
from anyio.lowlevel import checkpoint_if_cancelled as _anyio_checkpoint_if_cancelled
from anyio.lowlevel import current_token

__all__ = [
    "CancelHandle",
    "checkpoint_if_cancelled",
    "current_loop",
    "current_task",
    "new_cancel_scope",
    "spawn_detached",
    "spawn_threadsafe",
    "task_info",
    "task_lookup",
]

logger = logging.getLogger("lionagi")

# asyncio keeps only weak references to tasks; hold them until they finish.
_asyncio_tasks: set[Any] = set()


async def _guarded(fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
    try:
        await fn(*args)
    except get_cancelled_exc_class():
        raise
    except Exception:
        logger.exception("detached task %r failed", getattr(fn, "__name__", fn))


def _running_asyncio_loop() -> Any:
    """The asyncio loop running in this thread, or None (under trio, or with no loop)."""
    asyncio = sys.modules.get("asyncio")  # imported by any running asyncio loop
    return None if asyncio is None else asyncio._get_running_loop()


def current_task() -> object:
    """The running task's native object: the same object for the whole life of the task, never
    shared by two live tasks, and weakly referenceable. ``id(current_task())`` is the task's
    anyio ``TaskInfo.id``. Must be called from a task of an asyncio or trio event loop."""
    asyncio = sys.modules.get("asyncio")  # one lookup less than _running_asyncio_loop: a
    loop = None if asyncio is None else asyncio._get_running_loop()  # stream asks every item
    if loop is not None:
        return asyncio.current_task(loop)  # type: ignore[union-attr]  # loop: asyncio is set
    return _trio().lowlevel.current_task()


def task_lookup() -> Callable[[], object]:
    """A function that gives what :func:`current_task` gives, for the event loop running now,
    at the backend's own price (no lookup of the backend per call): for a caller that asks
    many times on one loop, such as a stream turn at every item. Call it from async code; the
    function it returns only from tasks of this loop."""
    loop = _running_asyncio_loop()
    if loop is not None:
        current: Callable[[], object] = functools.partial(sys.modules["asyncio"].current_task, loop)
        return current
    return _trio().lowlevel.current_task  # type: ignore[no-any-return]


def task_info(task: object) -> TaskInfo:
    """anyio's :class:`~anyio.TaskInfo` of a native task (what :func:`current_task` returned):
    the one anyio itself gives while the task runs, else one with the task's id and name."""
    try:
        running = get_running_tasks()
    except NoEventLoopError:
        running = []
    for info in running:
        if info.id == id(task):
            return info
    native: Any = task
    if hasattr(native, "get_name"):  # an asyncio task
        return TaskInfo(id(native), None, native.get_name(), native.get_coro())
    return TaskInfo(id(native), None, native.name, native.coro)


def current_loop() -> object:
    """The running event loop's native identity: the asyncio loop, or trio's run token (what
    ``anyio.lowlevel.current_token().native_token`` is). Must be called from async code."""
    loop = _running_asyncio_loop()
    if loop is not None:
        return loop
    return _trio().lowlevel.current_trio_token()


def checkpoint_if_cancelled() -> Awaitable[None]:
    """What ``anyio.lowlevel.checkpoint_if_cancelled()`` awaits: a checkpoint only if the
    calling task is cancelled (then the cancellation is raised), else nothing happens. Returns
    the running backend's own awaitable: on trio, trio's; on asyncio, anyio's asyncio backend's
    (the cancel scopes are anyio's there), with no lookup of the backend per call."""
    if _running_asyncio_loop() is not None:
        backend = _asyncio_backend()
        if backend is None:
            return _anyio_checkpoint_if_cancelled()
        return backend.checkpoint_if_cancelled()
    return _trio().lowlevel.checkpoint_if_cancelled()  # type: ignore[no-any-return]


@functools.cache
def _asyncio_backend() -> type[AsyncBackend] | None:
    # anyio's backend registry is private: without it, fall back to the public dispatch
    try:
        from anyio._core._eventloop import get_async_backend
    except ImportError:  # pragma: no cover - depends on the installed anyio
        return None
    return get_async_backend("asyncio")


class CancelHandle(Protocol):
    """What :func:`new_cancel_scope` returns: a cancel scope to enter once and to cancel."""

    def cancel(self) -> None: ...

    @property
    def cancelled_caught(self) -> bool: ...

    def __enter__(self) -> Any: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None: ...


def new_cancel_scope() -> CancelHandle:
    """A new cancel scope (no deadline, not shielded) of the running backend: anyio's on
    asyncio, trio's own on trio (anyio's trio scope wraps one; the two nest freely)."""
    if _running_asyncio_loop() is not None:
        return CancelScope()
    scope: CancelHandle = _trio().CancelScope()
    return scope


@functools.cache
def _trio() -> ModuleType:
    """The ``trio`` module, imported once: the calls above run per turn or per stream item, and
    an import statement costs each of them about 1k instructions even when trio is loaded."""
    import trio

    return trio


def spawn_detached(fn: Callable[..., Awaitable[Any]], *args: Any) -> bool:
    """Run ``fn(*args)`` as a best-effort background task of the running loop.

    Returns False (and runs nothing) when no event loop is running in this thread.
    """
    try:
        native = current_token().native_token
    except NoEventLoopError:
        return False
    import asyncio

    if isinstance(native, asyncio.AbstractEventLoop):
        _start_asyncio_task(native, fn, args)
        return True
    _start_trio_system_task(fn, args)
    return True


def spawn_threadsafe(loop: object, fn: Callable[..., Awaitable[Any]], *args: Any) -> bool:
    """Schedule ``fn(*args)`` as a best-effort background task of ``loop`` (what
    :func:`current_loop` returned).

    Safe from any thread and from a finalizer (``__del__``): it only queues a callback with the
    loop's own thread-safe scheduling. Returns False when that loop has already ended.
    """
    import asyncio

    native: Any = loop
    try:
        if isinstance(native, asyncio.AbstractEventLoop):
            if native.is_closed():
                return False
            native.call_soon_threadsafe(_start_asyncio_task, native, fn, args)
        else:
            native.run_sync_soon(_start_trio_system_task, fn, args)
    except RuntimeError:  # asyncio: the loop is closed; trio: RunFinishedError
        return False
    return True


def _start_asyncio_task(
    loop: Any, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]
) -> None:
    task = loop.create_task(_guarded(fn, args))
    _asyncio_tasks.add(task)
    task.add_done_callback(_asyncio_tasks.discard)


def _start_trio_system_task(fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
    _trio().lowlevel.spawn_system_task(_guarded, fn, args, name=getattr(fn, "__name__", None))
