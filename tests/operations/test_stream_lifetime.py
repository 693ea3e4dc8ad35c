"""Stream turns no consumer can corrupt: abandoned, closed from elsewhere, re-entered.

Each test runs on asyncio and trio. The invariants checked throughout: one RunStart and one
terminal per turn, never two model calls in flight on one Branch, history in call order, and
every message signal of a turn before its terminal and with its turn id.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from anyio.lowlevel import checkpoint

from lionagi import DriverState, TurnFinalizingError, TurnStream
from lionagi.operations.turn import run_in_turn, stream_in_turn
from lionagi.operations.types import TurnScope
from lionagi.protocols.messages import Instruction, Message
from lionagi.session.branch import Branch
from lionagi.session.session import Session
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, RunStart, Signal
from lionagi.testing import FunctionModel
from tests.helpers import Recorder, assert_idle, assert_one_terminal_per_start, observed_branch

# A deadlock guard, not a timing assertion: these scenarios hung before the stream rework.
HANG = 30


class InFlight:
    """An async model function that answers with the question and records overlap."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self.gate: anyio.Event | None = None
        self.entered = anyio.Event()

    async def __call__(self, messages: list[Message], **options: Any) -> str:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            self.entered.set()
            if self.gate is not None:
                await self.gate.wait()
            for _ in range(3):
                await checkpoint()
            last = messages[-1]
            return f"A:{getattr(last, 'instruction', '?')}"
        finally:
            self.now -= 1


def _branch() -> tuple[Branch, Recorder, InFlight, Session]:
    model = InFlight()
    branch, rec, session = observed_branch(chat_model=FunctionModel(model))
    return branch, rec, model, session


def _history(branch: Branch) -> list[str]:
    out = []
    for message in branch.msgs:
        text = getattr(message, "instruction", None)
        out.append(text if text is not None else str(getattr(message, "content", message)))
    return out


def _assert_turns_clean(rec: Recorder) -> None:
    assert_one_terminal_per_start(rec)
    starts = {s.turn_id for s in rec.starts()}
    for message in rec.messages():
        assert message.turn_id in starts, "a message signal without its turn id"


async def _break_after_first(branch: Branch, instruction: str) -> None:
    async for _ in branch.run(instruction):
        break


# -- break without aclosing, then call -------------------------------------------------------
async def test_break_then_call_from_the_same_task_is_its_own_turn() -> None:
    branch, rec, model, _ = _branch()
    with anyio.fail_after(HANG):
        await _break_after_first(branch, "Q1")
        reply = await branch.communicate("Q2")
    assert reply == "A:Q2"
    lifecycle = rec.lifecycle()
    assert [kind for kind, _ in lifecycle] == ["RunStart", "RunEnd", "RunStart", "RunEnd"]
    first, second = lifecycle[0][1], lifecycle[2][1]
    assert first != second
    q2 = [m for m in rec.messages() if getattr(m.message, "instruction", None) == "Q2"]
    assert [m.turn_id for m in q2] == [second]
    assert _history(branch) == ["Q1", "A:Q1", "Q2", "A:Q2"]  # Q1 committed with its reply
    assert model.most == 1
    _assert_turns_clean(rec)
    assert_idle(branch)


async def test_break_then_call_from_another_task_waits_for_the_abandoned_turn() -> None:
    branch, rec, model, _ = _branch()
    results: list[str] = []

    async def other() -> None:
        results.append(str(await branch.communicate("Q2")))

    with anyio.fail_after(HANG):
        await _break_after_first(branch, "Q1")
        async with anyio.create_task_group() as group:
            group.start_soon(other)
    assert results == ["A:Q2"]
    assert [kind for kind, _ in rec.lifecycle()] == ["RunStart", "RunEnd", "RunStart", "RunEnd"]
    assert _history(branch) == ["Q1", "A:Q1", "Q2", "A:Q2"]  # Q1 committed with its reply
    assert model.most == 1
    _assert_turns_clean(rec)
    assert_idle(branch)


async def test_break_with_a_queued_third_caller_keeps_call_order_and_no_overlap() -> None:
    branch, rec, model, _ = _branch()
    order: list[str] = []

    async def third() -> None:
        order.append(str(await branch.communicate("Q3")))

    with anyio.fail_after(HANG):
        async with anyio.create_task_group() as group:
            stream = branch.run("Q1")
            assert isinstance(await anext(stream), Instruction)  # the turn holds the Branch
            group.start_soon(third)
            while branch._turn_lock.tasks_waiting == 0:
                await checkpoint()
            del stream  # abandoned between items: nothing may join it any more
            order.append(str(await branch.communicate("Q2")))
    assert order == ["A:Q3", "A:Q2"]
    assert _history(branch) == ["Q1", "A:Q1", "Q3", "A:Q3", "Q2", "A:Q2"]
    assert model.most == 1
    assert len(rec.starts()) == 3
    _assert_turns_clean(rec)
    assert_idle(branch)


# -- dropped streams -----------------------------------------------------------------------
@pytest.mark.parametrize("in_a_cycle", [False, True], ids=["refcount", "gc"])
async def test_dropped_stream_is_finalized_before_the_next_call(in_a_cycle: bool) -> None:
    branch, rec, model, _ = _branch()
    holder: list[Any] = [branch.run("Q1")]
    with anyio.fail_after(HANG):
        await anext(holder[0])
        if in_a_cycle:
            holder.append(holder)  # only the cycle collector can free the stream now
        del holder
        if in_a_cycle:
            gc.collect()
        assert await branch.communicate("Q2") == "A:Q2"
    kinds = [kind for kind, _ in rec.lifecycle()]
    assert kinds == ["RunStart", "RunEnd", "RunStart", "RunEnd"]
    assert _history(branch) == ["Q1", "A:Q1", "Q2", "A:Q2"]  # Q1 committed with its reply
    assert model.most == 1
    _assert_turns_clean(rec)
    assert_idle(branch)


async def test_a_stream_started_by_a_task_that_exited_is_joined_by_nobody() -> None:
    branch, rec, _, _ = _branch()
    kept: list[TurnStream[Message]] = []
    entered: list[TurnScope] = []

    async def starter() -> None:
        stream = branch.run("Q1")
        await anext(stream)
        kept.append(stream)

    async def inner(scope: TurnScope) -> bool:
        entered.append(scope)
        return scope.owns_lifecycle

    with anyio.fail_after(HANG):
        async with anyio.create_task_group() as group:
            group.start_soon(starter)
        gc.collect()  # the starter task is gone; its memory may be reused by the next task
        owned: list[bool] = []

        async def newcomer() -> None:
            owned.append(await run_in_turn(branch, model=None, invoke=inner))

        async with anyio.create_task_group() as group:
            group.start_soon(newcomer)
            while branch._turn_lock.tasks_waiting == 0:
                await checkpoint()  # the newcomer queues: it is not the stream's consumer
            assert entered == []
            await kept[0].aclose()
    assert owned == [True]
    assert [kind for kind, _ in rec.lifecycle()] == ["RunStart", "RunEnd", "RunStart", "RunEnd"]
    _assert_turns_clean(rec)
    assert_idle(branch)


# -- joined calls and aclose() from elsewhere -------------------------------------------------
async def test_consumer_call_between_items_is_nested_and_the_next_item_waits() -> None:
    branch, rec, model, _ = _branch()
    seen: list[str] = []
    with anyio.fail_after(HANG):
        async with branch.run("Q1") as stream:
            async for message in stream:
                seen.append(type(message).__name__)
                if isinstance(message, Instruction):
                    assert await branch.communicate("side") == "A:side"
    turn_id = rec.starts()[0].turn_id
    assert len(rec.starts()) == 1
    assert all(m.turn_id == turn_id for m in rec.messages())
    assert model.most == 1
    _assert_turns_clean(rec)
    assert_idle(branch)


async def test_aclose_from_another_task_cancels_and_awaits_the_joined_call() -> None:
    branch, rec, model, _ = _branch()
    stream = branch.run("Q1")
    failures: list[BaseException] = []
    with anyio.fail_after(HANG):
        await anext(stream)
        model.gate = anyio.Event()
        model.entered = anyio.Event()

        async def joined() -> None:
            try:
                await branch.communicate("side")
            except TurnFinalizingError as exc:
                failures.append(exc)

        async def closer() -> None:
            await model.entered.wait()
            await stream.aclose()
            assert stream.state is DriverState.CLOSED

        async with anyio.create_task_group() as group:
            group.start_soon(closer)
            await joined()  # the consumer's own call between items: joins the turn
    assert len(failures) == 1
    assert model.now == 0  # the joined model call was cancelled and awaited
    lifecycle = rec.lifecycle()
    assert [kind for kind, _ in lifecycle] == ["RunStart", "RunEnd"]
    assert all(m.turn_id == lifecycle[0][1] for m in rec.messages())
    _assert_turns_clean(rec)
    assert_idle(branch)


async def test_aclose_from_another_task_while_an_item_is_produced() -> None:
    branch, rec, _ = observed_branch()
    inside = anyio.Event()
    closed: list[str] = []

    async def body(scope: TurnScope) -> AsyncIterator[int]:
        try:
            yield 0
            inside.set()
            await anyio.sleep_forever()
            yield 1  # pragma: no cover
        finally:
            closed.append("closed")

    stream = stream_in_turn(branch, model=None, invoke=body)
    got: list[int] = []
    with anyio.fail_after(HANG):
        async with anyio.create_task_group() as group:

            async def consume() -> None:
                got.extend([item async for item in stream])

            group.start_soon(consume)
            await inside.wait()
            await stream.aclose()
    assert got == [0]
    assert closed == ["closed"]
    assert rec.kinds() == ["RunStart", "RunEnd"]
    assert_idle(branch)


# -- the async with form ---------------------------------------------------------------------
async def test_async_with_ends_the_turn_when_the_block_exits_however_it_exits() -> None:
    branch, rec, _, _ = _branch()
    with anyio.fail_after(HANG):
        async with branch.run("Q1") as stream:
            async for _ in stream:
                break
            assert branch._active_turn_context is not None
        assert_idle(branch)

        async def failing_consumer() -> None:
            async with branch.run("Q2") as stream:
                await anext(stream)
                raise KeyError("consumer failed")

        with pytest.raises(KeyError):
            await failing_consumer()
        assert_idle(branch)
        with anyio.CancelScope() as scope:
            async with branch.run("Q3") as stream:
                await anext(stream)
                scope.cancel()
                await checkpoint()
        assert scope.cancelled_caught
    assert [kind for kind, _ in rec.lifecycle()] == ["RunStart", "RunEnd"] * 3
    _assert_turns_clean(rec)
    assert_idle(branch)


async def test_entering_without_iterating_starts_nothing() -> None:
    branch, rec, _, _ = _branch()
    async with branch.run("Q1") as stream:
        assert stream.state is DriverState.NOT_STARTED
    assert rec.signals == []
    assert len(branch.msgs) == 0
    assert_idle(branch)


# -- observer handlers -----------------------------------------------------------------------
@pytest.mark.parametrize("operation", ["communicate", "run"])
async def test_message_handler_calling_the_branch_runs_nested(operation: str) -> None:
    branch, rec, _, session = _branch()
    replies: list[Any] = []

    async def on_message(signal: MessageAdded, _: Any) -> None:
        # A stream hands its messages to observers between items, while the turn is active:
        # the handler's call joins it. A coroutine operation commits its messages as it ends,
        # so the handler runs while the turn finalizes and its call is refused. Never a hang.
        if getattr(signal.message, "instruction", None) == "Q1":
            try:
                replies.append(await branch.chat("side"))
            except TurnFinalizingError as exc:
                replies.append(type(exc))

    session.observe(MessageAdded, on_message)
    with anyio.fail_after(HANG):
        if operation == "communicate":
            assert await branch.communicate("Q1") == "A:Q1"
        else:
            async with branch.run("Q1") as stream:
                [m async for m in stream]
    assert replies == (["A:side"] if operation == "run" else [TurnFinalizingError])
    assert len(rec.starts()) == 1
    _assert_turns_clean(rec)
    assert_idle(branch)


async def test_message_handler_recording_messages_is_delivered_before_the_terminal() -> None:
    branch, rec, _, session = _branch()

    async def on_message(signal: MessageAdded, _: Any) -> None:
        if getattr(signal.message, "instruction", None) == "Q1":
            await branch.communicate("side")

    session.observe(MessageAdded, on_message)
    with anyio.fail_after(HANG):
        async with branch.run("Q1") as stream:
            [m async for m in stream]
    turn_id = rec.starts()[0].turn_id
    texts = [getattr(m.message, "instruction", None) for m in rec.messages()]
    assert "side" in texts
    assert all(m.turn_id == turn_id for m in rec.messages())
    _assert_turns_clean(rec)
    assert_idle(branch)


async def test_run_start_handler_calling_the_branch_runs_nested() -> None:
    branch, rec, _, session = _branch()
    replies: list[str] = []

    async def on_start(signal: RunStart, _: Any) -> None:
        replies.append(str(await branch.chat("side")))

    session.observe(RunStart, on_start)
    with anyio.fail_after(HANG):
        assert await branch.communicate("Q1") == "A:Q1"
    assert replies == ["A:side"]
    assert len(rec.starts()) == 1
    _assert_turns_clean(rec)


async def test_blocking_run_start_handler_is_cancelled_with_the_caller() -> None:
    branch, rec, _, session = _branch()
    entered = anyio.Event()
    handler_exit: list[str] = []

    async def blocking(signal: Signal, _: Any) -> None:
        entered.set()
        try:
            await anyio.sleep_forever()
        finally:
            handler_exit.append("cancelled")

    session.observe(RunStart, blocking)
    with anyio.fail_after(HANG):
        async with anyio.create_task_group() as group:
            group.start_soon(branch.communicate, "Q1")
            await entered.wait()
            group.cancel_scope.cancel()
    assert handler_exit == ["cancelled"]
    [terminal] = rec.terminals()
    assert isinstance(terminal, RunFailed)
    assert isinstance(terminal.data, anyio.get_cancelled_exc_class())
    assert [kind for kind, _ in rec.lifecycle()] == ["RunStart", "RunFailed"]
    assert len(branch.msgs) == 0 or not any(isinstance(s, RunEnd) for s in rec.signals)
    assert_idle(branch)


# -- nested task handles ---------------------------------------------------------------------
async def test_cancelled_nested_task_wait_raises_task_cancelled() -> None:
    branch, _, _ = observed_branch()
    started = anyio.Event()
    outcomes: list[BaseException] = []

    async def forever() -> None:
        started.set()
        await anyio.sleep_forever()

    async def body(scope: TurnScope) -> None:
        handle = scope.start_soon(forever, name="forever")
        await started.wait()
        handle.cancel()
        try:
            await handle.wait()
        except anyio.TaskCancelled as exc:
            outcomes.append(exc)
        assert handle.finished

    await run_in_turn(branch, model=None, invoke=body)
    assert len(outcomes) == 1
    assert_idle(branch)


async def test_nested_task_failure_is_returned_by_wait() -> None:
    branch, _, _ = observed_branch()

    async def broken() -> None:
        raise ValueError("child broke")

    async def body(scope: TurnScope) -> None:
        handle = scope.start_soon(broken)
        with pytest.raises(ValueError, match="child broke"):
            await handle.wait()

    await run_in_turn(branch, model=None, invoke=body)
    assert_idle(branch)


async def test_iterating_one_stream_from_two_tasks_at_once_is_an_error() -> None:
    branch, _, _ = observed_branch()
    inside = anyio.Event()

    async def body(scope: TurnScope) -> AsyncIterator[int]:
        inside.set()
        await anyio.sleep_forever()
        yield 0  # pragma: no cover

    stream = stream_in_turn(branch, model=None, invoke=body)
    got: list[int] = []

    async def consume() -> None:
        got.extend([item async for item in stream])

    with anyio.fail_after(HANG):
        async with anyio.create_task_group() as group:
            group.start_soon(consume)
            await inside.wait()
            with pytest.raises(RuntimeError, match="already being iterated"):
                await anext(stream)
            await stream.aclose()
    assert got == []
    assert_idle(branch)
