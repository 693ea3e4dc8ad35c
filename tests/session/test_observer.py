"""The observer bus: order, contained failures, and shielded delivery."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import anyio
import pytest
from anyio.lowlevel import checkpoint

from lionagi.session.observer import Observer
from lionagi.session.session import Session
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, RunSignal, RunStart
from lionagi.testing import FunctionModel


def _observer(events: list[str]) -> Observer:
    observer = Observer()

    async def slow(signal: Any, _: Any) -> None:
        for _ in range(3):
            await checkpoint()
        events.append("async handler finished")

    observer.subscribe(RunStart, slow)
    observer.subscribe(RunStart, lambda s, _: events.append("sync handler ran"))
    return observer


async def test_shielded_emit_finishes_async_handlers_in_a_cancelled_scope() -> None:
    events: list[str] = []
    observer = _observer(events)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await observer.emit(RunStart(branch_id=uuid4()), shielded=True)
        events.append("emit returned")
        await checkpoint()
    assert scope.cancelled_caught
    assert events == ["async handler finished", "sync handler ran", "emit returned"]


async def test_unshielded_emit_cancels_async_handlers_but_calls_every_handler() -> None:
    events: list[str] = []
    observer = _observer(events)
    with anyio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(anyio.get_cancelled_exc_class()):
            await observer.emit(RunStart(branch_id=uuid4()))
    assert events == ["sync handler ran"]


async def test_a_run_signal_handler_receives_each_turns_start_and_terminal() -> None:
    session = Session()
    seen: list[RunSignal] = []
    session.observe(RunSignal, lambda signal, _: seen.append(signal))
    branch = session.new_branch(chat_model=FunctionModel(lambda messages, **options: "ok"))
    assert await branch.chat("hi") == "ok"
    branch.chat_model = FunctionModel(lambda messages, **options: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        await branch.chat("again")
    assert [type(s) for s in seen] == [RunStart, RunEnd, RunStart, RunFailed]
    assert [s.operation for s in seen] == ["chat"] * 4
    assert seen[0].turn_id == seen[1].turn_id != seen[2].turn_id == seen[3].turn_id


async def test_send_runs_synchronous_handlers_at_once_and_leaves_the_rest_to_await(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[str] = []
    observer = Observer()

    async def later(name: str) -> None:
        await checkpoint()
        events.append(name)

    def broken(signal: Any, _: Any) -> None:
        raise RuntimeError("handler bug")

    observer.subscribe(RunStart, lambda s, _: events.append("first"))
    observer.subscribe(RunStart, broken)
    observer.subscribe(RunStart, lambda s, _: later("returned a coroutine"))
    observer.subscribe(RunStart, lambda s, _: events.append("after it"))
    rest = observer.send(RunStart(branch_id=uuid4()))
    # the handlers up to the first awaitable ran; the rest run, in order, when it is awaited
    assert events == ["first"]
    assert "handler bug" in caplog.text
    assert rest is not None
    await rest
    assert events == ["first", "returned a coroutine", "after it"]

    synchronous = Observer()
    synchronous.subscribe(RunStart, lambda s, _: events.append("sync only"))
    assert synchronous.send(RunStart(branch_id=uuid4())) is None
    assert events[-1] == "sync only"


async def test_an_observed_turn_with_synchronous_handlers_delivers_without_a_coroutine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RunStart, both MessageAdded and RunEnd reach synchronous handlers, in order and with the
    turn's id, and the message signals are delivered from the step itself: none of the coroutine
    paths kept for a handler's awaitable (or for the step's nested work) is entered."""
    from lionagi.operations import turn

    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a coroutine path was entered for synchronous handlers")

    for name in ("_step_cleanup", "_drain_signals", "_deliver_rest"):
        monkeypatch.setattr(turn, name, refused)
    session = Session()
    seen: list[Any] = []
    for kind in (RunStart, MessageAdded, RunEnd):
        session.observe(kind, lambda signal, _: seen.append(signal))
    branch = session.new_branch(chat_model=FunctionModel(lambda messages, **options: "ok"))
    assert await branch.chat_and_record("hi") == "ok"
    assert [signal.kind for signal in seen] == [
        "RunStart",
        "MessageAdded",
        "MessageAdded",
        "RunEnd",
    ]
    assert len({signal.turn_id for signal in seen}) == 1
    assert seen[0].turn_id is not None
    assert [signal.message for signal in seen[1:3]] == list(branch.messages)[-2:]
