"""The lazily made FIFO lock: nothing loop-bound while uncontended or idle, FIFO when contended,
cancellation while waiting acquires nothing, and the object follows across event loops."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from anyio.lowlevel import checkpoint

from lionagi._lazylock import LazyFifoLock


async def _until_waiting(lock: LazyFifoLock, count: int) -> None:
    while lock.tasks_waiting < count:
        await checkpoint()


async def test_an_uncontended_lock_makes_no_waiting_room() -> None:
    lock = LazyFifoLock()
    assert not lock.locked()
    for _ in range(3):
        async with lock:
            assert lock.locked()
            assert not lock.contended
            assert lock.tasks_waiting == 0
        assert not lock.locked()
        assert not lock.contended


async def test_waiters_are_served_in_arrival_order_and_the_room_goes_with_the_last() -> None:
    lock = LazyFifoLock()
    order: list[int] = []

    async def waiter(number: int) -> None:
        async with lock:
            order.append(number)
            await checkpoint()  # others may arrive meanwhile; they queue behind

    await lock.acquire()
    async with anyio.create_task_group() as group:
        for number in range(5):
            group.start_soon(waiter, number)
            await _until_waiting(lock, number + 1)
        assert lock.contended
        lock.release()
    assert order == [0, 1, 2, 3, 4]
    assert not lock.locked()
    assert not lock.contended


async def test_a_waiter_cancelled_while_waiting_acquires_nothing() -> None:
    lock = LazyFifoLock()
    order: list[str] = []

    async def waiter(name: str) -> None:
        async with lock:
            order.append(name)

    await lock.acquire()
    async with anyio.create_task_group() as group:
        first = anyio.CancelScope()

        async def first_waiter() -> None:
            with first:
                await waiter("first")

        group.start_soon(first_waiter)
        await _until_waiting(lock, 1)
        group.start_soon(waiter, "second")
        await _until_waiting(lock, 2)
        first.cancel()
        await _until_waiting_less(lock, 2)
        lock.release()
    assert order == ["second"]
    assert not lock.locked()
    assert not lock.contended


async def _until_waiting_less(lock: LazyFifoLock, count: int) -> None:
    while lock.tasks_waiting >= count:
        await checkpoint()


async def test_when_every_waiter_gives_up_the_release_frees_the_lock() -> None:
    lock = LazyFifoLock()
    await lock.acquire()
    async with anyio.create_task_group() as group:
        group.start_soon(lock.acquire)
        group.start_soon(lock.acquire)
        await _until_waiting(lock, 2)
        group.cancel_scope.cancel()
    lock.release()
    assert not lock.locked()
    assert not lock.contended
    async with lock:  # and it is taken again at once
        assert lock.locked()


async def test_a_cancelled_caller_does_not_take_a_free_lock() -> None:
    lock = LazyFifoLock()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await lock.acquire()
    assert scope.cancelled_caught
    assert not lock.locked()


async def _takes_only_a_free_lock(lock: LazyFifoLock, take: Callable[[], bool]) -> None:
    """``take`` takes ``lock`` when it is free, and neither while it is held nor while it is
    handed to a waiter; ``lock`` is free again at the end."""
    assert take()  # free: taken at once
    assert lock.locked()
    assert not take()  # held: nothing changed
    entered = anyio.Event()

    async def waiter() -> None:
        await lock.acquire()
        entered.set()
        lock.release()

    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        await _until_waiting(lock, 1)
        lock.release()  # handed to the waiter
        assert not take()  # held by the waiter, or its waiting room still there
        await entered.wait()
    assert not lock.locked()


async def test_take_takes_only_what_acquire_would_take_without_waiting() -> None:
    lock = LazyFifoLock()
    await _takes_only_a_free_lock(lock, lock.take)
    with anyio.CancelScope() as scope:
        scope.cancel()
        assert not lock.take()  # a cancelled caller takes nothing...
        with anyio.CancelScope(shield=True):
            assert lock.take()  # ...unless shielded from that cancellation
        lock.release()
        await lock.acquire()  # and acquire() raises the cancellation
    assert scope.cancelled_caught
    assert not lock.locked()


async def test_take_in_takes_a_free_lock_for_the_loop_it_is_given() -> None:
    from lionagi._compat import current_loop

    lock = LazyFifoLock()
    loop = current_loop()
    await _takes_only_a_free_lock(lock, lambda: lock.take_in(loop))
    assert lock.take_in(loop)
    lock.release()
    assert not lock.locked()


async def test_another_task_may_release_it() -> None:
    lock = LazyFifoLock()
    await lock.acquire()

    async def release() -> None:
        lock.release()

    async with anyio.create_task_group() as group:
        group.start_soon(release)
    assert not lock.locked()


async def test_releasing_a_free_lock_is_refused() -> None:
    lock = LazyFifoLock()
    with pytest.raises(RuntimeError, match="not held"):
        lock.release()
    await lock.acquire()
    async with anyio.create_task_group() as group:
        group.start_soon(lock.acquire)
        await _until_waiting(lock, 1)
        lock.release()  # to the waiter
    lock.release()
    with pytest.raises(RuntimeError, match="not held"):
        lock.release()


def test_an_idle_lock_follows_across_event_loops_and_backends() -> None:
    lock = LazyFifoLock()
    served: list[int] = []

    async def contend() -> None:
        await lock.acquire()
        async with anyio.create_task_group() as group:
            for number in range(2):

                async def waiter(number: int = number) -> None:
                    async with lock:
                        served.append(number)

                group.start_soon(waiter)
                await _until_waiting(lock, number + 1)
            lock.release()

    for backend in ("asyncio", "trio", "asyncio"):
        anyio.run(contend, backend=backend)
        assert not lock.contended
    assert served == [0, 1] * 3


def test_a_lock_held_in_one_event_loop_is_refused_in_another() -> None:
    lock = LazyFifoLock()
    anyio.run(lock.acquire, backend="asyncio")  # left held by a loop that is gone
    with pytest.raises(RuntimeError, match="another event loop"):
        anyio.run(lock.acquire, backend="trio")
    lock.release()
    anyio.run(lock.acquire, backend="trio")
    assert lock.locked()
