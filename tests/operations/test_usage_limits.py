"""UsageLimits: checked before each model call of a turn, one RunFailed when exceeded."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from lionagi.errors import ConfigurationError, UsageLimitExceeded
from lionagi.protocols.messages import ActionResponse, Message, ToolCall, Usage
from lionagi.service.errors import ServerError
from lionagi.service.types import ModelResponse
from lionagi.service.usage_limits import UsageLimits
from lionagi.session.signal import RunFailed
from lionagi.testing import FunctionModel, VirtualClock
from tests.helpers import observed_branch


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def looping_model(calls: list[int]) -> FunctionModel:
    """Every ReAct round asks for a tool call and another round."""

    def fn(messages: Sequence[Message], **options: Any) -> Any:
        calls.append(1)
        schema = options.get("response_format") or {}
        if schema.get("title") == "ReActAnalysis":
            text = json.dumps({"analysis": "more", "extension_needed": True})
            call = ToolCall(id=f"c{len(calls)}", name="add", arguments={"a": 1, "b": 2})
            return ModelResponse(text=text, tool_calls=(call,))
        return "final"

    return FunctionModel(fn)


async def test_react_loop_stops_at_the_request_limit_with_one_run_failed() -> None:
    calls: list[int] = []
    branch, recorder, _ = observed_branch(
        chat_model=looping_model(calls), tools=[add], usage_limits=UsageLimits(request_limit=2)
    )

    with pytest.raises(UsageLimitExceeded) as caught:
        await branch.ReAct("think", max_extensions=5)

    assert (caught.value.limit, caught.value.value, caught.value.used) == ("request_limit", 2, 3)
    assert "request_limit=2" in str(caught.value)
    assert len(calls) == 2  # the third call was never sent
    [terminal] = recorder.terminals()
    assert isinstance(terminal, RunFailed)
    assert terminal.data is caught.value
    # the tools the loop already ran stay recorded with their results
    assert [m.output for m in branch.msgs if isinstance(m, ActionResponse)] == [3, 3]


async def test_token_limits_stop_the_next_call() -> None:
    def fn(messages: Sequence[Message], **options: Any) -> ModelResponse:
        return ModelResponse(text="long", usage=Usage(input_tokens=60, output_tokens=50))

    branch, recorder, _ = observed_branch(
        chat_model=FunctionModel(fn), usage_limits=UsageLimits(total_tokens_limit=100)
    )
    assert await branch.chat("one") == "long"  # a new turn: its own budget
    assert await branch.chat("two") == "long"

    # within one turn: operate's first reply uses 50 output tokens, its follow-up is refused
    branch.usage_limits = UsageLimits(output_tokens_limit=40)
    branch.register_tools(add)
    call = ToolCall(id="x", name="add", arguments={"a": 1, "b": 1})
    branch.chat_model = FunctionModel(
        lambda m, **o: ModelResponse(text="", tool_calls=(call,), usage=Usage(output_tokens=50))
    )
    with pytest.raises(UsageLimitExceeded, match="output_tokens_limit=40") as caught:
        await branch.operate(instruction="go", invoke_actions=True, reason=False)
    assert caught.value.used == 50
    assert isinstance(recorder.terminals()[-1], RunFailed)


async def test_retried_attempts_count_as_requests() -> None:
    call = ToolCall(id="x", name="add", arguments={"a": 1, "b": 1})
    outcomes: list[Any] = [
        ServerError("busy", provider="f", status=503),
        ModelResponse(text="", tool_calls=(call,)),
        "the follow-up, never sent",
    ]

    def fn(messages: Sequence[Message], **options: Any) -> Any:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    model = FunctionModel(fn, clock=VirtualClock())
    branch, _, _ = observed_branch(
        chat_model=model, tools=[add], usage_limits=UsageLimits(request_limit=2)
    )
    # operate's first call took two requests (the 503 and the tool call); its follow-up
    # would be the third
    with pytest.raises(UsageLimitExceeded) as caught:
        await branch.operate(instruction="go", invoke_actions=True)
    assert caught.value.used == 3
    assert outcomes == ["the follow-up, never sent"]


def test_limits_are_validated() -> None:
    with pytest.raises(ValidationError):
        UsageLimits(request_limit=0)
    with pytest.raises(ValidationError):
        UsageLimits(total_tokens=5)  # type: ignore[call-arg]
    branch, _, _ = observed_branch()
    with pytest.raises(ConfigurationError, match="UsageLimits"):
        branch.usage_limits = {"request_limit": 3}  # type: ignore[assignment]
