"""The backend glue in lionagi._compat works on each backend."""

from __future__ import annotations

import anyio
import pytest
from anyio.lowlevel import checkpoint_if_cancelled

from lionagi._compat import cancel_called, spawn_detached


async def test_spawn_detached_runs_the_function_on_this_backend() -> None:
    done = anyio.Event()
    got: list[int] = []

    async def work(value: int) -> None:
        got.append(value)
        done.set()

    assert spawn_detached(work, 7) is True
    await done.wait()
    assert got == [7]


async def test_a_failing_detached_task_is_logged_not_raised(caplog: object) -> None:
    done = anyio.Event()

    async def broken() -> None:
        done.set()
        raise RuntimeError("detached failure")

    assert spawn_detached(broken)
    await done.wait()
    for _ in range(3):
        await anyio.lowlevel.checkpoint()
    assert "detached failure" in caplog.text  # type: ignore[attr-defined]


def test_spawn_detached_without_an_event_loop_does_nothing() -> None:
    async def never() -> None:  # pragma: no cover
        raise AssertionError

    assert spawn_detached(never) is False


async def test_spawn_threadsafe_runs_the_function_from_another_thread() -> None:
    from lionagi._compat import current_loop, spawn_threadsafe

    done = anyio.Event()
    got: list[str] = []

    async def work(value: str) -> None:
        got.append(value)
        done.set()

    loop = current_loop()
    assert await anyio.to_thread.run_sync(lambda: spawn_threadsafe(loop, work, "x")) is True
    await done.wait()
    assert got == ["x"]


def test_spawn_threadsafe_after_the_loop_ended_reports_false() -> None:
    from lionagi._compat import current_loop, spawn_threadsafe

    async def never() -> None:  # pragma: no cover
        raise AssertionError

    for backend in ("asyncio", "trio"):

        async def grab() -> object:
            return current_loop()

        loop = anyio.run(grab, backend=backend)
        assert spawn_threadsafe(loop, never) is False


async def test_current_task_is_the_running_task_by_anyio_id() -> None:
    from lionagi._compat import current_loop, current_task, loop_and_task_lookup

    seen: dict[str, tuple[object, int]] = {}
    loop, lookup = loop_and_task_lookup()
    assert loop is current_loop()

    async def child(name: str) -> None:
        assert lookup() is current_task()
        seen[name] = (current_task(), anyio.get_current_task().id)

    mine = current_task()
    assert id(mine) == anyio.get_current_task().id
    assert current_task() is mine  # the same object for the whole life of the task
    assert lookup() is mine
    async with anyio.create_task_group() as group:
        group.start_soon(child, "a")
        group.start_soon(child, "b")
    for task, task_id in seen.values():
        assert id(task) == task_id
    assert len({id(task) for task, _ in seen.values()} | {id(mine)}) == 3


async def test_running_tells_the_loop_the_task_and_its_cancellation_at_once() -> None:
    from lionagi._compat import current_loop, current_task, running

    loop, task, cancelled = running()
    assert loop is current_loop()
    assert task is current_task()
    assert id(task) == anyio.get_current_task().id
    assert cancelled is False
    with anyio.CancelScope() as scope:
        scope.cancel()
        assert running()[2] is True  # what cancel_called() says
        with anyio.CancelScope(shield=True):
            assert running()[2] is False
        await checkpoint_if_cancelled()
    assert scope.cancelled_caught

    async def child(found: list[object]) -> None:
        found.append(running()[1])

    found: list[object] = []
    async with anyio.create_task_group() as group:
        group.start_soon(child, found)
    assert len(found) == 1
    assert found[0] is not task


async def test_a_new_cancel_scope_cancels_what_runs_in_it_and_nests_with_anyio_scopes() -> None:
    from lionagi._compat import new_cancel_scope

    reached: list[str] = []
    scope = new_cancel_scope()
    with anyio.CancelScope() as outer:
        with scope:
            with anyio.CancelScope():
                scope.cancel()
                await anyio.sleep_forever()
            reached.append("not here")  # pragma: no cover
        reached.append("after")
    assert reached == ["after"]
    assert not outer.cancel_called
    assert scope.cancel_called


async def test_current_loop_is_the_native_token_of_the_running_loop() -> None:
    from anyio.lowlevel import current_token

    from lionagi._compat import current_loop

    assert current_loop() is current_token().native_token
    assert current_loop() is current_loop()


async def test_cancel_called_says_whether_a_checkpoint_would_raise_the_cancellation() -> None:
    assert not cancel_called()
    with anyio.CancelScope() as outer:
        assert not cancel_called()
        with anyio.CancelScope(deadline=anyio.current_time() + 3600):
            assert not cancel_called()  # a deadline in the future is no cancellation
        outer.cancel()
        with anyio.CancelScope():
            assert cancel_called()  # inherited from the cancelled scope around it
            with anyio.CancelScope(shield=True):
                assert not cancel_called()
                with anyio.CancelScope() as inner:
                    inner.cancel()
                    assert cancel_called()
                    with pytest.raises(anyio.get_cancelled_exc_class()):
                        await checkpoint_if_cancelled()
        assert cancel_called()
        await checkpoint_if_cancelled()
        raise AssertionError("not reached: the checkpoint raises the cancellation")
    assert outer.cancelled_caught
    assert not cancel_called()


class _Probe:
    """A value to hold in a context variable and watch for being freed."""


async def test_a_timeout_scopes_timer_keeps_none_of_the_callers_context_variables() -> None:
    # asyncio's timer handle keeps the context it was scheduled from until the loop cleans its
    # timer queue, long after the scope exited: with anyio.move_on_after this fails on asyncio
    import contextvars
    import gc
    import weakref

    from lionagi._compat import timeout_scope

    var: contextvars.ContextVar[_Probe | None] = contextvars.ContextVar("probe", default=None)
    probe = _Probe()
    freed = weakref.ref(probe)
    token = var.set(probe)
    with timeout_scope(300) as scope:
        assert var.get() is probe  # the body runs in the caller's context
        assert scope.deadline > anyio.current_time()
    var.reset(token)
    del probe
    gc.collect()
    assert freed() is None
    assert not scope.cancelled_caught


async def test_a_timeout_scope_still_times_out() -> None:
    from lionagi._compat import timeout_scope

    with timeout_scope(0.01) as scope:
        await anyio.sleep_forever()
    assert scope.cancelled_caught


async def test_a_timeout_scope_nests_with_anyio_scopes_and_leaves_them_their_cancellation() -> None:
    # on trio the scope is trio's own: an outer anyio cancellation passes through it, uncaught
    from lionagi._compat import timeout_scope

    with anyio.CancelScope() as outer:
        with timeout_scope(300) as scope:
            outer.cancel()
            await anyio.sleep_forever()
    assert outer.cancelled_caught
    assert not scope.cancelled_caught
    with timeout_scope(300) as scope:
        with anyio.move_on_after(0.01) as inner:
            await anyio.sleep_forever()
    assert inner.cancelled_caught
    assert not scope.cancelled_caught
    assert not scope.cancel_called
