"""Upstream lionagi's call shapes run unchanged against the offline models, one test per shape."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from lionagi import (
    AssistantResponse,
    Branch,
    FieldModel,
    Instruct,
    Instruction,
    Message,
    OperationError,
    ParseError,
    Tool,
)
from lionagi.operations.operate import Reason
from lionagi.operations.react import ReActAnalysis
from lionagi.testing import FunctionModel, TestModel

pytestmark = pytest.mark.anyio


class Answer(BaseModel):
    value: int


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def last_instruction(messages: Sequence[Message]) -> Instruction:
    ask = messages[-1]
    assert isinstance(ask, Instruction)
    return ask


def echo(messages: Sequence[Message], **options: Any) -> str:
    """Replies with what it was asked: instruction | guidance | context."""
    ask = last_instruction(messages)
    return f"{ask.instruction}|{ask.guidance}|{ask.context}"


# -- instruct=Instruct(...) ---------------------------------------------------------------
async def test_communicate_takes_instruct() -> None:
    branch = Branch(chat_model=FunctionModel(echo))
    ask = Instruct(instruction="add", guidance="briefly", context={"a": 1})
    assert await branch.communicate(instruct=ask) == "add|briefly|{'a': 1}"


async def test_operate_takes_instruct_with_reason_and_actions() -> None:
    def fn(messages: Sequence[Message], **options: Any) -> str:
        assert "reason" in options["response_format"]["properties"]  # reason=True
        assert options["tools"][0]["function"]["name"] == "add"  # actions=True
        return '{"value": 3, "reason": {"title": "sum", "content": "1 + 2"}}'

    branch = Branch(chat_model=FunctionModel(fn), tools=[add])
    ask = Instruct(instruction="add 1 and 2", reason=True, actions=True)
    result = await branch.operate(instruct=ask, response_format=Answer)
    assert result.value == 3
    assert result.reason == Reason(title="sum", content="1 + 2")


async def test_instruct_and_the_same_field_directly_is_an_error() -> None:
    branch = Branch(chat_model=FunctionModel(echo))
    with pytest.raises(OperationError, match="instruction= both directly and in instruct="):
        await branch.communicate("x", instruct={"instruction": "y"})


# -- ReAct(instruct={...}, max_extensions=, verbose=) ----------------------------------------
def _react_model() -> TestModel:
    analysis = '{"analysis": "the tool says 3", "extension_needed": false}'
    return TestModel([analysis, "3"])


async def test_react_takes_an_instruct_dict_without_an_instruction(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = _react_model()
    branch = Branch(chat_model=model, tools=[add])
    with caplog.at_level(logging.INFO, logger="lionagi.react"):
        answer = await branch.ReAct(
            instruct={"instruction": "what is 1 + 2?", "guidance": "use the tool"},
            max_extensions=2,
            verbose=True,
        )
    assert answer == "3"
    first = model.calls[0].messages[-1]
    assert isinstance(first, Instruction)
    assert (first.instruction, first.guidance) == ("what is 1 + 2?", "use the tool")
    assert "ReAct round 1: the tool says 3" in caplog.text


async def test_react_takes_instruct_positionally() -> None:
    branch = Branch(chat_model=_react_model(), tools=[add])
    answer, analyses = await branch.ReAct(
        Instruct(instruction="what is 1 + 2?"), return_analysis=True
    )
    assert answer == "3"
    assert isinstance(analyses[0], ReActAnalysis)


# -- Branch(imodel=...) and per-call imodel= -----------------------------------------------
async def test_branch_takes_imodel() -> None:
    model = TestModel(["hi"])
    branch = Branch(imodel=model)
    assert branch.chat_model is model
    assert await branch.chat("hello") == "hi"


@pytest.mark.parametrize("op", ["chat", "chat_and_record", "communicate", "operate", "run"])
async def test_every_chat_operation_takes_imodel(op: str) -> None:
    default, chosen = TestModel(["default"]), TestModel(["chosen"])
    branch = Branch(chat_model=default)
    if op == "run":
        [m async for m in branch.run("x", imodel=chosen)]
    elif op == "operate":
        await branch.operate(instruction="x", imodel=chosen)
    else:
        await getattr(branch, op)("x", imodel=chosen)
    assert len(chosen.calls) == 1
    assert default.calls == []


# -- field_models=[FieldModel(...)] and request_fields=[...] ---------------------------------
async def test_operate_takes_field_models() -> None:
    def fn(messages: Sequence[Message], **options: Any) -> str:
        properties = options["response_format"]["properties"]
        assert properties["city"]["description"] == "Where."
        return '{"value": 1, "city": "Oslo"}'

    branch = Branch(chat_model=FunctionModel(fn))
    result = await branch.operate(
        instruction="where?",
        response_format=Answer,
        field_models=[FieldModel(name="city", annotation=str, description="Where.")],
    )
    assert (result.value, result.city) == (1, "Oslo")
    assert isinstance(result, Answer)


async def test_communicate_takes_request_fields_and_returns_a_dict() -> None:
    branch = Branch(chat_model=TestModel(['{"name": "Ada", "year": 1815}']))
    result = await branch.communicate("who?", request_fields=["name", "year"])
    assert result == {"name": "Ada", "year": 1815}


async def test_chat_takes_request_fields_as_the_requested_schema() -> None:
    model = TestModel(['{"name": "Ada"}'])
    branch = Branch(chat_model=model)
    text = await branch.chat("who?", request_fields={"name": "The person's name."})
    assert text == '{"name": "Ada"}'
    schema = last_instruction(model.calls[0].messages).response_format
    assert schema is not None
    assert schema["properties"]["name"]["description"] == "The person's name."


# -- chat(return_ins_res_message=True) -----------------------------------------------------
async def test_chat_returns_the_instruction_and_response_messages() -> None:
    branch = Branch(chat_model=TestModel(["hello back"]))
    instruction, response = await branch.chat("hello", return_ins_res_message=True)
    assert isinstance(instruction, Instruction)
    assert instruction.instruction == "hello"
    assert isinstance(response, AssistantResponse)
    assert response.content == "hello back"
    assert len(branch.msgs) == 0  # chat records nothing, as upstream


# -- Reason(title, content, confidence_score) -----------------------------------------------
async def test_reason_has_upstream_fields() -> None:
    def fn(messages: Sequence[Message], **options: Any) -> str:
        reason = options["response_format"]["$defs"]["Reason"]["properties"]
        assert set(reason) == {"title", "content", "confidence_score"}
        return (
            '{"value": 2, "reason": {"title": "t", "content": "because", "confidence_score": 0.5}}'
        )

    branch = Branch(chat_model=FunctionModel(fn))
    result = await branch.operate(instruction="x", response_format=Answer, reason=True)
    assert result.reason == Reason(title="t", content="because", confidence_score=0.5)


# -- upstream's positional order -------------------------------------------------------------
async def test_chat_and_communicate_take_instruction_guidance_context_positionally() -> None:
    branch = Branch(chat_model=FunctionModel(echo))
    assert await branch.chat("q", "g", {"c": 1}) == "q|g|{'c': 1}"
    assert await branch.communicate("q", "g", [1]) == "q|g|[1]"


async def test_parse_takes_handle_validation_and_max_retries_positionally() -> None:
    branch = Branch(parse_model=TestModel(["still not json"]))
    assert await branch.parse("no json", "return_value", 1, response_format=Answer) == "no json"


async def test_interpret_takes_domain_and_style_positionally() -> None:
    model = FunctionModel(lambda messages, **options: "better")
    branch = Branch(chat_model=model)
    assert await branch.interpret("raw", "math", "terse") == "better"
    assert last_instruction(model.calls[0].messages).guidance == "domain: math; style: terse"


async def test_run_takes_guidance_and_context_positionally() -> None:
    branch = Branch(chat_model=FunctionModel(echo))
    messages = [m async for m in branch.run("q", "g", {"c": 2})]
    assert messages[-1].content == "q|g|{'c': 2}"  # type: ignore[attr-defined]


# -- branch.tools as a mapping ------------------------------------------------------------------
def test_tools_read_as_a_mapping_of_name_to_tool() -> None:
    branch = Branch(tools=[add])
    tool = branch.tools["add"]
    assert isinstance(tool, Tool)
    assert list(branch.tools) == ["add"]
    assert dict(branch.tools.items()) == {"add": tool}
    assert list(branch.tools.keys()) == ["add"]
    assert "add" in branch.tools
    with pytest.raises(KeyError):
        branch.tools["nope"]
    assert branch.tools.schemas()[0]["function"]["name"] == "add"  # registry methods remain


# -- branch.drain_signals(), msgs.progression, message metadata ------------------------------------
async def test_drain_signals_is_a_no_op_when_idle() -> None:
    branch = Branch(chat_model=TestModel(["x"]))
    await branch.drain_signals()
    await branch.chat_and_record("q")
    await branch.drain_signals()
    assert len(branch.msgs) == 2


async def test_progression_is_the_message_ids_in_order() -> None:
    branch = Branch(system="s", chat_model=TestModel(["a"]))
    await branch.communicate("q")
    assert branch.msgs.progression == tuple(m.id for m in branch.msgs)
    assert len(branch.msgs.progression) == 3


async def test_a_reply_carries_the_raw_provider_response_in_metadata() -> None:
    branch = Branch(chat_model=TestModel(["a"]))
    await branch.communicate("q")
    reply = branch.msgs[-1]
    assert isinstance(reply, AssistantResponse)
    assert reply.metadata["model_response"] == reply.raw
    assert branch.msgs[0].metadata == {}


# -- where we differ, the error says what upstream did -------------------------------------
async def test_a_parse_failure_names_upstream_handle_validation() -> None:
    branch = Branch(parse_model=TestModel(["nope"]))
    with pytest.raises(ParseError, match="upstream lionagi returned the text") as caught:
        await branch.parse("no json", max_retries=1, response_format=Answer)
    assert "handle_validation='return_value'" in str(caught.value)
