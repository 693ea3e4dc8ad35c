"""A FIFO binary lock that holds no event-loop primitive while nobody waits for it.

Most objects that need mutual exclusion (a Branch's turns) are taken by one caller at a time:
the lock is free or held, and nobody waits. Such a lock needs one slot, not a semaphore with
its waiter queue per object. :class:`LazyFifoLock` takes the uncontended lock without creating
anything, makes an ``anyio.Semaphore`` (value 0: the holder has it) as the waiting room when a
second caller arrives, hands the lock over to the first waiter on release, and drops the
semaphore when the last holder releases with nobody waiting. Because it holds nothing
loop-bound while idle, the object moves between event loops and backends freely.

It may be released by a task other than the one that acquired it (a stream turn closed from
elsewhere), as a binary semaphore may.
"""

from __future__ import annotations

import anyio

from lionagi._compat import cancel_called, checkpoint_if_cancelled, current_loop

__all__ = ["LazyFifoLock"]


class LazyFifoLock:
    """A FIFO binary lock: ``await acquire()`` / ``release()``, or ``async with``.

    ``acquire`` is a checkpoint only when it has to wait or the caller is cancelled; cancelled
    while waiting it acquires nothing, and the lock goes to the next waiter. Waiters are served
    in arrival order. Using one held lock from two event loops at once is a programming error
    and raises ``RuntimeError``.
    """

    __slots__ = ("_holder_loop", "_queue")

    def __init__(self) -> None:
        # The event loop the lock is held in (None: free). While a waiting room exists, the
        # semaphore's value says whether the lock is held (0) and this only names the loop.
        self._holder_loop: object = None
        self._queue: anyio.Semaphore | None = None

    async def acquire(self) -> None:
        await checkpoint_if_cancelled()
        loop = current_loop()
        queue = self._queue
        if queue is not None and queue.value:  # free: every waiter gave up while it was held
            queue = self._queue = None
            self._holder_loop = None
        holder = self._holder_loop
        if holder is None:
            self._holder_loop = loop
            return
        if holder is not loop:
            raise RuntimeError(
                "this object is in use by another event loop; an object holding a lock "
                "can move between event loops only while it is idle"
            )
        if queue is None:
            queue = self._queue = anyio.Semaphore(0, max_value=1, fast_acquire=True)
        await queue.acquire()

    def take(self) -> bool:
        """Take the lock at once when :meth:`acquire` would take it without waiting: it is
        free, nobody waits and the caller is not cancelled. False otherwise, and nothing
        changed: then ``await acquire()``. Not a checkpoint (no coroutine)."""
        if self._holder_loop is not None or self._queue is not None or cancel_called():
            return False
        self._holder_loop = current_loop()
        return True

    def take_in(self, loop: object) -> bool:
        """:meth:`take` for a caller that knows the running event loop (``loop``:
        :func:`~lionagi._compat.current_loop`'s) and has checked it is not cancelled (see
        :func:`~lionagi._compat.running`). False when the lock is held or waited for."""
        if self._holder_loop is not None or self._queue is not None:
            return False
        self._holder_loop = loop
        return True

    def release(self) -> None:
        queue = self._queue
        if queue is None:
            if self._holder_loop is None:
                raise RuntimeError("release of a lock that is not held")
            self._holder_loop = None
        elif queue.statistics().tasks_waiting:
            queue.release()  # handed to the first waiter still waiting
            if queue.value:  # every waiter had given up: free, and no waiting room
                self._queue = None
                self._holder_loop = None
        else:
            if queue.value:
                raise RuntimeError("release of a lock that is not held")
            self._queue = None
            self._holder_loop = None

    def locked(self) -> bool:
        queue = self._queue
        return self._holder_loop is not None if queue is None else queue.value == 0

    @property
    def tasks_waiting(self) -> int:
        """How many callers wait in :meth:`acquire`."""
        queue = self._queue
        return 0 if queue is None else queue.statistics().tasks_waiting

    @property
    def contended(self) -> bool:
        """Whether the waiting room (a semaphore of the running event loop) exists: only from
        the moment a second caller arrives until a release finds nobody waiting."""
        return self._queue is not None

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()
