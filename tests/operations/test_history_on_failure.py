"""A failed call leaves the history clean: the instruction is committed with the first reply.

A turn that fails or is cancelled before any model reply commits nothing (its RunFailed still
names what happened); what was committed after a reply stays, tool calls and results included.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import pytest

from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    ToolCall,
)
from lionagi.service.errors import AuthenticationError, ServerError
from lionagi.service.types import ModelResponse
from lionagi.session.signal import RunEnd, RunFailed
from lionagi.testing import FunctionModel
from tests.helpers import assert_idle, observed_branch


def kinds(messages: Sequence[Message]) -> list[str]:
    return [type(m).__name__ for m in messages]


def failing(error: Exception) -> FunctionModel:
    def fn(messages: Sequence[Message], **options: Any) -> str:
        raise error

    return FunctionModel(fn, retry=None)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.mark.parametrize("operation", ["chat_and_record", "communicate", "operate", "ReAct"])
async def test_a_call_without_a_reply_commits_nothing(operation: str) -> None:
    error = AuthenticationError("bad key", provider="function", status=401)
    branch, recorder, _ = observed_branch(system="be brief", chat_model=failing(error), tools=[add])
    ask: Callable[[], Awaitable[Any]] = {
        "chat_and_record": lambda: branch.chat_and_record("q"),
        "communicate": lambda: branch.communicate("q"),
        "operate": lambda: branch.operate(instruction="q"),
        "ReAct": lambda: branch.ReAct("q"),
    }[operation]

    with pytest.raises(AuthenticationError):
        await ask()

    assert kinds(branch.msgs) == ["System"]
    assert recorder.messages() == []
    [terminal] = recorder.terminals()
    assert isinstance(terminal, RunFailed)
    assert terminal.data is error
    assert_idle(branch)


async def test_asking_again_after_a_failure_sends_the_question_once() -> None:
    outcomes: list[Any] = [ServerError("down", provider="function", status=500), "answer"]
    seen: list[list[str]] = []

    def fn(messages: Sequence[Message], **options: Any) -> str:
        seen.append(kinds(messages))
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return str(outcome)

    branch, _, _ = observed_branch(chat_model=FunctionModel(fn, retry=None))
    with pytest.raises(ServerError):
        await branch.chat_and_record("question")
    assert await branch.chat_and_record("question") == "answer"

    assert seen == [["Instruction"], ["Instruction"]]  # not the first question again
    assert kinds(branch.msgs) == ["Instruction", "AssistantResponse"]


async def test_cancelled_during_the_model_call_commits_nothing() -> None:
    started = anyio.Event()

    async def hang(messages: Sequence[Message], **options: Any) -> str:
        started.set()
        await anyio.sleep_forever()
        return "never"

    branch, recorder, _ = observed_branch(chat_model=FunctionModel(hang))
    async with anyio.create_task_group() as tg:
        tg.start_soon(branch.chat_and_record, "q")
        await started.wait()
        tg.cancel_scope.cancel()

    assert list(branch.msgs) == []
    [terminal] = recorder.terminals()
    assert isinstance(terminal, RunFailed)
    assert isinstance(terminal.data, anyio.get_cancelled_exc_class())
    assert_idle(branch)


async def test_run_yields_the_instruction_once_committed_with_the_first_reply() -> None:
    def stream(messages: Sequence[Message], **options: Any) -> Any:
        yield "hello"

    branch, recorder, _ = observed_branch(
        chat_model=FunctionModel(lambda m, **o: "unused", stream=stream)
    )
    seen = [(type(m).__name__, kinds(branch.msgs)) async for m in branch.run("hi")]

    # when the instruction is handed out, it is in the history with the reply it came with
    both = ["Instruction", "AssistantResponse"]
    assert seen == [("Instruction", both), ("AssistantResponse", both)]
    assert isinstance(recorder.terminals()[0], RunEnd)


async def test_run_failing_before_any_reply_yields_and_commits_nothing() -> None:
    error = ServerError("down", provider="function", status=503)
    branch, recorder, _ = observed_branch(chat_model=failing(error))
    seen: list[Message] = []

    async def consume() -> None:
        seen.extend([message async for message in branch.run("hi")])

    with pytest.raises(ServerError):
        await consume()
    assert seen == []
    assert list(branch.msgs) == []
    [terminal] = recorder.terminals()
    assert isinstance(terminal, RunFailed)
    assert terminal.data is error


async def test_react_failing_in_a_later_round_keeps_the_tools_it_ran() -> None:
    rounds = 0

    def fn(messages: Sequence[Message], **options: Any) -> Any:
        nonlocal rounds
        rounds += 1
        if rounds == 1:
            text = json.dumps({"analysis": "add first", "extension_needed": True})
            call = ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})
            return ModelResponse(text=text, tool_calls=(call,))
        raise ServerError("down", provider="function", status=500)

    branch, recorder, _ = observed_branch(chat_model=FunctionModel(fn, retry=None), tools=[add])
    with pytest.raises(ServerError):
        await branch.ReAct("sum it", max_extensions=3)

    history = list(branch.msgs)
    assert kinds(history) == ["Instruction", "AssistantResponse", "ActionRequest", "ActionResponse"]
    request, response = history[2], history[3]
    assert isinstance(request, ActionRequest)
    assert isinstance(response, ActionResponse)
    assert (request.function, response.output) == ("add", 5)
    assert isinstance(history[0], Instruction)
    assert history[0].instruction == "sum it"
    assert isinstance(history[1], AssistantResponse)
    # the failed round's instruction was never committed
    assert [m for m in history if isinstance(m, Instruction)] == [history[0]]
    assert isinstance(recorder.terminals()[0], RunFailed)
