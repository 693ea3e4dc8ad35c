"""Every model call of every operation goes through the turn scope's one path
(:meth:`TurnScope.call_model` or its streamed form), where control, context providers, usage
limits, retry signals and usage counting live."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from lionagi import Branch
from lionagi.operations.types import TurnScope
from lionagi.protocols.messages import Message
from lionagi.testing import FunctionModel

pytestmark = pytest.mark.anyio


class Answer(BaseModel):
    value: int


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _reply(messages: Sequence[Message], **options: Any) -> str:
    schema = options.get("response_format") or {}
    if schema.get("title") == "ReActAnalysis":
        return json.dumps({"analysis": "enough", "extension_needed": False})
    return '{"value": 1}' if schema else "ok"


async def _drain(stream: Any) -> None:
    async with stream:
        async for _ in stream:
            pass


CALLS: dict[str, Callable[[Branch], Any]] = {
    "chat": lambda b: b.chat("x"),
    "chat_and_record": lambda b: b.chat_and_record("x"),
    "communicate": lambda b: b.communicate("x", response_format=Answer),
    "interpret": lambda b: b.interpret("x"),
    "parse": lambda b: b.parse("no json here", response_format=Answer, max_retries=1),
    "operate": lambda b: b.operate(instruction="x", response_format=Answer),
    "operate_stream": lambda b: _drain(b.operate_stream(instruction="x", response_format=Answer)),
    "ReAct": lambda b: b.ReAct("x"),
    "ReActStream": lambda b: _drain(b.ReActStream("x")),
    "ReActEvents": lambda b: _drain(b.ReActEvents("x")),
    "run": lambda b: _drain(b.run("x")),
    "stream": lambda b: _drain(b.stream("x")),
}


@pytest.mark.parametrize("op", CALLS)
async def test_every_model_call_goes_through_the_turn_scope(
    op: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[int] = []
    through_scope: list[str] = []
    call_model, stream_model = TurnScope.call_model, TurnScope.stream_model

    async def counted_call(self: TurnScope, *args: Any, **kwargs: Any) -> Any:
        through_scope.append("call")
        return await call_model(self, *args, **kwargs)

    async def counted_stream(self: TurnScope, *args: Any, **kwargs: Any) -> Any:
        through_scope.append("stream")
        return await stream_model(self, *args, **kwargs)

    monkeypatch.setattr(TurnScope, "call_model", counted_call)
    monkeypatch.setattr(TurnScope, "stream_model", counted_stream)

    def reply(messages: Sequence[Message], **options: Any) -> str:
        sent.append(1)
        return _reply(messages, **options)

    await CALLS[op](Branch(chat_model=FunctionModel(reply), tools=[add]))
    assert sent  # the operation called the model
    assert len(through_scope) == len(sent)


@pytest.mark.parametrize("providers", [False, True], ids=["no-providers", "providers"])
async def test_a_stream_request_with_nothing_to_wait_for_is_prepared_at_once(
    providers: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streamed request with no message signal to deliver and no context providers is
    prepared without the preparation's coroutine (it would not suspend); with providers it is
    awaited, and they reach the request. Either way the request is the history plus the
    instruction."""
    from lionagi.operations import _model_call

    awaited: list[str] = []
    prepare_call = _model_call.prepare_call

    async def counted(*args: Any) -> Any:
        awaited.append("prepare_call")
        return await prepare_call(*args)

    monkeypatch.setattr(_model_call, "prepare_call", counted)
    sent: list[list[str]] = []

    def reply(messages: Sequence[Message], **options: Any) -> str:
        sent.append([type(m).__name__ for m in messages])
        return "ok"

    branch = Branch(system="sys", chat_model=FunctionModel(reply))
    if providers:

        async def note(branch: Any, instruction: Any) -> str:
            return "a note"

        branch.providers.register(note)
    await _drain(branch.stream("x"))
    assert awaited == (["prepare_call"] if providers else [])
    assert sent == [["System", "Instruction"]]
    assert (branch.last_context_report is not None) is providers
