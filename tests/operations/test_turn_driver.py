"""The turn driver (ADR-0018): terminal matrix, entry state machine, signals, control, models."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
from anyio.lowlevel import checkpoint

from lionagi import _interrupt as interrupt_module
from lionagi.errors import ConfigurationError
from lionagi.operations import turn as turn_module
from lionagi.operations.events import TextDeltaEvent
from lionagi.operations.turn import (
    TurnFinalizingError,
    TurnStream,
    _active_turn_var,
    control_point,
    current_scope,
    run_in_turn,
    stream_in_turn,
)
from lionagi.operations.types import TurnScope
from lionagi.protocols.messages import Instruction, System
from lionagi.session.branch import Branch
from lionagi.session.control import LoopBreak, LoopDirective, StopStream, check_control
from lionagi.session.session import Session
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, RunStart
from lionagi.testing import FunctionModel
from tests.helpers import (
    assert_idle,
    assert_one_terminal_per_start,
    echo_model,
    observed_branch,
)


async def _value(scope: TurnScope) -> str:
    return "value"


# -- terminal matrix: coroutine rows ----------------------------------------------------------
async def test_the_turn_id_is_made_when_first_read_from_the_turn_number() -> None:
    branch = Branch(chat_model=echo_model())  # unobserved: nothing asks for the id
    untouched: list[object] = []

    async def body(scope: TurnScope) -> object:
        context = scope.context
        untouched.append(context._turn_uuid)
        turn_id = context.turn_id
        assert context.turn_id is turn_id  # made once
        assert turn_id.int == context.turn_number
        assert turn_id.version == 4
        return turn_id

    first = await run_in_turn(branch, model=None, invoke=body)
    second = await run_in_turn(branch, model=None, invoke=body)
    assert untouched == [None, None]
    assert first != second
    assert_idle(branch)


async def test_normal_return_emits_run_end_and_returns_unchanged() -> None:
    branch, rec, _ = observed_branch()
    sentinel = object()

    async def body(scope: TurnScope) -> object:
        assert scope.owns_lifecycle
        assert branch._active_turn_context is scope.context
        assert scope.context.phase == "active"
        return sentinel

    assert await run_in_turn(branch, model=None, invoke=body) is sentinel
    assert rec.kinds() == ["RunStart", "RunEnd"]
    assert rec.signals[0].turn_id == rec.signals[1].turn_id is not None  # type: ignore[attr-defined]
    assert_idle(branch)


async def test_exception_emits_run_failed_and_reraises_the_same_object() -> None:
    branch, rec, _ = observed_branch()
    error = ValueError("boom")

    async def body(scope: TurnScope) -> None:
        raise error

    with pytest.raises(ValueError) as caught:
        await run_in_turn(branch, model=None, invoke=body)
    assert caught.value is error
    [failed] = rec.terminals()
    assert isinstance(failed, RunFailed)
    assert failed.data is error
    assert rec.kinds() == ["RunStart", "RunFailed"]
    assert_idle(branch)


async def test_loop_break_is_run_failed() -> None:
    branch, rec, _ = observed_branch()

    async def body(scope: TurnScope) -> None:
        assert branch.control(LoopDirective.BREAK, reason="enough")
        check_control(scope)

    with pytest.raises(LoopBreak, match="enough"):
        await run_in_turn(branch, model=None, invoke=body)
    assert isinstance(rec.terminals()[0], RunFailed)
    assert isinstance(rec.terminals()[0].data, LoopBreak)  # type: ignore[union-attr]
    assert_idle(branch)


async def test_cancellation_after_start_is_run_failed_and_propagates() -> None:
    branch, rec, _ = observed_branch()
    entered = anyio.Event()

    async def body(scope: TurnScope) -> None:
        entered.set()
        await anyio.sleep_forever()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: run_in_turn(branch, model=None, invoke=body))
        await entered.wait()
        tg.cancel_scope.cancel()
    [failed] = rec.terminals()
    assert isinstance(failed, RunFailed)
    assert isinstance(failed.data, anyio.get_cancelled_exc_class())
    assert_idle(branch)


async def test_cancellation_while_waiting_for_the_lock_leaves_no_trace() -> None:
    branch, rec, _ = observed_branch()
    entered, release = anyio.Event(), anyio.Event()

    async def holder(scope: TurnScope) -> None:
        entered.set()
        await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: run_in_turn(branch, model=None, invoke=holder))
        await entered.wait()
        with anyio.CancelScope() as waiting:
            waiting.cancel()
            await run_in_turn(branch, model=None, invoke=_value)
        assert waiting.cancelled_caught
        # cancel a waiter that is really queued, too
        async with anyio.create_task_group() as waiters:
            waiters.start_soon(lambda: run_in_turn(branch, model=None, invoke=_value))
            while branch._turn_lock.tasks_waiting == 0:
                await checkpoint()
            waiters.cancel_scope.cancel()
        release.set()
    assert len(rec.starts()) == 1
    assert rec.kinds() == ["RunStart", "RunEnd"]
    assert_idle(branch)


# -- terminal matrix: stream rows ---------------------------------------------------------------
def _counting_stream(n: int, closed: list[str], fail_at: int | None = None) -> Any:
    async def body(scope: TurnScope) -> AsyncIterator[int]:
        try:
            for i in range(n):
                if fail_at == i:
                    raise RuntimeError(f"failed at {i}")
                yield i
        finally:
            closed.append("closed")

    return body


async def test_stream_created_but_never_iterated_acquires_nothing() -> None:
    branch, rec, _ = observed_branch()
    closed: list[str] = []
    stream = stream_in_turn(branch, model=None, invoke=_counting_stream(3, closed))
    assert_idle(branch)
    await stream.aclose()
    assert rec.signals == []
    assert closed == []
    assert not branch._turn_lock.locked()
    assert not branch._turn_lock.contended


async def test_stream_exhaustion_is_run_end() -> None:
    branch, rec, _ = observed_branch()
    closed: list[str] = []
    items = [
        i async for i in stream_in_turn(branch, model=None, invoke=_counting_stream(3, closed))
    ]
    assert items == [0, 1, 2]
    assert closed == ["closed"]
    assert rec.kinds() == ["RunStart", "RunEnd"]
    assert_idle(branch)


async def test_stream_aclose_after_start_is_run_end_and_closes_the_body() -> None:
    branch, rec, _ = observed_branch()
    closed: list[str] = []
    stream = stream_in_turn(branch, model=None, invoke=_counting_stream(10, closed))
    assert await anext(stream) == 0
    assert branch._active_turn_context is not None
    await stream.aclose()
    assert closed == ["closed"]
    assert rec.kinds() == ["RunStart", "RunEnd"]
    assert_idle(branch)


async def test_stream_break_then_aclose_is_run_end() -> None:
    branch, rec, _ = observed_branch()
    closed: list[str] = []
    stream = stream_in_turn(branch, model=None, invoke=_counting_stream(10, closed))
    async for item in stream:
        if item == 2:
            break
    await stream.aclose()
    assert closed == ["closed"]
    assert rec.kinds() == ["RunStart", "RunEnd"]
    assert_idle(branch)


async def test_stream_stop_stream_control_ends_cleanly_with_run_end() -> None:
    branch, rec, _ = observed_branch()

    async def body(scope: TurnScope) -> AsyncIterator[int]:
        for i in range(10):
            check_control(scope)
            yield i

    seen = []
    async for item in stream_in_turn(branch, model=None, invoke=body):
        seen.append(item)
        if item == 1:
            assert branch.control(LoopDirective.CANCEL)
    assert seen == [0, 1]
    assert rec.kinds() == ["RunStart", "RunEnd"]
    assert_idle(branch)


async def test_stream_exception_is_run_failed() -> None:
    branch, rec, _ = observed_branch()
    closed: list[str] = []
    stream = stream_in_turn(branch, model=None, invoke=_counting_stream(5, closed, fail_at=2))
    seen: list[int] = []

    async def consume() -> None:
        async for item in stream:
            seen.append(item)  # noqa: PERF401

    with pytest.raises(RuntimeError, match="failed at 2"):
        await consume()
    assert seen == [0, 1]
    assert rec.kinds() == ["RunStart", "RunFailed"]
    assert_idle(branch)


async def test_stream_cancellation_is_run_failed() -> None:
    branch, rec, _ = observed_branch()
    first = anyio.Event()

    async def body(scope: TurnScope) -> AsyncIterator[int]:
        yield 0
        await anyio.sleep_forever()
        yield 1  # pragma: no cover

    async def consume() -> None:
        async for _ in stream_in_turn(branch, model=None, invoke=body):
            first.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await first.wait()
        tg.cancel_scope.cancel()
    [failed] = rec.terminals()
    assert isinstance(failed, RunFailed)
    assert isinstance(failed.data, anyio.get_cancelled_exc_class())
    assert_idle(branch)


async def test_stream_holds_the_turn_across_yields() -> None:
    branch, rec, _ = observed_branch()
    closed: list[str] = []
    order: list[str] = []

    async def other() -> None:
        await run_in_turn(branch, model=None, invoke=_value)
        order.append("other")

    async with anyio.create_task_group() as tg:
        async for item in stream_in_turn(branch, model=None, invoke=_counting_stream(3, closed)):
            if item == 0:
                tg.start_soon(other)
                while branch._turn_lock.tasks_waiting == 0:
                    await checkpoint()
            order.append(f"item{item}")
    assert order == ["item0", "item1", "item2", "other"]
    assert_one_terminal_per_start(rec)


async def test_owner_task_is_the_task_info_of_the_task_that_started_the_turn() -> None:
    branch = Branch(chat_model=echo_model())
    contexts: list[Any] = []

    async def body(scope: TurnScope) -> Any:
        contexts.append(scope.context)
        return scope.context.owner_task

    async def start() -> Any:
        return await run_in_turn(branch, model=None, invoke=body), anyio.get_current_task()

    results: list[Any] = []

    async def in_a_task() -> None:
        results.append(await start())

    async with anyio.create_task_group() as group:
        group.start_soon(in_a_task)
    ((seen, task),) = results
    # read while the task runs: anyio's own TaskInfo of it (same class, id, name, parent)
    assert type(seen) is type(task)
    assert (seen.id, seen.name, seen.parent_id) == (task.id, task.name, task.parent_id)
    # read after the task ended: the same identity and name
    late = contexts[0].owner_task
    assert (late.id, late.name) == (task.id, task.name)


# -- entry state machine ------------------------------------------------------------------------
async def test_nested_entry_in_owner_task_shares_the_turn() -> None:
    branch, rec, _ = observed_branch()
    seen: list[TurnScope] = []

    async def inner(scope: TurnScope) -> str:
        seen.append(scope)
        return "inner"

    async def outer(scope: TurnScope) -> str:
        seen.append(scope)
        return await run_in_turn(branch, model=None, invoke=inner)

    assert await run_in_turn(branch, model=None, invoke=outer) == "inner"
    assert seen[0].owns_lifecycle
    assert not seen[1].owns_lifecycle
    assert seen[0].context is seen[1].context
    assert rec.kinds() == ["RunStart", "RunEnd"]


async def test_nested_entry_in_a_child_task_shares_the_turn() -> None:
    branch, rec, _ = observed_branch()

    async def inner(scope: TurnScope) -> tuple[bool, Any]:
        return scope.owns_lifecycle, scope.turn_id

    async def child() -> tuple[bool, Any]:
        return await run_in_turn(branch, model=None, invoke=inner)

    async def outer(scope: TurnScope) -> tuple[bool, Any]:
        handle = scope.start_soon(child)
        result: tuple[bool, Any] = await handle.wait()
        assert result[1] == scope.turn_id
        return result

    owns, _ = await run_in_turn(branch, model=None, invoke=outer)
    assert owns is False
    assert rec.kinds() == ["RunStart", "RunEnd"]


async def test_unfinished_nested_work_is_cancelled_before_the_terminal() -> None:
    branch, _, _ = observed_branch()
    events: list[str] = []
    started = anyio.Event()

    async def forever() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            events.append("child-cancelled")

    async def body(scope: TurnScope) -> None:
        scope.start_soon(forever)
        await started.wait()

    assert branch._observer is not None
    branch._observer.subscribe(RunEnd, lambda s, _: events.append("RunEnd"))
    await run_in_turn(branch, model=None, invoke=body)
    assert events == ["child-cancelled", "RunEnd"]
    assert_idle(branch)


async def test_reentry_from_terminal_handler_raises_turn_finalizing_error() -> None:
    branch, rec, session = observed_branch()
    errors: list[BaseException] = []

    async def on_end(signal: RunEnd, _: Any) -> None:
        try:
            await run_in_turn(branch, model=None, invoke=_value)
        except TurnFinalizingError as exc:
            errors.append(exc)

    session.observe(RunEnd, on_end)
    assert await run_in_turn(branch, model=None, invoke=_value) == "value"
    assert len(errors) == 1
    assert rec.kinds() == ["RunStart", "RunEnd"]
    assert_idle(branch)


async def test_binding_is_reset_and_outer_binding_restored_for_other_branch() -> None:
    branch_a, _, _ = observed_branch()
    branch_b, _, _ = observed_branch()

    async def inner(scope: TurnScope) -> Any:
        return _active_turn_var.get()

    async def outer(scope: TurnScope) -> Any:
        before = _active_turn_var.get()
        inner_binding = await run_in_turn(branch_b, model=None, invoke=inner)
        assert inner_binding.branch_id == branch_b.id
        assert _active_turn_var.get() is before
        return before

    binding = await run_in_turn(branch_a, model=None, invoke=outer)
    assert binding.branch_id == branch_a.id
    assert _active_turn_var.get() is None


# -- message signals ----------------------------------------------------------------------------
async def test_messages_reach_observers_before_the_terminal_even_when_slow() -> None:
    branch, rec, session = observed_branch()

    async def slow(signal: MessageAdded, _: Any) -> None:
        for _ in range(20):
            await checkpoint()

    session.observe(MessageAdded, slow)

    async def body(scope: TurnScope) -> None:
        for i in range(5):
            branch.msgs.add(Instruction(instruction=f"m{i}"))

    await run_in_turn(branch, model=None, invoke=body)
    assert rec.kinds() == ["RunStart"] + ["MessageAdded"] * 5 + ["RunEnd"]
    texts = [m.message.instruction for m in rec.messages()]  # type: ignore[attr-defined]
    assert texts == [f"m{i}" for i in range(5)]
    turn_id = rec.starts()[0].turn_id
    assert all(m.turn_id == turn_id for m in rec.messages())


async def test_message_signals_are_not_cancelled_when_the_turn_is() -> None:
    branch, rec, session = observed_branch()
    delivered: list[str] = []
    added = anyio.Event()

    async def slow(signal: MessageAdded, _: Any) -> None:
        await added.wait()
        for _ in range(5):
            await checkpoint()
        delivered.append("delivered")

    session.observe(MessageAdded, slow)

    async def body(scope: TurnScope) -> None:
        branch.msgs.add(Instruction(instruction="x"))
        added.set()
        await anyio.sleep_forever()

    with anyio.CancelScope() as cs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: run_in_turn(branch, model=None, invoke=body))
            await added.wait()
            cs.cancel()
    assert delivered == ["delivered"]
    assert rec.kinds() == ["RunStart", "MessageAdded", "RunFailed"]


async def test_message_signals_are_delivered_by_the_turns_own_task() -> None:
    """No task is started per message: the task running the turn delivers its queued signals,
    at a control point and at the end of the step."""
    branch, rec, session = observed_branch()
    delivered_by: list[int] = []
    session.observe(MessageAdded, lambda s, _: delivered_by.append(anyio.get_current_task().id))

    async def body(scope: TurnScope) -> int:
        for i in range(3):
            branch.msgs.add(Instruction(instruction=f"m{i}"))
        await control_point(scope)
        assert len(delivered_by) == 3
        branch.msgs.add(Instruction(instruction="late"))
        return anyio.get_current_task().id

    owner = await run_in_turn(branch, model=None, invoke=body)
    assert delivered_by == [owner] * 4
    assert rec.kinds() == ["RunStart"] + ["MessageAdded"] * 4 + ["RunEnd"]


async def test_a_task_of_the_turn_waits_for_the_delivery_another_task_is_making() -> None:
    """A control point reached while a nested task delivers the turn's queue waits until that
    delivery is done (the nested task delivers what was queued meanwhile, in order)."""
    branch, _, session = observed_branch()
    entered, gate = anyio.Event(), anyio.Event()
    events: list[str] = []

    async def slow(signal: MessageAdded, _: Any) -> None:
        text = signal.message.instruction  # type: ignore[attr-defined]
        events.append(f"start {text}")
        entered.set()
        await gate.wait()
        events.append(f"end {text}")

    session.observe(MessageAdded, slow)

    async def child(scope: TurnScope) -> None:
        branch.msgs.add(Instruction(instruction="child"))
        await control_point(scope)

    async def release() -> None:
        for _ in range(5):
            await checkpoint()
        events.append("released")
        gate.set()

    async def body(scope: TurnScope) -> None:
        scope.start_soon(child, scope)
        await entered.wait()
        branch.msgs.add(Instruction(instruction="owner"))
        scope.start_soon(release)
        await control_point(scope)
        events.append("owner passed its control point")

    await run_in_turn(branch, model=None, invoke=body)
    assert events == [
        "start child",
        "released",
        "end child",
        "start owner",
        "end owner",
        "owner passed its control point",
    ]
    assert_idle(branch)


async def test_out_of_turn_messages_are_delivered_but_never_drained_by_a_turn() -> None:
    branch, rec, session = observed_branch()
    gate, delivered = anyio.Event(), anyio.Event()

    async def gated(signal: MessageAdded, _: Any) -> None:
        if signal.turn_id is None:
            await gate.wait()
            delivered.set()

    session.observe(MessageAdded, gated)
    branch.msgs.add(Instruction(instruction="outside"))
    # a turn completes while the out-of-turn delivery is still blocked
    assert await run_in_turn(branch, model=None, invoke=_value) == "value"
    assert not delivered.is_set()
    gate.set()
    await delivered.wait()
    outside = [m for m in rec.messages() if m.turn_id is None]
    assert len(outside) == 1


async def test_out_of_turn_handler_failure_does_not_crash_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    branch, _, session = observed_branch()
    done = anyio.Event()

    def broken(signal: MessageAdded, _: Any) -> None:
        done.set()
        raise RuntimeError("handler broke")

    session.observe(MessageAdded, broken)
    branch.msgs.add(Instruction(instruction="outside"))
    await done.wait()
    for _ in range(5):
        await checkpoint()
    assert await run_in_turn(branch, model=None, invoke=_value) == "value"
    assert "handler broke" in caplog.text


async def test_observer_failures_never_replace_result_or_exception() -> None:
    branch, _, session = observed_branch()

    def broken(signal: Any, _: Any) -> None:
        raise RuntimeError("observer broke")

    session.observe(RunStart, broken)
    session.observe(RunEnd, broken)
    session.observe(RunFailed, broken)
    assert await run_in_turn(branch, model=None, invoke=_value) == "value"

    async def fail(scope: TurnScope) -> None:
        raise KeyError("original")

    with pytest.raises(KeyError, match="original"):
        await run_in_turn(branch, model=None, invoke=fail)
    assert_idle(branch)


# -- control --------------------------------------------------------------------------------------
async def test_control_without_active_turn_returns_false_and_stores_nothing() -> None:
    branch, _, _ = observed_branch()
    assert branch.control(LoopDirective.CANCEL) is False
    assert branch.poll_control() is None

    async def body(scope: TurnScope) -> Any:
        return scope.context.control

    assert await run_in_turn(branch, model=None, invoke=body) is None


async def test_control_with_wrong_turn_id_is_rejected() -> None:
    from uuid import uuid4

    branch, _, _ = observed_branch()

    async def body(scope: TurnScope) -> Any:
        assert branch.control(LoopDirective.BREAK, turn_id=uuid4()) is False
        assert branch.poll_control(turn_id=uuid4()) is None
        assert branch.control(LoopDirective.BREAK, turn_id=scope.turn_id) is True
        assert branch.poll_control(turn_id=uuid4()) is None
        control = branch.poll_control(turn_id=scope.turn_id)
        assert control is not None
        assert control.directive is LoopDirective.BREAK
        assert branch.poll_control() is None
        return True

    assert await run_in_turn(branch, model=None, invoke=body)


async def test_control_during_finalization_is_rejected() -> None:
    branch, _, session = observed_branch()
    verdicts: list[bool] = []
    session.observe(RunEnd, lambda s, _: verdicts.append(branch.control(LoopDirective.BREAK)))
    await run_in_turn(branch, model=None, invoke=_value)
    assert verdicts == [False]


async def test_a_directive_is_never_carried_into_the_next_turn() -> None:
    branch, _, _ = observed_branch()

    async def issue(scope: TurnScope) -> None:
        assert branch.control(LoopDirective.CANCEL)

    async def poll(scope: TurnScope) -> Any:
        return branch.poll_control()

    await run_in_turn(branch, model=None, invoke=issue)
    assert await run_in_turn(branch, model=None, invoke=poll) is None


async def test_cancel_directive_in_a_coroutine_turn_is_run_end_and_reraised() -> None:
    branch, rec, _ = observed_branch()

    async def body(scope: TurnScope) -> None:
        branch.control(LoopDirective.CANCEL)
        check_control(scope)

    with pytest.raises(StopStream):
        await run_in_turn(branch, model=None, invoke=body)
    assert rec.kinds() == ["RunStart", "RunEnd"]


# -- model snapshot and report -----------------------------------------------------------------
async def test_call_specific_model_never_touches_the_branch_model() -> None:
    branch, _, _ = observed_branch()
    configured = branch.chat_model
    override = echo_model()

    async def body(scope: TurnScope) -> Any:
        assert scope.context.model is override
        raise RuntimeError("provider failed")

    with pytest.raises(RuntimeError):
        await run_in_turn(branch, model=override, invoke=body)
    assert branch.chat_model is configured


async def test_a_waiting_turn_sees_configuration_as_it_is_when_it_starts() -> None:
    branch, _, _ = observed_branch()
    later = echo_model()
    entered, release = anyio.Event(), anyio.Event()
    models: list[Any] = []

    async def holder(scope: TurnScope) -> None:
        entered.set()
        await release.wait()

    async def record(scope: TurnScope) -> None:
        models.append(scope.context.model)

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: run_in_turn(branch, model=None, invoke=holder))
        await entered.wait()
        tg.start_soon(lambda: run_in_turn(branch, model=None, invoke=record))
        while branch._turn_lock.tasks_waiting == 0:
            await checkpoint()
        branch.chat_model = later
        release.set()
    assert models == [later]


async def _one_item(scope: TurnScope) -> AsyncIterator[TurnScope]:
    yield scope


async def _opened_by(driver: str, branch: Branch, options: dict[str, Any]) -> TurnScope:
    if driver == "run_in_turn":
        return await run_in_turn(branch, model=None, invoke=_scope_of, **options)
    async with stream_in_turn(branch, model=None, invoke=_one_item, **options) as items:
        [scope] = [item async for item in items]
    return scope


async def _scope_of(scope: TurnScope) -> TurnScope:
    return scope


@pytest.mark.parametrize("driver", ["run_in_turn", "stream_in_turn"])
async def test_both_drivers_take_the_same_turn_options(driver: str) -> None:
    chat, parse = echo_model(), echo_model()
    branch = Branch(chat_model=chat, parse_model=parse)

    defaults = await _opened_by(driver, branch, {})
    assert defaults.context.model is chat
    assert defaults.context.operation is None
    assert_idle(branch)

    chosen = await _opened_by(driver, branch, {"role": "parse", "operation": "check"})
    assert chosen.context.model is parse
    assert chosen.context.operation == "check"

    async def refused(scope: TurnScope) -> str:
        with pytest.raises(ConfigurationError, match="without a task group"):
            scope.start_soon(checkpoint)
        return "refused"

    async def refused_item(scope: TurnScope) -> AsyncIterator[str]:
        yield await refused(scope)

    if driver == "run_in_turn":
        assert await run_in_turn(branch, model=None, invoke=refused, nests=False) == "refused"
    else:
        stream = stream_in_turn(branch, model=None, invoke=refused_item, nests=False)
        assert [item async for item in stream] == ["refused"]
    assert_idle(branch)


async def test_an_unknown_turn_option_is_refused_by_both_drivers() -> None:
    branch = Branch(chat_model=echo_model())
    with pytest.raises(
        TypeError, match=r"run_in_turn\(\): got an unexpected keyword argument 'nest' "
    ):
        await run_in_turn(branch, model=None, invoke=_value, nest=False)  # type: ignore[call-arg]
    with pytest.raises(
        TypeError, match=r"stream_in_turn\(\): got an unexpected keyword argument 'nest' "
    ):
        stream_in_turn(branch, model=None, invoke=_one_item, nest=False)  # type: ignore[call-arg]
    assert_idle(branch)


async def test_missing_model_fails_before_the_turn_starts() -> None:
    from lionagi.errors import ConfigurationError
    from lionagi.session.branch import Branch

    branch = Branch()
    with pytest.raises(ConfigurationError, match="chat model"):
        await run_in_turn(branch, model=None, invoke=_value)
    assert_idle(branch)


async def test_last_context_report_follows_the_last_terminal_turn() -> None:
    from lionagi.protocols.context_providers import ProviderReport

    branch, _, _ = observed_branch()
    report = ProviderReport(blocks=("b",), fired=("p",))
    seen_during: list[Any] = []

    async def with_report(scope: TurnScope) -> None:
        scope.context.provider_report = report
        seen_during.append(branch.last_context_report)

    async def without(scope: TurnScope) -> None:
        pass

    await run_in_turn(branch, model=None, invoke=with_report)
    assert seen_during == [None]  # a running turn never publishes a partial report
    assert branch.last_context_report is report
    await run_in_turn(branch, model=None, invoke=without)
    assert branch.last_context_report is None


# -- scale -----------------------------------------------------------------------------------------
async def test_many_branches_do_not_serialize_each_other() -> None:
    n = 1000
    inside = 0
    all_inside = anyio.Event()
    model = echo_model()
    from lionagi.session.branch import Branch

    branches = [Branch(chat_model=model) for _ in range(n)]

    async def body(scope: TurnScope) -> None:
        nonlocal inside
        inside += 1
        if inside == n:
            all_inside.set()
        await all_inside.wait()  # would never finish if turns of different branches serialized

    async with anyio.create_task_group() as tg:
        for branch in branches:
            tg.start_soon(functools.partial(run_in_turn, branch, model=None, invoke=body))
    assert inside == n
    for branch in branches:
        assert_idle(branch)


def test_one_branch_across_event_loops_and_backends() -> None:
    branch, rec, _ = observed_branch(system=System(content="s"))

    async def turn() -> str:
        return await run_in_turn(branch, model=None, invoke=_value)

    assert anyio.run(turn, backend="asyncio") == "value"
    assert anyio.run(turn, backend="trio") == "value"
    assert anyio.run(turn, backend="asyncio") == "value"
    assert len(rec.starts()) == 3
    assert_one_terminal_per_start(rec)


async def test_model_override_with_function_model_is_in_context() -> None:
    branch, _, _ = observed_branch()
    override = FunctionModel(lambda messages, **options: "override")

    async def body(scope: TurnScope) -> str:
        assert scope.context.model is not None
        response = await scope.context.model.invoke([Instruction(instruction="hi")])
        return response.text

    assert await run_in_turn(branch, model=override, invoke=body) == "override"


async def test_consumer_calls_between_stream_items_join_the_stream_turn() -> None:
    branch, rec, _ = observed_branch()

    async def body(scope: TurnScope) -> AsyncIterator[int]:
        for i in range(2):
            yield i

    async def inner(scope: TurnScope) -> Any:
        branch.msgs.add(Instruction(instruction="from the consumer"))
        return scope.turn_id, scope.owns_lifecycle

    results = [
        await run_in_turn(branch, model=None, invoke=inner)
        async for _ in stream_in_turn(branch, model=None, invoke=body)
    ]
    turn_id = rec.starts()[0].turn_id
    assert results == [(turn_id, False), (turn_id, False)]
    assert rec.kinds() == ["RunStart", "MessageAdded", "MessageAdded", "RunEnd"]
    assert all(m.turn_id == turn_id for m in rec.messages())
    assert_idle(branch)


async def test_a_message_from_nested_work_shutting_down_is_signalled_before_the_terminal() -> None:
    branch, rec, _ = observed_branch()

    async def late_child() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            branch.msgs.add(Instruction(instruction="written while cancelled"))

    async def body(scope: TurnScope) -> None:
        scope.start_soon(late_child)
        await checkpoint()  # let the child start

    await run_in_turn(branch, model=None, invoke=body)
    turn_id = rec.starts()[0].turn_id
    assert rec.kinds() == ["RunStart", "MessageAdded", "RunEnd"]
    assert rec.messages()[0].turn_id == turn_id


# -- turns without a task group -----------------------------------------------------------------
def _group_probe(branch_ref: list[Any], seen: list[bool]) -> FunctionModel:
    """A model that records whether the turn calling it has a task group for nested work."""

    def reply(messages: Any, **options: Any) -> str:
        context = branch_ref[0]._active_turn_context
        assert context is not None
        assert context.step_group is not None
        seen.append(context.step_group.group is not None)
        return "ok"

    return FunctionModel(reply)


async def _block(branch: Any, instruction: Any) -> str:
    return "block"


@pytest.mark.parametrize("setup", ["plain", "observer", "provider"])
async def test_chat_runs_without_a_task_group_observed_or_not(setup: str) -> None:
    """chat, chat_and_record and communicate start no nested work, so they need no task group,
    also when an observer's handlers or a context provider run user code inside the turn."""
    branch_ref: list[Any] = []
    seen: list[bool] = []
    model = _group_probe(branch_ref, seen)
    if setup == "observer":
        branch = Session().new_branch(chat_model=model)
    else:
        branch = Branch(chat_model=model)
    if setup == "provider":
        branch.providers.register(_block, name="p")
    branch_ref.append(branch)
    await branch.chat("a")
    await branch.chat_and_record("b")
    await branch.communicate("c")
    assert seen == [False] * 3
    assert_idle(branch)


async def test_a_handler_that_starts_nested_work_in_a_turn_without_a_task_group_is_refused() -> (
    None
):
    """User code inside an operation that starts no nested work (here a RunStart handler) gets
    a clear ConfigurationError from start_soon; the turn itself ends normally."""
    session = Session()
    branch = session.new_branch(chat_model=echo_model())
    refused: list[str] = []
    ends: list[Any] = []

    def on_start(signal: RunStart, _session: Any) -> None:
        scope = current_scope(branch)
        assert scope is not None
        with pytest.raises(ConfigurationError, match="without a task group") as caught:
            scope.start_soon(checkpoint)
        refused.append(str(caught.value))

    session.observe(RunStart, on_start)
    session.observe(RunEnd, lambda signal, _session: ends.append(signal))
    await branch.chat_and_record("a")
    assert len(refused) == 1
    assert "(chat_and_record)" in refused[0]
    assert "task group you own" in refused[0]
    assert len(ends) == 1
    assert len(branch.msgs) == 2
    assert_idle(branch)


async def test_a_custom_turn_body_keeps_its_task_group() -> None:
    branch = Branch(chat_model=echo_model())

    async def body(scope: TurnScope) -> str:
        handle = scope.start_soon(_value, scope)
        return str(await handle.wait())

    assert await run_in_turn(branch, model=None, invoke=body) == "value"
    assert_idle(branch)


async def test_nested_work_in_a_turn_without_a_task_group_is_refused_clearly() -> None:
    branch = Branch()
    refused: list[str] = []

    def reply(messages: Any, **options: Any) -> str:
        scope = current_scope(branch)
        assert scope is not None
        with pytest.raises(ConfigurationError, match="without a task group") as caught:
            scope.start_soon(checkpoint)
        refused.append(str(caught.value))
        return "ok"

    branch.chat_model = FunctionModel(reply)
    assert await branch.chat("a") == "ok"
    assert len(refused) == 1
    assert "(chat)" in refused[0]
    assert_idle(branch)


# -- stream steps: the scopes each item opens ------------------------------------------------
class _OpenedScopes:
    """Counts the cancel scopes and task groups the turn driver opens (through ``anyio``, or a
    native scope through ``lionagi._compat``, the interrupt's guards included)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.scopes = 0
        self.groups = 0
        real_scope, real_group = anyio.CancelScope, anyio.create_task_group
        real_native = turn_module.new_cancel_scope  # type: ignore[attr-defined]

        def scope(*args: Any, **kwargs: Any) -> anyio.CancelScope:
            self.scopes += 1
            return real_scope(*args, **kwargs)

        def native() -> Any:
            self.scopes += 1
            return real_native()

        monkeypatch.setattr(turn_module, "new_cancel_scope", native)
        monkeypatch.setattr(interrupt_module, "new_cancel_scope", native)

        def group() -> anyio.abc.TaskGroup:
            self.groups += 1
            return real_group()

        monkeypatch.setattr(anyio, "CancelScope", scope)
        monkeypatch.setattr(anyio, "create_task_group", group)


def _pieces_model(count: int) -> FunctionModel:
    return FunctionModel(lambda messages, **options: "", stream=lambda m, **o: ["x"] * count)


LIVE_OPERATIONS = ["stream", "operate_stream", "communicate_stream"]


def _live(branch: Branch, operation: str) -> TurnStream[Any]:
    if operation == "operate_stream":
        return branch.operate_stream(instruction="go")
    if operation == "communicate_stream":
        return branch.communicate_stream("go")
    return branch.stream("go")


async def _stream_deltas(branch: Branch, operation: str = "stream") -> int:
    async with _live(branch, operation) as events:
        return sum([1 async for _ in events])


@pytest.mark.parametrize("operation", LIVE_OPERATIONS)
@pytest.mark.parametrize("setup", ["plain", "observer"])
async def test_an_item_of_a_library_stream_opens_no_cancel_scope_and_no_task_group(
    setup: str, operation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live event is one step of the stream turn. After the first, a step of Branch.stream
    (and of the live operate and communicate) opens neither a task group nor a cancel scope,
    observed or not: the body's waits register the scopes they have (the model's per-chunk
    timeout scope) with the turn's interrupt, which aclose() from another task cancels
    (tests/operations/test_stream_interrupt.py)."""
    counts: dict[int, tuple[int, int, int]] = {}
    for chunks in (4, 12):
        branch = Session().new_branch() if setup == "observer" else Branch()
        branch.chat_model = _pieces_model(chunks)
        opened = _OpenedScopes(monkeypatch)
        items = await _stream_deltas(branch, operation)
        counts[chunks] = (items, opened.scopes, opened.groups)
        monkeypatch.undo()
        assert_idle(branch)
    (items_a, scopes_a, groups_a), (items_b, scopes_b, groups_b) = counts[4], counts[12]
    extra_items = items_b - items_a
    assert extra_items == 8
    assert (scopes_b - scopes_a, groups_b - groups_a) == (0, 0)


@pytest.mark.parametrize("operation", LIVE_OPERATIONS)
@pytest.mark.parametrize("setup", ["plain", "observer"])
async def test_the_first_item_of_a_library_stream_opens_no_cancel_scope_of_its_own(
    setup: str, operation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first live event's step (the turn's start, RunStart, opening the model call) opens
    no cancel scope either: its waits are guarded where they are (the first chunk's timeout
    scope here; a context provider, a RunStart handler, a retry, a rate or concurrency limit
    each guard their own wait: tests/operations/test_stream_interrupt.py)."""
    branch = Session().new_branch() if setup == "observer" else Branch()
    branch.chat_model = _pieces_model(4)
    opened = _OpenedScopes(monkeypatch)
    async with _live(branch, operation) as events:
        first = await anext(events)
        at_first = (opened.scopes, opened.groups)
    monkeypatch.undo()
    assert isinstance(first, TextDeltaEvent)
    assert at_first == (0, 0)
    assert_idle(branch)


async def _opened_by_six_more_items(
    monkeypatch: pytest.MonkeyPatch,
    body_of: Callable[[int], Callable[[TurnScope], AsyncIterator[int]]],
    nests: bool,
) -> tuple[int, int]:
    """The cancel scopes and task groups a stream turn of ``body_of(9)`` opens beyond one of
    ``body_of(3)``."""
    counts = []
    for items in (3, 9):
        branch = Branch(chat_model=echo_model())
        opened = _OpenedScopes(monkeypatch)
        stream = stream_in_turn(branch, model=None, invoke=body_of(items), nests=nests)
        got = [item async for item in stream]
        counts.append((len(got), opened.scopes, opened.groups))
        monkeypatch.undo()
        assert_idle(branch)
    (items_a, scopes_a, groups_a), (items_b, scopes_b, groups_b) = counts
    assert items_b - items_a == 6
    return scopes_b - scopes_a, groups_b - groups_a


async def test_an_ungrouped_custom_stream_body_keeps_one_cancel_scope_per_item(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A body of your own that starts no nested work (nests=False) may wait anywhere, so each
    of its steps keeps the one cancel scope aclose() from another task cancels."""

    def body_of(items: int) -> Callable[[TurnScope], AsyncIterator[int]]:
        async def body(scope: TurnScope) -> AsyncIterator[int]:
            for index in range(items):
                await checkpoint()
                yield index

        return body

    assert await _opened_by_six_more_items(monkeypatch, body_of, nests=False) == (6, 0)


async def test_a_custom_stream_body_keeps_a_task_group_per_item_and_no_extra_scope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stream body of your own may start nested work in any item's step (here the first's):
    each step has a task group, whose scope is the one aclose() from another task cancels."""

    def body_of(items: int) -> Callable[[TurnScope], AsyncIterator[int]]:
        async def body(scope: TurnScope) -> AsyncIterator[int]:
            handle = scope.start_soon(_value, scope)
            assert await handle.wait() == "value"
            for index in range(items):
                yield index

        return body

    assert await _opened_by_six_more_items(monkeypatch, body_of, nests=True) == (0, 6)


async def test_aclose_from_another_task_stops_a_library_stream_waiting_for_the_model() -> None:
    """The step without a task group keeps a cancel scope of its own: closing the stream from
    another task while the consumer waits inside an item (here for the model's next chunk)
    cancels that item, closes the model stream and ends the turn with RunEnd."""
    waiting = anyio.Event()
    closed: list[str] = []

    async def pieces(messages: Any, **options: Any) -> AsyncIterator[str]:
        try:
            yield "first"
            waiting.set()
            await anyio.sleep_forever()
            yield "never"  # pragma: no cover
        finally:
            closed.append("model stream closed")

    branch = Branch(chat_model=FunctionModel(lambda messages, **options: "", stream=pieces))
    got: list[Any] = []
    stream = branch.stream("go")
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:

            async def consume() -> None:
                got.extend([event async for event in stream])

            group.start_soon(consume)
            await waiting.wait()
            step = branch._active_turn_context.step_group  # type: ignore[union-attr]
            assert step is not None
            assert step.group is None
            assert step.cancel_scope is not None
            await stream.aclose()
    assert [type(event).__name__ for event in got] == ["TextDeltaEvent"]
    assert closed == ["model stream closed"]
    assert len(branch.msgs) == 0  # no half reply, and no instruction without one
    assert_idle(branch)
