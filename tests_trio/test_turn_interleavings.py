"""The turn driver's trickiest interleavings, placed deterministically on trio.

Each test pins the order of the racing steps with ``trio.testing.Sequencer`` and
``wait_all_tasks_blocked`` (and virtual time with the ``autojump_clock`` fixture), so the
interleaving under test is the one that runs, every time.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from typing import Any, cast
from uuid import uuid4

import anyio
import pytest
import trio
from trio.testing import MockClock, Sequencer, wait_all_tasks_blocked

from lionagi.operations.turn import (
    TurnFinalizingError,
    _active_turn_var,
    run_in_turn,
    stream_in_turn,
)
from lionagi.operations.types import TurnScope
from lionagi.protocols.messages import Instruction
from lionagi.session.branch import Branch
from lionagi.session.control import LoopBreak, LoopDirective, check_control
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, RunStart, Signal
from tests.helpers import Recorder, assert_idle, assert_one_terminal_per_start, observed_branch


def _texts(branch: Branch) -> list[str | None]:
    return [m.instruction for m in branch.msgs if isinstance(m, Instruction)]


def _waiting(branch: Branch) -> int:
    return branch._turn_lock.tasks_waiting


def _position(recorder: Recorder, predicate: Any) -> int:
    [index] = [i for i, s in enumerate(recorder.signals) if predicate(s)]
    return index


async def _value(scope: TurnScope) -> str:
    return "value"


def _counting_stream(n: int, closed: list[str]) -> Any:
    async def body(scope: TurnScope) -> AsyncIterator[int]:
        try:
            for i in range(n):
                yield i
        finally:
            closed.append("closed")

    return body


def _drop_and_collect(references: list[Any]) -> None:
    references.clear()
    gc.collect()


# -- two callers on one Branch ---------------------------------------------------------------
async def test_second_caller_starts_after_the_first_terminal_and_sees_its_history(
    autojump_clock: MockClock,
) -> None:
    branch, rec, session = observed_branch()
    seq = Sequencer()
    results: dict[str, str] = {}
    seen_by_b: list[str | None] = []

    async def slow_terminal(signal: RunEnd, _: Any) -> None:
        if signal.operation == "A":
            await trio.sleep(5)  # B stays queued through A's whole finalization

    session.observe(RunEnd, slow_terminal)

    async def body_a(scope: TurnScope) -> str:
        branch.msgs.add(Instruction(instruction="a1"))
        async with seq(0):
            pass
        async with seq(2):
            await wait_all_tasks_blocked()
            assert _waiting(branch) == 1  # B arrived mid-turn and is queued
        branch.msgs.add(Instruction(instruction="a2"))
        return "a"

    async def body_b(scope: TurnScope) -> str:
        seen_by_b.extend(_texts(branch))
        return "b"

    async def caller_a() -> None:
        results["a"] = await run_in_turn(branch, model=None, invoke=body_a, operation="A")

    async def caller_b() -> None:
        async with seq(1):
            assert branch.active_turn_id is not None
        results["b"] = await run_in_turn(branch, model=None, invoke=body_b, operation="B")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller_a)
        nursery.start_soon(caller_b)

    assert results == {"a": "a", "b": "b"}
    assert seen_by_b == ["a1", "a2"]
    assert rec.kinds() == [
        "RunStart",
        "MessageAdded",
        "MessageAdded",
        "RunEnd",
        "RunStart",
        "RunEnd",
    ]
    end_a = _position(rec, lambda s: isinstance(s, RunEnd) and s.operation == "A")
    start_b = _position(rec, lambda s: isinstance(s, RunStart) and s.operation == "B")
    assert end_a < start_b
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


# -- cancelling a queued waiter while the holder finalizes ----------------------------------------
@pytest.mark.parametrize("hook", [MessageAdded, RunEnd])
async def test_cancelling_a_queued_waiter_while_the_holder_finalizes(hook: type[Signal]) -> None:
    """The waiter B is cancelled while A is in its finalization (inside A's message drain, or
    between the drain and the end of its terminal). B leaves no trace and C, queued behind B,
    still gets the Branch after A."""
    branch, rec, session = observed_branch()
    seq = Sequencer()
    b_scope = trio.CancelScope()
    order: list[str] = []

    async def hook_handler(signal: Signal, _: Any) -> None:
        if getattr(signal, "operation", "A") != "A" or getattr(signal, "turn_id", None) is None:
            return
        if (
            isinstance(signal, MessageAdded)
            and cast(Instruction, signal.message).instruction != "a"
        ):
            return
        async with seq(0):
            context = branch._active_turn_context
            assert context is not None
            assert context.phase == "finalizing"
        async with seq(2):
            order.append("hook-resumed")

    session.observe(hook, hook_handler)

    queued = trio.Event()

    async def body_a(scope: TurnScope) -> None:
        await queued.wait()
        branch.msgs.add(Instruction(instruction="a"))

    async def caller_a() -> None:
        await run_in_turn(branch, model=None, invoke=body_a, operation="A")

    async def caller_b() -> None:
        with b_scope:
            await run_in_turn(branch, model=None, invoke=_value, operation="B")
        order.append("b-cancelled" if b_scope.cancelled_caught else "b-ran")

    async def caller_c() -> None:
        order.append(await run_in_turn(branch, model=None, invoke=_value, operation="C"))

    async def canceller() -> None:
        async with seq(1):
            assert _waiting(branch) == 2
            b_scope.cancel()
            await wait_all_tasks_blocked()
            assert order == ["b-cancelled"]
            assert _waiting(branch) == 1  # only C is left in the queue

    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller_a)
        await wait_all_tasks_blocked()
        nursery.start_soon(caller_b)
        await wait_all_tasks_blocked()
        nursery.start_soon(caller_c)
        await wait_all_tasks_blocked()
        assert _waiting(branch) == 2  # B and C are queued behind A
        nursery.start_soon(canceller)
        queued.set()

    assert order == ["b-cancelled", "hook-resumed", "value"]
    assert [s.operation for s in rec.starts()] == ["A", "C"]
    assert rec.lifecycle()[1][0] == "RunEnd"
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


# -- streams closed elsewhere ---------------------------------------------------------------------
async def test_stream_closed_by_another_task_ends_with_run_end_and_frees_the_branch() -> None:
    branch, rec, _ = observed_branch()
    closed: list[str] = []
    stream = stream_in_turn(branch, model=None, invoke=_counting_stream(10, closed))
    seen: list[int] = []
    order: list[str] = []

    async def consumer() -> None:
        seen.append(await anext(stream))
        seen.append(await anext(stream))

    async def closer() -> None:
        assert anyio.get_current_task().id != owner.id
        await stream.aclose()
        assert _active_turn_var.get() is None  # the binding set for the close step was reset
        order.append("closed")

    async def waiter() -> None:
        order.append(await run_in_turn(branch, model=None, invoke=_value))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer)
    assert seen == [0, 1]
    context = branch._active_turn_context
    assert context is not None  # the consumer task is gone; its stream still holds the turn
    owner = context.owner_task

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await wait_all_tasks_blocked()
        assert _waiting(branch) == 1
        nursery.start_soon(closer)

    assert closed == ["closed"]
    assert order == ["closed", "value"]
    assert rec.kinds() == ["RunStart", "RunEnd", "RunStart", "RunEnd"]
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_abandoned_stream_is_finalized_on_its_loop_and_the_waiter_runs_after() -> None:
    """Dropping a started stream without aclose(): the stream notices it was dropped and its
    turn is finalized in a system task of the run (RunEnd, body closed), then the waiter runs."""
    branch, rec, _ = observed_branch()
    closed: list[str] = []
    order: list[str] = []
    holder = [stream_in_turn(branch, model=None, invoke=_counting_stream(10, closed))]
    assert await anext(holder[0]) == 0

    async def waiter() -> None:
        order.append(await run_in_turn(branch, model=None, invoke=_value))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await wait_all_tasks_blocked()
        assert _waiting(branch) == 1
        _drop_and_collect(holder)
        await wait_all_tasks_blocked()

    assert closed == ["closed"]
    assert order == ["value"]
    assert rec.kinds() == ["RunStart", "RunEnd", "RunStart", "RunEnd"]
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


# -- slow observers ------------------------------------------------------------------------------
async def test_slow_message_observer_is_delivered_in_order_before_the_terminal(
    autojump_clock: MockClock,
) -> None:
    branch, rec, session = observed_branch()
    events: list[str] = []

    async def slow(signal: MessageAdded, _: Any) -> None:
        await trio.sleep(10)
        events.append(f"delivered {cast(Instruction, signal.message).instruction}")

    session.observe(MessageAdded, slow)
    session.observe(RunEnd, lambda s, _: events.append("RunEnd"))

    async def body(scope: TurnScope) -> None:
        for i in range(3):
            branch.msgs.add(Instruction(instruction=f"m{i}"))
            await trio.sleep(1)
        events.append("body returned")

    start = trio.current_time()
    await run_in_turn(branch, model=None, invoke=body)
    assert events == [
        "body returned",
        "delivered m0",
        "delivered m1",
        "delivered m2",
        "RunEnd",
    ]
    assert trio.current_time() - start >= 30  # one delivery at a time, all awaited
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


# -- out-of-band control -------------------------------------------------------------------------
async def test_control_from_an_unrelated_task_targets_the_turn_by_id(
    autojump_clock: MockClock,
) -> None:
    branch, rec, session = observed_branch()
    send, receive = trio.open_memory_channel[Any](10)
    session.observe(RunStart, lambda s, _: send.send_nowait(s.turn_id))
    seq = Sequencer()
    first_over = trio.Event()
    verdicts: dict[str, bool] = {}
    second_turn_polls: list[Any] = []

    async def controller() -> None:
        # started before any turn: it inherits no binding and is not the turn's task
        first = await receive.receive()
        assert _active_turn_var.get() is None
        verdicts["wrong id"] = branch.control(LoopDirective.BREAK, turn_id=uuid4())
        verdicts["right id"] = branch.control(
            LoopDirective.BREAK, turn_id=first, reason="from observer"
        )
        await first_over.wait()
        verdicts["stale id"] = branch.control(LoopDirective.BREAK, turn_id=first)
        verdicts["stale, no id"] = branch.control(LoopDirective.BREAK)
        second = await receive.receive()
        async with seq(0):  # the second turn is active and has not polled yet
            verdicts["old id in the next turn"] = branch.control(
                LoopDirective.CANCEL, turn_id=first
            )
            verdicts["next turn's id"] = branch.control(LoopDirective.CONTINUE, turn_id=second)

    async def polling_body(scope: TurnScope) -> None:
        for _ in range(1000):
            check_control(scope)
            await trio.sleep(1)
        pytest.fail("the BREAK never arrived")

    async def second_body(scope: TurnScope) -> str:
        async with seq(1):
            second_turn_polls.append(branch.poll_control())
        return "second"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(controller)
        await wait_all_tasks_blocked()
        with pytest.raises(LoopBreak, match="from observer") as caught:
            await run_in_turn(branch, model=None, invoke=polling_body)
        assert branch.active_turn_id is None
        first_over.set()
        await wait_all_tasks_blocked()
        assert await run_in_turn(branch, model=None, invoke=second_body) == "second"

    first_turn = rec.starts()[0].turn_id
    assert caught.value.control.turn_id == first_turn
    [failed, ended] = rec.terminals()
    assert isinstance(failed, RunFailed)
    assert failed.data is caught.value
    assert isinstance(ended, RunEnd)
    assert verdicts == {
        "wrong id": False,
        "right id": True,
        "stale id": False,
        "stale, no id": False,
        "old id in the next turn": False,
        "next turn's id": True,
    }
    [control] = second_turn_polls
    assert control is not None
    assert control.directive is LoopDirective.CONTINUE  # the stale CANCEL was never stored
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


# -- re-entry from the terminal handler of a cancelled turn ---------------------------------------
@pytest.mark.parametrize("kind", ["coroutine", "stream"])
async def test_run_failed_handler_reentry_after_cancel_raises_turn_finalizing_error(
    kind: str,
) -> None:
    branch, rec, session = observed_branch()
    outcomes: list[Any] = []
    entered = trio.Event()

    async def on_failed(signal: RunFailed, _: Any) -> None:
        outcomes.append(signal.data)
        try:
            await run_in_turn(branch, model=None, invoke=_value)
        except TurnFinalizingError as exc:
            outcomes.append(exc)
        stream = stream_in_turn(branch, model=None, invoke=_counting_stream(1, []))
        try:
            await anext(stream)
        except TurnFinalizingError as exc:
            outcomes.append(exc)
        await trio.sleep(0)  # finalization is shielded: this checkpoint is not cancelled
        outcomes.append("handler finished")

    unsubscribe = session.observe(RunFailed, on_failed)

    async def body(scope: TurnScope) -> None:
        entered.set()
        await trio.sleep_forever()

    async def stream_body(scope: TurnScope) -> AsyncIterator[int]:
        yield 0
        entered.set()
        await trio.sleep_forever()

    async def run_coroutine() -> None:
        await run_in_turn(branch, model=None, invoke=body)

    async def run_stream() -> None:
        async for _ in stream_in_turn(branch, model=None, invoke=stream_body):
            pass

    with trio.CancelScope() as cs:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_coroutine if kind == "coroutine" else run_stream)
            await entered.wait()
            cs.cancel()
    assert cs.cancelled_caught  # the cancellation, not the handler's error, reached the caller
    assert [type(o) for o in outcomes] == [
        trio.Cancelled,
        TurnFinalizingError,
        TurnFinalizingError,
        str,
    ]
    turn_id = rec.starts()[0].turn_id
    assert str(turn_id) in str(outcomes[1])
    assert rec.kinds() == ["RunStart", "RunFailed"]
    assert_idle(branch)
    # once the turn has ended, the same call is an ordinary top-level turn
    unsubscribe()
    assert await run_in_turn(branch, model=None, invoke=_value) == "value"
    assert rec.kinds() == ["RunStart", "RunFailed", "RunStart", "RunEnd"]
    assert_one_terminal_per_start(rec)


# -- a stream cancelled while its step shuts down nested work ------------------------------------
async def test_stream_cancelled_during_nested_shutdown_closes_its_body_before_the_terminal() -> (
    None
):
    branch, _, session = observed_branch()
    seq = Sequencer()
    consumer = trio.CancelScope()
    events: list[str] = []
    bodies: list[Any] = []
    session.observe(RunFailed, lambda s, _: events.append("RunFailed"))

    async def child() -> None:
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):  # a child that cleans up before it exits
                async with seq(0):
                    pass
                async with seq(2):
                    events.append("child cleaned up")

    async def body(scope: TurnScope) -> AsyncIterator[int]:
        try:
            scope.start_soon(child)
            yield 0
            yield 1
        finally:
            context = branch._active_turn_context
            events.append("body closed" if context is scope.context else "body closed too late")

    def invoke(scope: TurnScope) -> AsyncIterator[int]:
        generator = body(scope)
        bodies.append(generator)
        return generator

    async def consume() -> None:
        with consumer:
            async for _ in stream_in_turn(branch, model=None, invoke=invoke):
                pass

    async def canceller() -> None:
        async with seq(1):  # the step is waiting for the child to finish its cleanup
            consumer.cancel()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            nursery.start_soon(canceller)
        assert consumer.cancelled_caught
        assert events == ["child cleaned up", "body closed", "RunFailed"]
        assert_idle(branch)
    finally:
        for generator in bodies:  # close a leaked body here rather than in the GC
            await generator.aclose()


# -- a caller's deadline against a blocking start handler --------------------------------------
async def test_caller_deadline_cancels_a_blocking_run_start_handler(
    autojump_clock: MockClock,
) -> None:
    """RunStart is not shielded: ``move_on_after`` returns at its deadline although a start
    handler never returns, the handler is cancelled, and the turn ends with one RunFailed."""
    branch, rec, session = observed_branch()
    exits: list[float] = []

    async def stuck(signal: RunStart, _: Any) -> None:
        try:
            await trio.sleep_forever()
        finally:
            exits.append(trio.current_time())

    session.observe(RunStart, stuck)
    start = trio.current_time()
    with trio.move_on_after(0.2) as deadline:
        await run_in_turn(branch, model=None, invoke=_value)
    assert deadline.cancelled_caught
    assert exits == [start + 0.2]
    assert [kind for kind, _ in rec.lifecycle()] == ["RunStart", "RunFailed"]
    [terminal] = rec.terminals()
    assert isinstance(terminal, RunFailed)
    assert isinstance(terminal.data, trio.Cancelled)
    assert_idle(branch)
