"""The one place that knows which event loop is running.

anyio covers everything lionagi needs except one thing: starting a task from synchronous code
with no task group at hand (an out-of-turn message signal). That needs the native API of the
running backend. Failures of such tasks are logged, never raised into the loop: on trio a
system task that raises would end the whole run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from anyio import NoEventLoopError, get_cancelled_exc_class
from anyio.lowlevel import current_token

__all__ = ["spawn_detached"]

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
        task = native.create_task(_guarded(fn, args))
        _asyncio_tasks.add(task)
        task.add_done_callback(_asyncio_tasks.discard)
        return True
    import trio

    trio.lowlevel.spawn_system_task(_guarded, fn, args, name=getattr(fn, "__name__", None))
    return True
