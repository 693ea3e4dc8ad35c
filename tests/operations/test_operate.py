"""operate: structured answers with tools, natively or through the JSON protocol, in one turn."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from lionagi.errors import OperationError, ParseError, ToolNotFoundError
from lionagi.operations.operate import (
    ActionRequestModel,
    OperateExtras,
    OperateResult,
    Reason,
    result_class,
)
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    Instruction,
    Message,
    ToolCall,
)
from lionagi.service.imodel import iModel
from lionagi.service.types import ModelResponse
from lionagi.session.branch import Branch
from lionagi.session.signal import RunEnd, RunStart
from lionagi.testing import FunctionModel, FunctionProvider, TestModel
from tests.helpers import assert_idle, assert_one_terminal_per_start, observed_branch


class Total(BaseModel):
    """The sum asked for."""

    total: int


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def fail() -> None:
    """Always fails."""
    raise RuntimeError("tool broke")


class JsonOnlyProvider(FunctionProvider):
    """A function provider whose models cannot take tool schemas natively."""

    supports_native_tools: ClassVar[bool] = False


class JsonOnlyModel(iModel):
    provider: JsonOnlyProvider


def json_only(fn: Any) -> JsonOnlyModel:
    return JsonOnlyModel(JsonOnlyProvider(fn, name="json-only"))


def kinds(branch: Branch) -> list[str]:
    return [type(m).__name__ for m in branch.msgs]


def native_adder(messages: Sequence[Message], **options: Any) -> Any:
    """Calls `add` when tools are offered, answers with JSON otherwise."""
    if options.get("tools"):
        return [ToolCall(id="call_1", name="add", arguments={"a": 2, "b": 3})]
    results = [m.output for m in messages if isinstance(m, ActionResponse)]
    return json.dumps({"total": results[-1] if results else 0, "reason": {"text": "added"}})


# -- native tool calls ----------------------------------------------------------------------------
async def test_native_tool_calls_run_then_one_follow_up_gives_the_answer() -> None:
    model = FunctionModel(native_adder)
    branch, rec, _ = observed_branch(chat_model=model, tools=[add])
    result = await branch.operate(instruction="add 2 and 3", response_format=Total, actions=True)
    assert issubclass(type(result), Total)
    assert issubclass(type(result), OperateExtras)
    assert result.total == 5
    assert result.action_requests == [
        ActionRequestModel(function="add", arguments={"a": 2, "b": 3})
    ]
    [done] = result.action_responses
    assert (done.function, done.output, done.is_error) == ("add", 5, False)
    assert kinds(branch) == [
        "Instruction",
        "AssistantResponse",
        "ActionRequest",
        "ActionResponse",
        "Instruction",
        "AssistantResponse",
    ]
    first, second = model.calls
    assert [t.name for t in first.tools] == ["add"]
    assert second.tools == ()
    assert second.response_format is not None
    assert "total" in second.response_format["properties"]
    # everything happened in one turn
    assert [s.kind for s in rec.signals if isinstance(s, RunStart | RunEnd)] == [
        "RunStart",
        "RunEnd",
    ]
    assert rec.starts()[0].operation == "operate"
    [end] = rec.terminals()
    assert isinstance(end, RunEnd)
    assert end.num_turns == 2
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_no_follow_up_when_the_tool_call_reply_already_holds_the_answer() -> None:
    def both(messages: Sequence[Message], **options: Any) -> ModelResponse:
        return ModelResponse(
            text='{"total": 7}',
            tool_calls=(ToolCall(id="c9", name="add", arguments={"a": 3, "b": 4}),),
        )

    model = FunctionModel(both)
    branch = Branch(chat_model=model, tools=[add])
    result = await branch.operate(instruction="sum", response_format=Total, actions=True)
    assert result.total == 7
    assert result.action_responses[0].output == 7
    assert len(model.calls) == 1
    assert kinds(branch) == ["Instruction", "AssistantResponse", "ActionRequest", "ActionResponse"]


async def test_native_tool_calls_without_response_format_get_a_text_answer() -> None:
    def fn(messages: Sequence[Message], **options: Any) -> Any:
        if options.get("tools"):
            return ToolCall(id="c1", name="add", arguments={"a": 1, "b": 1})
        return "the sum is 2"

    model = FunctionModel(fn)
    branch = Branch(chat_model=model, tools=[add])
    result = await branch.operate(instruction="add", actions=True)
    assert isinstance(result, OperateResult)
    assert result.text == "the sum is 2"
    assert result.action_responses[0].output == 2
    assert len(model.calls) == 2


async def test_invoke_actions_false_records_requests_without_running_them() -> None:
    model = FunctionModel(native_adder)
    branch = Branch(chat_model=model, tools=[add])
    result = await branch.operate(instruction="add", actions=True, invoke_actions=False)
    assert isinstance(result, OperateResult)
    assert result.action_requests[0].function == "add"
    assert result.action_responses == []
    assert kinds(branch) == ["Instruction", "AssistantResponse", "ActionRequest"]
    assert len(model.calls) == 1
    with pytest.raises(ParseError, match="invoke_actions=True"):
        await branch.operate(
            instruction="add", response_format=Total, actions=True, invoke_actions=False
        )


async def test_a_failing_tool_is_an_error_response_not_a_failed_turn() -> None:
    def fn(messages: Sequence[Message], **options: Any) -> Any:
        if options.get("tools"):
            return ToolCall(id="c1", name="fail", arguments={})
        return '{"total": 0}'

    branch, rec, _ = observed_branch(chat_model=FunctionModel(fn), tools=[fail])
    result = await branch.operate(instruction="try", response_format=Total, actions=True)
    [failed] = result.action_responses
    assert failed.is_error
    assert "tool broke" in str(failed.output)
    assert isinstance(rec.terminals()[0], RunEnd)


# -- the JSON protocol ----------------------------------------------------------------------------
async def test_json_protocol_lists_tools_in_the_instruction_and_parses_action_requests() -> None:
    def fn(messages: Sequence[Message], **options: Any) -> str:
        return json.dumps(
            {
                "total": 9,
                "action_requests": [
                    {"function": "add", "arguments": {"a": 4, "b": 5}},
                    {"function": "add", "arguments": {"a": 1, "b": 1}},
                ],
            }
        )

    model = json_only(fn)
    assert not model.supports_native_tools
    branch, rec, _ = observed_branch(chat_model=model, tools=[add])
    result = await branch.operate(instruction="sum", response_format=Total, actions=True)
    assert issubclass(type(result), Total)
    assert result.total == 9
    assert [r.output for r in result.action_responses] == [9, 2]
    [call] = model.provider.calls
    assert call.tools == ()  # nothing sent natively
    instruction = call.messages[-1]
    assert isinstance(instruction, Instruction)
    assert [s["function"]["name"] for s in instruction.tool_schemas] == ["add"]
    assert instruction.response_format is not None
    assert {"total", "action_requests"} <= set(instruction.response_format["properties"])
    assert kinds(branch) == [
        "Instruction",
        "AssistantResponse",
        "ActionRequest",
        "ActionRequest",
        "ActionResponse",
        "ActionResponse",
    ]
    requests = [m for m in branch.msgs if isinstance(m, ActionRequest)]
    answers = [m for m in branch.msgs if isinstance(m, ActionResponse)]
    assert [a.request_id for a in answers] == [r.id for r in requests]
    assert len(rec.starts()) == 1
    assert_idle(branch)


async def test_json_protocol_without_tools_sends_the_plain_schema() -> None:
    model = json_only(lambda messages, **options: '{"total": 1}')
    branch = Branch(chat_model=model)
    result = await branch.operate(instruction="one", response_format=Total)
    assert result.total == 1
    instruction = model.provider.calls[0].messages[-1]
    assert isinstance(instruction, Instruction)
    assert instruction.tool_schemas == ()
    assert instruction.response_format == Total.model_json_schema()


# -- reason, result classes, text results ---------------------------------------------------------
async def test_reason_is_asked_for_and_returned() -> None:
    def fn(messages: Sequence[Message], **options: Any) -> str:
        assert "reason" in options["response_format"]["properties"]
        return '{"total": 3, "reason": {"content": "1 + 2", "confidence_score": 0.9}}'

    branch = Branch(chat_model=FunctionModel(fn))
    result = await branch.operate(instruction="1 + 2", response_format=Total, reason=True)
    assert result.reason == Reason(content="1 + 2", confidence_score=0.9)
    assert result.total == 3


async def test_reason_without_response_format_keeps_the_text_answer() -> None:
    def fn(messages: Sequence[Message], **options: Any) -> str:
        assert set(options["response_format"]["properties"]) == {"text", "reason"}
        return '{"text": "hello", "reason": {"text": "greeting"}}'

    branch = Branch(chat_model=FunctionModel(fn))
    result = await branch.operate(instruction="greet", reason=True)
    assert isinstance(result, OperateResult)
    assert result.text == "hello"
    assert result.reason == Reason(content="greeting")


async def test_result_class_is_a_cached_subclass_of_the_format() -> None:
    branch = Branch(chat_model=TestModel())
    first = await branch.operate(instruction="x", response_format=Total)
    second = await branch.operate(instruction="y", response_format=Total, reason=True)
    assert first.reason is None
    assert type(first) is type(second) is result_class(Total)
    assert isinstance(first, Total)
    assert set(first.model_dump()) == {"total", "reason", "action_requests", "action_responses"}


async def test_without_response_format_the_result_is_operate_result_with_text() -> None:
    branch = Branch(chat_model=FunctionModel(lambda messages, **options: "plain words"))
    result = await branch.operate(instruction="talk")
    assert isinstance(result, OperateResult)
    assert result.text == "plain words"
    assert result.reason is None
    assert kinds(branch) == ["Instruction", "AssistantResponse"]


async def test_unparseable_reply_is_reformatted_by_the_parse_model_override() -> None:
    configured_parse = FunctionModel(lambda messages, **options: '{"total": -1}')
    override_parse = FunctionModel(lambda messages, **options: '{"total": 42}')
    chat = FunctionModel(lambda messages, **options: "forty-two")
    branch = Branch(chat_model=chat, parse_model=configured_parse)
    result = await branch.operate(
        instruction="answer", response_format=Total, parse_model=override_parse
    )
    assert result.total == 42
    assert len(override_parse.calls) == 1
    assert configured_parse.calls == []
    assert branch.parse_model is configured_parse


async def test_handle_validation_return_value_gives_the_text() -> None:
    chat = FunctionModel(lambda messages, **options: "no json here")
    branch = Branch(chat_model=chat, parse_model=FunctionModel(lambda m, **o: "still none"))
    result = await branch.operate(
        instruction="answer",
        response_format=Total,
        handle_validation="return_value",
        max_parse_retries=1,
    )
    assert result == "no json here"
    with pytest.raises(ParseError):
        await branch.operate(instruction="answer", response_format=Total, max_parse_retries=0)


# -- lifecycle and models -------------------------------------------------------------------------
async def test_one_lifecycle_pair_per_call_even_with_tools_and_follow_up() -> None:
    branch, rec, _ = observed_branch(chat_model=FunctionModel(native_adder), tools=[add])
    await branch.operate(instruction="a", response_format=Total, actions=True)
    await branch.operate(instruction="b")
    assert [kind for kind, _ in rec.lifecycle()] == ["RunStart", "RunEnd"] * 2
    assert {s.operation for s in rec.starts()} == {"operate"}
    assert_one_terminal_per_start(rec)


async def test_chat_model_override_is_used_for_the_call_only() -> None:
    configured = FunctionModel(lambda messages, **options: '{"total": 1}')
    override = FunctionModel(native_adder)
    branch = Branch(chat_model=configured, tools=[add])
    result = await branch.operate(
        instruction="add", response_format=Total, actions=True, chat_model=override
    )
    assert result.total == 5
    assert len(override.calls) == 2
    assert configured.calls == []
    assert branch.chat_model is configured
    assert branch.parse_model is configured


# -- parameter errors -----------------------------------------------------------------------------
async def test_parameter_errors_are_raised_before_the_turn() -> None:
    class Clash(BaseModel):
        reason: str

    branch, rec, _ = observed_branch()
    with pytest.raises(OperationError, match="register_tools"):
        await branch.operate(instruction="x", actions=True)
    with pytest.raises(OperationError, match="reason"):
        await branch.operate(instruction="x", response_format=Clash)
    with pytest.raises(OperationError, match="action_strategy"):
        await branch.operate(instruction="x", action_strategy="all")  # type: ignore[arg-type]
    with pytest.raises(OperationError, match="nothing to ask"):
        await branch.operate()
    branch.register_tools(add)
    with pytest.raises(ToolNotFoundError, match="'add'"):
        await branch.operate(instruction="x", tools=["subtract"])
    assert rec.signals == []
    assert len(branch.msgs) == 0


async def test_tools_can_be_narrowed_by_name() -> None:
    async def subtract(a: int, b: int) -> int:
        return a - b

    model = FunctionModel(lambda messages, **options: "ok")
    branch = Branch(chat_model=model, tools=[add, subtract])
    await branch.operate(instruction="x", tools=["subtract"])
    assert [t.name for t in model.calls[0].tools] == ["subtract"]
    await branch.operate(instruction="x", tools=True)
    assert [t.name for t in model.calls[1].tools] == ["add", "subtract"]
    await branch.operate(instruction="x")
    assert model.calls[2].tools == ()
