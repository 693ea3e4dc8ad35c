"""The one-frame path of a turn nobody observes whose body starts no nested work.

``run_in_turn`` runs such a turn (the Branch has no observer when it starts, the operation
passes ``nests=False``) without the general driver's step machinery. These tests pin which
turns take it, and that it keeps the general path's guarantees: FIFO, refused ``start_soon``,
joined calls cancelled and then stale, an error re-raised unchanged, and a Branch left idle by
a cancellation at every point of the turn.
"""

from __future__ import annotations

import functools
from typing import Any

import anyio
import pytest
from anyio.lowlevel import checkpoint

from lionagi.errors import ConfigurationError
from lionagi.operations import turn as turn_module
from lionagi.operations.turn import TurnFinalizingError, _active_turn_var, run_in_turn
from lionagi.operations.types import TurnScope
from lionagi.protocols.messages import AssistantResponse, Instruction
from lionagi.session.branch import Branch
from lionagi.session.session import Session
from lionagi.session.signal import RunEnd, RunFailed, Signal
from lionagi.testing import FunctionModel
from tests.helpers import (
    Recorder,
    SerialBodies,
    assert_idle,
    assert_one_terminal_per_start,
    echo_model,
    observed_branch,
)


async def _value(scope: TurnScope) -> str:
    return "value"


@pytest.fixture
def quick_turns(monkeypatch: pytest.MonkeyPatch) -> list[Branch]:
    """The Branches of the turns that took the one-frame path, in order."""
    taken: list[Branch] = []
    original = turn_module._run_one_frame

    async def spy(branch: Branch, *args: Any) -> Any:
        taken.append(branch)
        return await original(branch, *args)

    monkeypatch.setattr(turn_module, "_run_one_frame", spy)
    return taken


async def test_only_turns_that_start_no_nested_work_take_the_one_frame_path(
    quick_turns: list[Branch],
) -> None:
    plain = Branch(chat_model=echo_model())
    assert await run_in_turn(plain, model=None, invoke=_value, nests=False) == "value"
    assert quick_turns == [plain]

    # a body that may nest: the general path
    assert await run_in_turn(plain, model=None, invoke=_value) == "value"
    assert await run_in_turn(plain, model=None, invoke=_value, nests=True) == "value"
    assert quick_turns == [plain]
    # observed or not, a body that starts no nested work: the one-frame path
    observed, recorder, _ = observed_branch()
    assert await run_in_turn(observed, model=None, invoke=_value, nests=False) == "value"
    assert recorder.kinds() == ["RunStart", "RunEnd"]
    assert quick_turns == [plain, observed]
    quick_turns.remove(observed)

    # a nested call inside a one-frame turn shares it (no second turn, no lock wait)
    async def outer(scope: TurnScope) -> TurnScope:
        async def inner(inner_scope: TurnScope) -> TurnScope:
            return inner_scope

        inner_scope = await run_in_turn(plain, model=None, invoke=inner, nests=False)
        assert inner_scope.context is scope.context
        assert not inner_scope.owns_lifecycle
        return scope

    scope = await run_in_turn(plain, model=None, invoke=outer, nests=False)
    assert scope.owns_lifecycle
    assert scope.context.phase == "closed"
    assert quick_turns == [plain, plain]

    # the library's operations that start no nested work take it
    assert await plain.chat_and_record("hi") == "ok"
    assert await plain.chat("hi") == "ok"
    assert quick_turns == [plain] * 4
    assert_idle(plain)


async def test_a_one_frame_turn_refuses_start_soon_and_reraises_the_bodys_error() -> None:
    branch = Branch(chat_model=echo_model())

    async def body(scope: TurnScope) -> None:
        binding = _active_turn_var.get()
        assert binding is not None
        assert binding.scope is scope
        with pytest.raises(ConfigurationError, match="without a task group"):
            scope.start_soon(checkpoint)
        raise ValueError("from the body")

    with pytest.raises(ValueError, match="from the body"):
        await run_in_turn(branch, model=None, invoke=body, nests=False)
    assert_idle(branch)


@pytest.mark.parametrize("observed", [True, False], ids=["general-turn", "one-frame-turn"])
async def test_many_callers_on_one_branch_run_in_fifo_order_without_overlap(
    observed: bool, quick_turns: list[Branch]
) -> None:
    """Turns waiting for one Branch run one at a time, in the order they asked, on the general
    turn (an observed Branch) and on the one-frame turn (unobserved, ``nests=False``)."""
    if observed:
        branch, rec, _ = observed_branch()
    else:
        branch, rec = Branch(chat_model=echo_model()), None
    turn = functools.partial(run_in_turn, branch, model=None, nests=observed)
    n = 1000
    bodies = SerialBodies()
    entered, release = anyio.Event(), anyio.Event()

    async def holder(scope: TurnScope) -> None:
        entered.set()
        await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(turn, invoke=holder))
        await entered.wait()
        for i in range(n):
            tg.start_soon(functools.partial(turn, invoke=bodies.body(i)))
            while branch._turn_lock.tasks_waiting < i + 1:
                await checkpoint()
        release.set()
    assert bodies.order == list(range(n))
    if rec is None:
        assert len(quick_turns) == n + 1
    else:
        assert quick_turns == []
        assert len(rec.starts()) == n + 1
        assert_one_terminal_per_start(rec)
    assert_idle(branch)


@pytest.mark.parametrize("observed", [True, False], ids=["general-turn", "one-frame-turn"])
async def test_caller_owned_task_with_inherited_binding_is_cancelled_then_stale(
    observed: bool, quick_turns: list[Branch]
) -> None:
    """A task started in the caller's task group inside a turn inherits the binding: its call
    joins the turn (registered as nested work), is cancelled when the body returns, and after
    the turn its call is a turn of its own. The same on the general turn (an observed Branch)
    and on the one-frame turn (unobserved, ``nests=False``)."""
    if observed:
        branch, rec, _ = observed_branch()
    else:
        branch, rec = Branch(chat_model=echo_model()), None
    turn = functools.partial(run_in_turn, branch, model=None, nests=observed)
    in_nested, turn_over = anyio.Event(), anyio.Event()
    outcomes: list[Any] = []

    async def hang(scope: TurnScope) -> None:
        in_nested.set()
        await anyio.sleep_forever()

    async def straggler() -> None:
        try:
            await turn(invoke=hang)
        except TurnFinalizingError as exc:
            outcomes.append(exc)
        await turn_over.wait()
        # the binding it inherited is stale now: this is a new top-level turn
        outcomes.append(await turn(invoke=_value))

    async with anyio.create_task_group() as caller_group:

        async def body(scope: TurnScope) -> str:
            caller_group.start_soon(straggler)
            await in_nested.wait()
            return "body"

        assert await turn(invoke=body) == "body"
        assert_idle(branch)
        turn_over.set()
    assert isinstance(outcomes[0], TurnFinalizingError)
    assert outcomes[1] == "value"
    if rec is None:
        assert quick_turns == [branch, branch]
    else:
        assert quick_turns == []
        starts = rec.starts()
        assert len(starts) == 2
        assert starts[0].turn_id != starts[1].turn_id
        assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_an_observer_that_appears_during_a_one_frame_turn_sees_its_messages_only() -> None:
    """The turn started unobserved: it emits no lifecycle signal (no terminal without its
    start), but the message signals an observer that arrived meanwhile asked for are delivered
    before the Branch is free again."""
    branch = Branch(chat_model=echo_model())
    session = Session()
    recorder = Recorder()
    session.observe(Signal, recorder)

    async def body(scope: TurnScope) -> str:
        session.include_branches(branch)
        branch.msgs.add(Instruction(instruction="q"))
        return "done"

    assert await run_in_turn(branch, model=None, invoke=body, nests=False) == "done"
    assert recorder.kinds() == ["MessageAdded"]
    assert_idle(branch)
    # the next turn starts observed: the general path, with its lifecycle
    assert await run_in_turn(branch, model=None, invoke=_value, nests=False) == "value"
    assert recorder.kinds() == ["MessageAdded", "RunStart", "RunEnd"]


async def _slow_reply(messages: Any, **options: Any) -> str:
    for _ in range(3):
        await checkpoint()
    return "reply"


async def test_cancellation_at_every_point_of_a_one_frame_turn_leaves_the_branch_idle(
    quick_turns: list[Branch],
) -> None:
    """Cancel the caller after k scheduling points, k = 0, 1, ... until a turn completes: the
    turn waits for the lock behind a holder, and a caller-owned task joins it; whatever the
    point, the Branch is idle, holds only whole exchanges and serves the next turn."""
    seen = {"before_start": 0, "after_start": 0}
    for k in range(400):
        branch = Branch(chat_model=FunctionModel(_slow_reply))
        started: list[int] = []
        outcome: list[str] = []
        entered = anyio.Event()

        async def holder(scope: TurnScope, ready: anyio.Event = entered) -> None:
            ready.set()
            for _ in range(3):
                await checkpoint()

        async def joiner(scope: TurnScope) -> None:
            await anyio.sleep_forever()

        async def join(b: Branch = branch) -> None:
            with pytest.raises(TurnFinalizingError):  # the turn ended while it was joined
                await run_in_turn(b, model=None, invoke=joiner, nests=False)

        async def call(
            b: Branch = branch, out: list[str] = outcome, begun: list[int] = started
        ) -> None:
            async with anyio.create_task_group() as caller_group:

                async def body(scope: TurnScope) -> str:
                    begun.append(1)
                    caller_group.start_soon(join)
                    await checkpoint()
                    return await b.chat_and_record("q")

                try:
                    out.append(await run_in_turn(b, model=None, invoke=body, nests=False))
                finally:
                    caller_group.cancel_scope.cancel()

        with anyio.CancelScope() as cancel:
            async with anyio.create_task_group() as tg:
                tg.start_soon(functools.partial(run_in_turn, branch, model=None, invoke=holder))
                await entered.wait()
                tg.start_soon(call)
                for _ in range(k):
                    await checkpoint()
                cancel.cancel()
        assert_idle(branch)
        assert _active_turn_var.get() is None
        messages = list(branch.msgs)
        assert len(messages) % 2 == 0
        for i, message in enumerate(messages):  # only whole exchanges
            assert isinstance(message, AssistantResponse if i % 2 else Instruction)
        assert await branch.chat_and_record("next") == "reply"
        if outcome:
            assert outcome == ["reply"]
            assert seen["before_start"] >= 1
            assert seen["after_start"] >= 3
            # the call's turn and the next one (the holder's may nest: general path)
            assert quick_turns.count(branch) == 2
            return
        seen["after_start" if started else "before_start"] += 1
    raise AssertionError("the turn never completed within 400 scheduling points")


async def test_the_observer_a_turn_starts_with_is_told_of_its_end() -> None:
    """A Branch leaving its Session during a turn still ends the turn it was observed starting
    (one terminal per start); a Branch joining a Session during a turn that started unobserved
    gets no terminal without its start. Both on the general path (a body that may nest)."""
    branch, recorder, session = observed_branch()

    async def leave(scope: TurnScope) -> str:
        session.remove_branch(branch)
        return "left"

    assert await run_in_turn(branch, model=None, invoke=leave) == "left"
    assert recorder.kinds() == ["RunStart", "RunEnd"]
    assert_idle(branch)

    async def join(scope: TurnScope) -> str:
        session.include_branches(branch)
        return "joined"

    assert await run_in_turn(branch, model=None, invoke=join) == "joined"
    assert recorder.kinds() == ["RunStart", "RunEnd"]
    assert await run_in_turn(branch, model=None, invoke=_value) == "value"
    assert recorder.kinds() == ["RunStart", "RunEnd", "RunStart", "RunEnd"]
    assert_idle(branch)


async def test_a_finished_turn_is_not_kept_alive_by_its_model_calls_timeout() -> None:
    # the model call's timeout scope schedules a timer on asyncio; the cancelled timer stays in
    # the loop's queue with the context it was scheduled from, which holds the turn's binding.
    # Fails on asyncio with the timeout entered from the turn's context (anyio.move_on_after).
    import gc
    import weakref

    contexts: list[weakref.ref[Any]] = []

    async def reply(messages: Any, **options: Any) -> str:
        binding = _active_turn_var.get()
        assert binding is not None
        # the context is slotted without weak references; its signal queue is its own
        contexts.append(weakref.ref(binding.scope.context.pending_signals))
        return "ok"

    branch = Branch(chat_model=FunctionModel(reply))
    await branch.chat_and_record("hi")
    observed, _, _ = observed_branch(chat_model=FunctionModel(reply))
    await observed.chat_and_record("hi")
    gc.collect()
    assert len(contexts) == 2
    assert [ref() for ref in contexts] == [None, None]
    assert len(branch.messages) == 2  # the turn itself went as usual


async def test_an_observed_one_frame_turn_signals_in_order_with_one_terminal(
    quick_turns: list[Branch],
) -> None:
    # RunStart before the body, every MessageAdded before the terminal, one terminal with the
    # turn's id; a failing body ends with RunFailed carrying its error, re-raised unchanged
    branch, recorder, _ = observed_branch()
    assert await branch.chat_and_record("hi") == "ok"
    assert recorder.kinds() == ["RunStart", "MessageAdded", "MessageAdded", "RunEnd"]
    assert len({turn_id for _, turn_id in recorder.lifecycle()}) == 1
    assert quick_turns == [branch]

    async def failing(scope: TurnScope) -> None:
        assert recorder.kinds()[-1] == "RunStart"  # sent before the body runs
        raise ValueError("from the body")

    recorder.signals.clear()
    with pytest.raises(ValueError, match="from the body"):
        await run_in_turn(branch, model=None, invoke=failing, nests=False)
    assert recorder.kinds() == ["RunStart", "RunFailed"]
    (failed,) = recorder.terminals()
    assert isinstance(failed, RunFailed)
    assert isinstance(failed.data, ValueError)
    assert quick_turns == [branch, branch]
    assert_idle(branch)


async def test_a_terminal_handler_of_a_one_frame_turn_sees_it_finalizing() -> None:
    # the binding is set while the terminal is sent: a call on the Branch from the handler
    # is the finalizing turn's (TurnFinalizingError), not a new turn that would wait forever
    branch, _, session = observed_branch()
    refused: list[BaseException] = []

    async def on_end(signal: Signal, _session: Any) -> None:
        try:
            await branch.chat("again")
        except TurnFinalizingError as exc:
            refused.append(exc)

    session.observe(RunEnd, on_end)
    assert await branch.chat_and_record("hi") == "ok"
    assert len(refused) == 1
    assert_idle(branch)
