"""Event-loop-bound primitives that follow an object across event loops and backends.

anyio's synchronisation primitives bind to the event loop that first uses them. A Branch or a
model may be used in successive loops (``anyio.run`` twice, or asyncio then trio), so each
primitive is created lazily and replaced when the current loop differs — only while idle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from lionagi._compat import current_loop

__all__ = ["LoopBound"]

T = TypeVar("T")


class LoopBound(Generic[T]):
    """Holds one primitive per event loop, made by ``factory`` on first use in that loop.

    ``idle(primitive)`` says whether the primitive may be dropped: a busy primitive used from a
    new loop is a programming error (the same object shared by two live loops) and raises.
    """

    __slots__ = ("_factory", "_idle", "_loop", "_value")

    def __init__(self, factory: Callable[[], T], idle: Callable[[T], bool]) -> None:
        self._factory = factory
        self._idle = idle
        self._value: T | None = None
        self._loop: object = None

    def get(self) -> T:
        """The primitive for the running event loop (must be called from async code)."""
        loop = current_loop()
        value = self._value
        if value is not None and loop is self._loop:
            return value
        if value is not None and not self._idle(value):
            raise RuntimeError(
                "this object is in use by another event loop; an object holding a lock or "
                "limiter can move between event loops only while it is idle"
            )
        value = self._factory()
        self._value = value
        self._loop = loop
        return value

    @property
    def current(self) -> T | None:
        """The primitive made last, if any (for inspection; may belong to an older loop)."""
        return self._value
