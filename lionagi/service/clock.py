"""The clock that retries and rate limits read and sleep on.

Both read anyio's time by default, so trio's ``MockClock`` (and any clock an event loop uses)
drives them. A :class:`Clock` can be passed to :class:`~lionagi.service.imodel.iModel` to make
waits controllable on any backend; :class:`lionagi.testing.VirtualClock` is one that jumps
instead of sleeping.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import anyio

__all__ = ["AnyioClock", "Clock"]


@runtime_checkable
class Clock(Protocol):
    """Time in seconds (any origin, never going back) and a way to wait for some of it."""

    def now(self) -> float:
        """The current time in seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; a cancellation point that raises the cancellation at once."""
        ...


class AnyioClock:
    """The event loop's own clock: ``anyio.current_time()`` and ``anyio.sleep()``."""

    __slots__ = ()

    def now(self) -> float:
        return anyio.current_time()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)

    def __repr__(self) -> str:
        return "AnyioClock()"


#: the clock used when none is given
ANYIO_CLOCK = AnyioClock()
