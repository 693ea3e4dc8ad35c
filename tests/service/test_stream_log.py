"""A streamed model call made in a turn is logged by ``iModel`` itself, when its stream ends:
one record per attempt, and no iterator of the log's own around the chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from lionagi import Branch, TextDeltaEvent, _instrument
from lionagi.operations.turn import run_in_turn
from lionagi.operations.types import TurnScope
from lionagi.protocols.messages import Instruction, Message
from lionagi.service.errors import ServerError
from lionagi.service.imodel import iModel
from lionagi.service.retry import RetryPolicy
from lionagi.testing import FunctionModel, VirtualClock


async def test_a_streamed_call_logs_each_attempt_the_failed_one_with_its_error() -> None:
    calls = 0

    def fn(messages: Sequence[Message], **options: Any) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ServerError("busy", provider="function", model="function")
        return "second try"

    model = iModel(FunctionModel(fn).provider, retry=RetryPolicy(attempts=2), clock=VirtualClock())
    branch = Branch(chat_model=model)
    async with branch.stream("hi") as events:
        texts = [event.text async for event in events if isinstance(event, TextDeltaEvent)]
    assert texts == ["second try"]
    failed, answered = (log.to_dict() for log in branch.logs)
    assert failed["response"] is None
    assert "busy" in str(failed["error"])
    assert answered["response"]["text"] == "second try"
    assert answered["error"] is None


async def test_a_stream_closed_by_its_consumer_is_one_record_without_an_error() -> None:
    def pieces(messages: Any, **options: Any) -> list[str]:
        return ["one", "two", "three"]

    branch = Branch(chat_model=FunctionModel(lambda m, **o: "", stream=pieces))
    async with branch.stream("hi") as events:
        async for event in events:
            if isinstance(event, TextDeltaEvent):
                break
    [log] = branch.logs
    record = log.to_dict()
    assert (record["response"], record["error"]) == (None, None)


async def test_in_a_turn_the_model_stream_is_iterated_without_a_wrapper_of_the_logs() -> None:
    """With no tracer installed the chunks are the provider's own iterator, in a turn too (the
    turn's logs get their record from iModel when the stream ends)."""
    model = FunctionModel(lambda messages, **options: "ok")
    branch = Branch(chat_model=model)
    request = model.request([Instruction(instruction="hi")])

    async def chunks() -> AsyncIterator[Any]:
        yield None  # pragma: no cover

    async def body(scope: TurnScope) -> tuple[bool, bool]:
        provider_chunks = chunks()
        wrapped = _instrument.stream(model, request, provider_chunks)
        logged = _instrument.stream_log(model, request) is not None
        return wrapped is provider_chunks, logged

    assert _instrument.tracer is None
    assert await run_in_turn(branch, model=None, invoke=body) == (True, True)
