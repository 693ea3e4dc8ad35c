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
  (:func:`checkpoint_if_cancelled`), and the same question asked without a coroutine
  (:func:`cancel_called`): every turn takes its Branch's lock after asking it;
- a timeout whose timer keeps none of the caller's context variables alive
  (:func:`timeout_scope`): asyncio's timer handle holds the context it was scheduled from;
  on trio the timeout is trio's own scope, at the native price (one per model call).
"""

from __future__ import annotations

import contextvars
import functools
import logging
import math
import sys
import weakref
from collections.abc import Awaitable, Callable
from types import FunctionType, ModuleType, TracebackType
from typing import Any, Protocol, Self

from anyio import (
    CancelScope,
    NoEventLoopError,
    TaskInfo,
    current_effective_deadline,
    get_cancelled_exc_class,
    get_running_tasks,
    move_on_after,
)
from anyio.abc import AsyncBackend
from anyio.lowlevel import checkpoint_if_cancelled as _anyio_checkpoint_if_cancelled
from anyio.lowlevel import current_token

__all__ = [
    "CancelHandle",
    "cancel_called",
    "checkpoint_if_cancelled",
    "current_loop",
    "current_task",
    "loop_and_task_lookup",
    "new_cancel_scope",
    "running",
    "spawn_detached",
    "spawn_threadsafe",
    "task_info",
    "timeout_scope",
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


# asyncio's current task of a loop (``asyncio.current_task(loop)``), set at first use
_task_of: Callable[[Any], object] | None = None


def _asyncio_task_of(asyncio: Any) -> Callable[[Any], object]:
    """``asyncio.current_task`` at the price of the lookup it makes: on Python 3.11 it is a
    Python function that returns ``_current_tasks.get(loop)``, a frame per call (a stream turn
    asks at every item), so the dict's own ``get`` is used; elsewhere the function itself."""
    global _task_of
    current = asyncio.current_task
    tasks = getattr(asyncio.tasks, "_current_tasks", None)
    if isinstance(current, FunctionType) and isinstance(tasks, dict):
        _task_of = tasks.get
    else:  # pragma: no cover - depends on the Python version
        _task_of = current
    return _task_of


def current_task() -> object:
    """The running task's native object: the same object for the whole life of the task, never
    shared by two live tasks, and weakly referenceable. ``id(current_task())`` is the task's
    anyio ``TaskInfo.id``. Must be called from a task of an asyncio or trio event loop."""
    asyncio = sys.modules.get("asyncio")  # one lookup less than _running_asyncio_loop: a
    loop = None if asyncio is None else asyncio._get_running_loop()  # stream asks every item
    if loop is not None:
        return (_task_of or _asyncio_task_of(asyncio))(loop)
    return _trio().lowlevel.current_task()


def loop_and_task_lookup() -> tuple[object, Callable[[], object]]:
    """The running event loop's native identity (what :func:`current_loop` gives) and a
    function that gives what :func:`current_task` gives, for this loop, at the backend's own
    price (no lookup of the backend per call): for a caller that asks many times on one loop,
    such as a stream turn at every item. One look at the backend for both. Call it from async
    code; the function it returns only from tasks of this loop."""
    loop = _running_asyncio_loop()
    if loop is not None:
        task_of = _task_of or _asyncio_task_of(sys.modules["asyncio"])
        current: Callable[[], object] = functools.partial(task_of, loop)
        return loop, current
    lowlevel = _trio().lowlevel
    return lowlevel.current_trio_token(), lowlevel.current_task


def running() -> tuple[object, object, bool]:
    """What a turn asks before it takes its Branch's lock, in one look at the backend: the
    running event loop's native identity (:func:`current_loop`'s), the running task
    (:func:`current_task`'s) and whether that task is cancelled now (:func:`cancel_called`'s).
    Must be called from a task of an asyncio or trio loop."""
    asyncio = sys.modules.get("asyncio")
    loop = None if asyncio is None else asyncio._get_running_loop()
    if loop is not None:
        task = (_task_of or _asyncio_task_of(asyncio))(loop)
        return loop, task, _asyncio_cancelled(task)
    lowlevel = _trio().lowlevel
    task = lowlevel.current_task()
    try:  # the run token the task's runner keeps: one look at trio's run context, not two
        token = task._runner.trio_token
        cancelled = task._cancel_status.effectively_cancelled is True  # _trio_cancelled's read
    except AttributeError:  # pragma: no cover - depends on the installed trio
        token = None
    if token is None:  # made at the first current_trio_token() of the run
        return lowlevel.current_trio_token(), task, _trio_cancelled(task)
    return token, task, cancelled


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


def cancel_called() -> bool:
    """Whether the calling task is cancelled now: a checkpoint would raise its cancellation
    (the test ``checkpoint_if_cancelled()`` makes, asked without a coroutine). Must be called
    from a task of an asyncio or trio loop.

    Asked of the backend's own records: anyio's task state and cancel scopes on asyncio (its
    cancel scopes up to the nearest shield, as anyio asks), trio's cancel status on trio. The
    public way (the effective deadline is minus infinity) costs more than the checkpoint
    itself, so it is only the fallback for a version whose records look different."""
    asyncio = sys.modules.get("asyncio")
    loop = None if asyncio is None else asyncio._get_running_loop()
    if loop is not None:
        return _asyncio_cancelled((_task_of or _asyncio_task_of(asyncio))(loop))
    return _trio_cancelled(_trio().lowlevel.current_task())


def _asyncio_cancelled(task: object) -> bool:
    """:func:`cancel_called` for ``task``, the running asyncio task."""
    states = _anyio_task_states()
    if states is None:
        return _effective_deadline() == -math.inf
    state = None if task is None else states.get(weakref.ref(task))
    scope = None if state is None else state.cancel_scope
    while scope is not None:
        if scope._cancel_called:
            return True
        if scope._shield:
            return False
        scope = scope._parent_scope
    return False


def _trio_cancelled(task: object) -> bool:
    """:func:`cancel_called` for ``task``, the running trio task."""
    status = getattr(task, "_cancel_status", None)
    if status is None:  # pragma: no cover - depends on the installed trio
        return _trio().current_effective_deadline() == -math.inf  # type: ignore[no-any-return]
    return status.effectively_cancelled is True


def _effective_deadline() -> float:
    backend = _asyncio_backend()
    return current_effective_deadline() if backend is None else backend.current_effective_deadline()


@functools.cache
def _anyio_task_states() -> Any:
    """anyio's asyncio task states (the mapping behind its ``WeakKeyDictionary``, keyed by a
    weak reference to the task), or None when this anyio keeps them differently."""
    try:
        from anyio._backends._asyncio import CancelScope as AsyncioScope
        from anyio._backends._asyncio import _task_states
    except ImportError:  # pragma: no cover - depends on the installed anyio
        return None
    probe = AsyncioScope()
    if not all(hasattr(probe, name) for name in ("_cancel_called", "_shield", "_parent_scope")):
        return None  # pragma: no cover - depends on the installed anyio
    return getattr(_task_states, "data", None)


@functools.cache
def _asyncio_backend() -> type[AsyncBackend] | None:
    # anyio's backend registry is private: without it, fall back to the public dispatch
    try:
        from anyio._core._eventloop import get_async_backend
    except ImportError:  # pragma: no cover - depends on the installed anyio
        return None
    return get_async_backend("asyncio")


class CancelHandle(Protocol):
    """What :func:`new_cancel_scope` and :func:`timeout_scope` return: a cancel scope to enter
    once and to cancel, anyio's or the backend's own."""

    def cancel(self) -> None: ...

    @property
    def cancel_called(self) -> bool: ...

    @property
    def cancelled_caught(self) -> bool: ...

    @property
    def deadline(self) -> float: ...

    def __enter__(self) -> Any: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...


def new_cancel_scope() -> CancelHandle:
    """A new cancel scope (no deadline, not shielded) of the running backend: anyio's on
    asyncio, trio's own on trio (anyio's trio scope wraps one; the two nest freely)."""
    if _running_asyncio_loop() is not None:
        return CancelScope()
    scope: CancelHandle = _trio().CancelScope()
    return scope


@functools.cache
def _uncaptured_scope() -> type[CancelScope] | None:
    """anyio's asyncio cancel scope, entered from an empty context (see :func:`timeout_scope`);
    None when this anyio keeps its asyncio scope elsewhere."""
    try:
        from anyio._backends._asyncio import CancelScope as AsyncioScope
    except ImportError:  # pragma: no cover - depends on the installed anyio
        return None

    class UncapturedScope(AsyncioScope):
        __slots__ = ()

        def __enter__(self) -> Self:
            return contextvars.Context().run(super().__enter__)

    return UncapturedScope


def timeout_scope(delay: float) -> CancelHandle:
    """``anyio.move_on_after(delay)``, whose timer keeps none of the caller's context variables.

    asyncio (and uvloop) schedule a deadline with a timer handle that holds a copy of the
    context it was scheduled from; when the scope exits early the handle is only cancelled,
    and it stays in the loop's timer queue, context and all, until the loop next cleans that
    queue (a loop that never waits on I/O, as with an offline model: never). Inside a turn
    that context holds the turn's binding, so every turn stayed reachable, with what it
    references, long after it ended. On asyncio the scope is therefore entered from an empty
    context (its deadline callback needs none). trio keeps deadlines without contexts, and
    there the scope is trio's own (anyio's wraps one and costs about 1.3x it).
    Call from async code; ``with timeout_scope(d) as scope`` gives the scope itself.
    """
    loop = _running_asyncio_loop()
    if loop is None:
        trio = _trio()
        scope: CancelHandle = trio.CancelScope(deadline=trio.current_time() + delay)
        return scope
    uncaptured = _uncaptured_scope()
    if uncaptured is None:  # pragma: no cover - depends on the installed anyio
        return move_on_after(delay)
    return uncaptured(deadline=loop.time() + delay)


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
