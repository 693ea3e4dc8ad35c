"""A clock for tests: time moves only when something sleeps, and sleeping takes no real time.

Pass it as ``iModel(clock=VirtualClock())`` to watch retry backoff and rate-limit waits on
either backend without waiting for them. ``sleeps`` records every wait asked for.
"""

from __future__ import annotations

from anyio.lowlevel import checkpoint

__all__ = ["VirtualClock"]


class VirtualClock:
    """Virtual seconds starting at ``start``. ``sleep(s)`` moves the time to at least the
    sleeper's wake-up time (``now`` when it started sleeping, plus ``s``) and yields once;
    time never goes back, so concurrent sleepers see a consistent, monotonic clock.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Record ``seconds``, advance the clock, and checkpoint (a cancellation is raised)."""
        wake = self._now + max(seconds, 0.0)
        self.sleeps.append(seconds)
        await checkpoint()
        self._now = max(self._now, wake)

    def advance(self, seconds: float) -> None:
        """Move the time forward by ``seconds`` without sleeping."""
        self._now += max(seconds, 0.0)

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now:g})"
