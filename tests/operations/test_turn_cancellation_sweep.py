"""Cancellation at every scheduling point of a turn leaves the Branch clean.

A ticker task yields k times and then cancels the caller; k sweeps from 0 until the turn
completes uncancelled, so the cancellation lands at each successive point where the turn's tasks
yield to the scheduler: waiting for the lock, RunStart handlers, the body and its nested task, the
model call, message-signal delivery, nested-work shutdown, signal drain and the terminal.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from anyio.lowlevel import checkpoint

from lionagi.operations.turn import _active_turn_var, run_in_turn, stream_in_turn
from lionagi.operations.types import TurnScope
from lionagi.protocols.messages import AssistantResponse, Instruction
from lionagi.session.branch import Branch
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, RunStart
from lionagi.testing import FunctionModel
from tests.helpers import Recorder, assert_idle, assert_one_terminal_per_start, observed_branch

MAX_POINTS = 400


async def _slow_handler(signal: Any, _: Any) -> None:
    for _ in range(3):
        await checkpoint()


async def _model_reply(messages: Any, **options: Any) -> str:
    for _ in range(3):
        await checkpoint()
    return "reply"


def _sweep_branch() -> tuple[Branch, Recorder]:
    branch, recorder, session = observed_branch(chat_model=FunctionModel(_model_reply))
    for kind in (RunStart, MessageAdded, RunEnd, RunFailed):
        session.observe(kind, _slow_handler)
    return branch, recorder


async def _coroutine_turn(branch: Branch) -> str:
    async def child() -> None:
        await anyio.sleep_forever()

    async def body(scope: TurnScope) -> str:
        scope.start_soon(child)
        instruction = Instruction(instruction="q")
        branch.msgs.add(instruction)
        assert scope.context.model is not None
        response = await scope.context.model.invoke([instruction])
        branch.msgs.add(AssistantResponse(content=response.text))
        return response.text

    return await run_in_turn(branch, model=None, invoke=body)


async def _stream_turn(branch: Branch) -> str:
    async def body(scope: TurnScope) -> AsyncIterator[str]:
        for i in range(3):
            branch.msgs.add(Instruction(instruction=f"s{i}"))
            await checkpoint()
            yield f"s{i}"

    items = [item async for item in stream_in_turn(branch, model=None, invoke=body)]
    return ",".join(items)


async def _queued_turn(branch: Branch) -> str:
    """A turn that first waits for the lock behind a short holder turn."""
    entered = anyio.Event()

    async def holder(scope: TurnScope) -> None:
        entered.set()
        for _ in range(5):
            await checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: run_in_turn(branch, model=None, invoke=holder))
        await entered.wait()
        result = await _coroutine_turn(branch)
    return result


async def _sweep(turn: Callable[[Branch], Awaitable[str]], expected: str) -> dict[str, int]:
    """Cancel at point k = 0, 1, 2, ... until a run completes; check after every one.

    Returns how many points were tried and how the cancelled runs ended."""
    seen = {"points": 0, "before_start": 0, "run_failed": 0}
    for k in range(MAX_POINTS):
        branch, recorder = _sweep_branch()
        outcome: list[str] = []

        async def call(b: Branch = branch, out: list[str] = outcome) -> None:
            out.append(await turn(b))

        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                for _ in range(k):
                    await checkpoint()
                scope.cancel()
        completed = bool(outcome)
        # one terminal per started turn, after its messages; none for a turn that never started
        assert_one_terminal_per_start(recorder)
        cancelled_turns = [
            t
            for t in recorder.terminals()
            if isinstance(t, RunFailed) and isinstance(t.data, anyio.get_cancelled_exc_class())
        ]
        if not completed:
            assert all(isinstance(t, RunEnd) for t in recorder.terminals()[:-1])
            seen["run_failed" if cancelled_turns else "before_start"] += 1
        assert_idle(branch)
        assert _active_turn_var.get() is None
        for message in branch.msgs:  # only whole messages
            assert isinstance(message, Instruction | AssistantResponse)
        # the branch serves the next turn normally
        assert await _coroutine_turn(branch) == "reply"
        seen["points"] = k
        if completed:
            assert outcome == [expected]
            return seen
    raise AssertionError(f"the turn never completed within {MAX_POINTS} scheduling points")


async def test_cancellation_at_every_point_of_a_coroutine_turn() -> None:
    seen = await _sweep(_coroutine_turn, "reply")
    # the sweep walked through the turn: cancelled before it started and after
    assert seen["before_start"] >= 1
    assert seen["run_failed"] >= 5


async def test_cancellation_at_every_point_of_a_stream_turn() -> None:
    seen = await _sweep(_stream_turn, "s0,s1,s2")
    assert seen["before_start"] >= 1
    assert seen["run_failed"] >= 5


async def test_cancellation_at_every_point_of_a_queued_turn() -> None:
    seen = await _sweep(_queued_turn, "reply")
    assert seen["run_failed"] >= 5
