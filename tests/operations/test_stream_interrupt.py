"""aclose() from another task stops a stream turn's consumer wherever it waits inside an item.

The steps of ``Branch.stream`` / ``Branch.run``, the first one included, open no cancel scope
of their own: each wait of the body registers the scope it waits in with the turn's interrupt
(the model's per-chunk timeout scope, or one opened for the opening of a model call, a tool
batch, the context providers or a ``RunStart`` handler). These tests park the consumer at each
kind of wait (the model's concurrency slot included), in a later item's step and in the first
item's, and close the stream from another task.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from lionagi import Branch, TextDeltaEvent
from lionagi.operations.turn import TurnStream
from lionagi.protocols.messages import ActionResponse, Instruction, Message, ToolCall
from lionagi.service.errors import ServerError
from lionagi.service.imodel import iModel
from lionagi.service.retry import RetryPolicy
from lionagi.session.signal import ModelRetry, RunEnd, RunStart, Signal
from lionagi.testing import FunctionModel, Recorder
from tests.helpers import assert_idle, observed_branch

WAITS = [
    "next chunk",
    "next chunk, no timeout",
    "tool",
    "opening the next model call",
    "rate limit",
    "retry backoff",
]


class _Park:
    """Where the consumer waits: ``reached`` is set there, ``left`` records that the wait was
    cancelled (its ``finally``)."""

    def __init__(self) -> None:
        self.reached = anyio.Event()
        self.left: list[str] = []

    async def wait_here(self, where: str) -> None:
        try:
            self.reached.set()
            await anyio.sleep_forever()
        finally:
            self.left.append(where)


class _ParkingClock:
    """A clock whose every sleep (a rate-limit or retry wait) parks the consumer."""

    def __init__(self, park: _Park, where: str) -> None:
        self.park, self.where = park, where

    def now(self) -> float:
        return anyio.current_time()

    async def sleep(self, seconds: float) -> None:
        await self.park.wait_here(self.where)


async def _close_when_parked(
    stream: TurnStream[Any],
    parked: Callable[[], Awaitable[object]],
    branch: Branch,
    recorder: Recorder,
) -> list[Any]:
    """Consume ``stream`` in a task; once ``parked()`` returns (the consumer waits), close it
    from this task, and check that the close stopped the consumer and ended the turn cleanly.
    The items the consumer got before it stopped."""
    got: list[Any] = []
    # a guard against hanging only: without the close the consumer would wait forever, and
    # this deadline would end it instead
    with anyio.move_on_after(10) as deadline:
        async with anyio.create_task_group() as group:

            async def consume() -> None:
                got.extend([event async for event in stream])

            group.start_soon(consume)
            await parked()
            await stream.aclose()
    assert not deadline.cancel_called  # the close stopped the consumer, not the deadline
    assert_idle(branch)
    [terminal] = recorder.terminals()
    assert isinstance(terminal, RunEnd)  # a close, not a failure
    return got


def _tool_model(second: Any) -> FunctionModel:
    """Asks for the ``slow`` tool, then answers with ``second(messages)``."""

    async def reply(messages: Sequence[Message], **options: Any) -> Any:
        if isinstance(messages[-1], ActionResponse):
            return await second(messages)
        return ToolCall(id="call_1", name="slow", arguments={})

    return FunctionModel(reply)


def _branch(wait: str, park: _Park) -> tuple[Branch, Recorder]:
    """A Branch whose stream turn, after its first item, parks at ``wait``."""

    async def slow() -> str:
        """A tool."""
        if wait == "tool":
            await park.wait_here(wait)
        return "done"

    async def answer(messages: Sequence[Message]) -> str:
        if wait == "opening the next model call":
            await park.wait_here(wait)
        return "answer"

    if wait.startswith("next chunk"):

        async def pieces(messages: Any, **options: Any) -> AsyncIterator[str]:
            yield "first"
            yield "second"
            await park.wait_here(wait)
            yield "never"  # pragma: no cover

        timeout = None if wait.endswith("no timeout") else 300.0
        branch, recorder, _ = observed_branch(
            chat_model=FunctionModel(lambda m, **o: "", stream=pieces, timeout=timeout)
        )
        return branch, recorder
    model = _tool_model(answer)
    chat_model: iModel = model
    if wait == "rate limit":
        clock = _ParkingClock(park, wait)
        chat_model = iModel(model.provider, limit_requests=1, interval=3600.0, clock=clock)
    elif wait == "retry backoff":
        calls = 0

        async def failing_then(messages: Sequence[Message], **options: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise ServerError("try again", provider="function", model="function")
            if calls == 1:
                return ToolCall(id="call_1", name="slow", arguments={})
            return "answer"  # pragma: no cover

        clock = _ParkingClock(park, wait)
        provider = FunctionModel(failing_then).provider
        chat_model = iModel(provider, retry=RetryPolicy(attempts=3), clock=clock)
    branch, recorder, _ = observed_branch(chat_model=chat_model, tools=[slow])
    return branch, recorder


@pytest.mark.parametrize("wait", WAITS)
async def test_aclose_from_another_task_stops_the_consumer_at_each_wait(wait: str) -> None:
    park = _Park()
    branch, recorder = _branch(wait, park)
    stream: TurnStream[Any] = branch.stream("go")
    got = await _close_when_parked(stream, park.reached.wait, branch, recorder)
    assert got  # the consumer was past its first item
    assert park.left == [wait]
    if wait.startswith("next chunk"):
        assert [type(e) for e in got] == [TextDeltaEvent, TextDeltaEvent]
        assert len(branch.msgs) == 0  # no half reply, and no instruction without one


FIRST_ITEM_WAITS = [
    "RunStart handler",
    "context provider",
    "first chunk",
    "retry backoff",
    "retry handler",
]


def _first_item_branch(wait: str, park: _Park) -> tuple[Branch, Recorder]:
    """A Branch whose stream turn parks at ``wait`` before its first item."""

    async def pieces(messages: Any, **options: Any) -> AsyncIterator[str]:
        if wait == "first chunk":
            await park.wait_here(wait)
        yield "answer"

    chat_model: iModel = FunctionModel(lambda m, **o: "", stream=pieces)
    if wait.startswith("retry"):

        async def failing(messages: Sequence[Message], **options: Any) -> Any:
            raise ServerError("try again", provider="function", model="function")

        provider = FunctionModel(failing).provider
        clock = _ParkingClock(park, wait)
        chat_model = iModel(provider, retry=RetryPolicy(attempts=3), clock=clock)
    branch, recorder, session = observed_branch(system="be brief", chat_model=chat_model)
    if wait in ("RunStart handler", "retry handler"):

        async def handler(signal: Signal, session: Any) -> None:
            await park.wait_here(wait)

        session.observe(RunStart if wait == "RunStart handler" else ModelRetry, handler)
    elif wait == "context provider":

        async def provider_block(branch: Any, instruction: Instruction) -> str:
            await park.wait_here(wait)
            return "never"  # pragma: no cover

        branch.providers.register(provider_block)
    return branch, recorder


@pytest.mark.parametrize("wait", FIRST_ITEM_WAITS)
async def test_aclose_from_another_task_stops_the_consumer_waiting_for_its_first_item(
    wait: str,
) -> None:
    park = _Park()
    branch, recorder = _first_item_branch(wait, park)
    stream: TurnStream[Any] = branch.stream("go")
    got = await _close_when_parked(stream, park.reached.wait, branch, recorder)
    assert got == []
    assert park.left == [wait]
    assert len(branch.msgs) == 1  # the system message: no instruction without its reply


async def test_aclose_from_another_task_stops_the_wait_for_a_concurrency_slot() -> None:
    """The model's one concurrency slot is held by another call: the stream's first item waits
    for it (a wait inside anyio's limiter, guarded by the model call), and a close from another
    task stops that wait; the slot is not leaked by the stopped wait."""
    park = _Park()

    async def pieces(messages: Any, **options: Any) -> AsyncIterator[str]:
        if not park.reached.is_set():  # the first call holds the slot until it is closed
            await park.wait_here("slot holder")
        yield "answer"

    model = FunctionModel(lambda m, **o: "", stream=pieces, concurrency_limit=1)
    branch, recorder, _ = observed_branch(chat_model=model)
    holder = model.stream([Instruction(instruction="hold the slot")])

    async def hold() -> None:
        await anext(holder)  # parked in the provider, holding the slot, until cancelled

    async with anyio.create_task_group() as holding:
        holding.start_soon(hold)
        await park.reached.wait()
        # every other task blocked: the consumer can only be waiting for the slot
        got = await _close_when_parked(
            branch.stream("go"), anyio.wait_all_tasks_blocked, branch, recorder
        )
        holding.cancel_scope.cancel()
    await holder.aclose()
    assert got == []
    assert len(model.calls) == 1  # the stream never reached the provider: it waited for the slot
    assert park.left == ["slot holder"]  # the holder stayed parked until it was cancelled
    assert len(branch.msgs) == 0
    with anyio.fail_after(10):  # the slot is free again: the stopped wait took none
        async with branch.stream("again") as events:
            assert [type(e) async for e in events if isinstance(e, TextDeltaEvent)] == [
                TextDeltaEvent
            ]


class _Answer(BaseModel):
    answer: str


LIVE_WAITS = [
    ("operate_stream", "next chunk"),
    ("operate_stream", "tool"),
    ("operate_stream", "parse model"),
    ("communicate_stream", "next chunk"),
    ("communicate_stream", "parse model"),
    ("ReActEvents", "next chunk"),
    ("ReActEvents", "tool"),
]


def _live_branch(wait: str, park: _Park) -> tuple[Branch, Recorder]:
    """A Branch whose live operation's turn, after its first item, parks at ``wait``."""

    async def slow() -> str:
        """A tool."""
        await park.wait_here(wait)
        return "done"  # pragma: no cover

    async def reformat(messages: Sequence[Message], **options: Any) -> str:
        await park.wait_here(wait)
        return '{"answer": "never"}'  # pragma: no cover

    async def pieces(messages: Any, **options: Any) -> AsyncIterator[str]:
        yield '{"answer": '
        yield '"x'
        await park.wait_here(wait)
        yield '"}'  # pragma: no cover

    async def never(messages: Sequence[Message]) -> str:
        return '{"answer": "never"}'  # pragma: no cover

    chat_model: iModel
    if wait == "next chunk":
        chat_model = FunctionModel(lambda m, **o: "", stream=pieces, timeout=300.0)
    elif wait == "tool":
        chat_model = _tool_model(never)
    else:
        chat_model = FunctionModel(lambda m, **o: "no JSON here")
    branch, recorder, _ = observed_branch(
        chat_model=chat_model, parse_model=FunctionModel(reformat), tools=[slow]
    )
    return branch, recorder


def _open_live(branch: Branch, operation: str) -> TurnStream[Any]:
    if operation == "operate_stream":
        return branch.operate_stream(instruction="go", response_format=_Answer, actions=True)
    if operation == "communicate_stream":
        return branch.communicate_stream("go", response_format=_Answer)
    return branch.ReActEvents("go")


@pytest.mark.parametrize(("operation", "wait"), LIVE_WAITS)
async def test_aclose_from_another_task_stops_a_live_operation_at_each_wait(
    operation: str, wait: str
) -> None:
    """operate_stream, communicate_stream and ReActEvents guard their waits as Branch.stream
    does: their steps open no cancel scope, and a close from another task still stops them."""
    park = _Park()
    branch, recorder = _live_branch(wait, park)
    stream = _open_live(branch, operation)
    got = await _close_when_parked(stream, park.reached.wait, branch, recorder)
    assert got  # the consumer was past its first item
    assert park.left == [wait]
