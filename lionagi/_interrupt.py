"""Waits another task can stop, at the cancel scopes they already have.

A stream turn hands out one item per step, in the consumer's task, and ``aclose()`` from any
other task must stop a consumer that waits inside an item. A cancel scope per step would do it,
but most steps never wait at all, or only at the model's next chunk, which has a timeout scope
of its own. So a step of a library stream body arms an :class:`Interrupt` instead: each wait the
body makes registers the cancel scope it waits in (the model's per-chunk timeout scope, or one
opened for that wait, :meth:`Interrupt.guard`), and :meth:`Interrupt.cancel` from another task
cancels the registered scope, or makes the next registration refuse at once. The stopped wait
raises :class:`_Interrupted`, which the turn driver catches; nothing outside the library sees it.

Only the outermost wait registers: waits inside a registered one (a tool's own model call, the
tasks of a tool batch) are stopped with it, by the scope that holds them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from lionagi._compat import new_cancel_scope

if TYPE_CHECKING:
    from lionagi.service.clock import Clock

A = TypeVar("A")

__all__ = ["GuardedClock", "Interrupt", "guard", "guarded_hook"]


class _Interrupted(BaseException):
    """A registered wait was stopped by :meth:`Interrupt.cancel`. A BaseException, like a
    cancellation, so no ``except Exception`` on the way out takes it for an error of the call."""


class Interrupt:
    """Where the waits of one task's step register, so another task can stop them.

    ``armed`` is True while a step that relies on it runs; ``scope`` is the cancel scope of the
    registered wait in progress (None between waits); ``requested`` says :meth:`cancel` was
    called. Not thread-safe: used from tasks of one event loop.
    """

    __slots__ = ("armed", "requested", "scope")

    def __init__(self) -> None:
        self.armed = False
        self.requested = False
        self.scope: Any = None

    def cancel(self) -> None:
        """Stop the registered wait (from any task of the loop); later registrations refuse."""
        self.requested = True
        scope = self.scope
        if scope is not None:
            scope.cancel()

    def takes(self) -> bool:
        """Whether a wait starting now must register (armed, and no registered wait holds it).
        Raises :class:`_Interrupted` if a stop was asked for."""
        if not self.armed or self.scope is not None:
            return False
        if self.requested:
            raise _Interrupted
        return True

    def guard(self) -> _Guard | _Unguarded:
        """A context manager around one wait: a cancel scope registered for its duration when
        the wait :meth:`takes` one; on the way out a stop raises :class:`_Interrupted`."""
        return _Guard(self) if self.takes() else _UNGUARDED


class _Guard:
    __slots__ = ("interrupt", "scope")

    def __init__(self, interrupt: Interrupt) -> None:
        self.interrupt = interrupt
        self.scope = new_cancel_scope()  # the backend's own: trio's costs less than anyio's

    def __enter__(self) -> None:
        self.scope.__enter__()
        self.interrupt.scope = self.scope

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        interrupt = self.interrupt
        interrupt.scope = None
        swallowed = self.scope.__exit__(exc_type, exc, tb)
        if self.scope.cancelled_caught and interrupt.requested:
            raise _Interrupted
        return bool(swallowed)


class _Unguarded:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        return None


_UNGUARDED = _Unguarded()


def guard(interrupt: Interrupt | None) -> _Guard | _Unguarded:
    """:meth:`Interrupt.guard` for a wait that may run in a stream turn's step (``interrupt``
    is its consumer's) or outside one (None: nothing to register)."""
    return _UNGUARDED if interrupt is None else interrupt.guard()


class GuardedClock:
    """A clock whose every sleep is a guarded wait of ``interrupt`` (a retry's backoff, a rate
    limiter's wait in a stream turn's step)."""

    __slots__ = ("clock", "interrupt")

    def __init__(self, clock: Clock, interrupt: Interrupt) -> None:
        self.clock = clock
        self.interrupt = interrupt

    def now(self) -> float:
        return self.clock.now()

    async def sleep(self, seconds: float) -> None:
        with self.interrupt.guard():
            await self.clock.sleep(seconds)


def guarded_hook(
    hook: Callable[[A], Awaitable[None] | None], interrupt: Interrupt
) -> Callable[[A], Awaitable[None]]:
    """``hook`` (a retry hook: an observer's handlers may wait) run as a guarded wait."""

    async def guarded(value: A) -> None:
        with interrupt.guard():
            result = hook(value)
            if result is not None:
                await result

    return guarded
