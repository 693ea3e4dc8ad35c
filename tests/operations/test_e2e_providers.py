"""chat, operate with tools and ReAct end to end over real transports: the OpenAI-compatible and
Anthropic providers against a server on 127.0.0.1, and the agentic CLI as a subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
)
from lionagi.service.imodel import iModel
from lionagi.session.signal import RunEnd
from tests.helpers import assert_idle, assert_one_terminal_per_start, observed_branch
from tests.payloads import anthropic_message, completion
from tests.processes import fake_model
from tests.service.http_server import Reply, ScriptedServer

pytestmark = pytest.mark.anyio


class Product(BaseModel):
    product: int


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def openai(server: ScriptedServer) -> iModel:
    return iModel("openai", "gpt-test", base_url=f"{server.url}/v1", api_key="sk-e2e", timeout=30)


def anthropic(server: ScriptedServer) -> iModel:
    return iModel("anthropic", "claude-test", base_url=server.url, api_key="sk-e2e", timeout=30)


def kinds(branch: Any) -> list[str]:
    return [type(m).__name__ for m in branch.msgs]


# -- OpenAI-compatible ------------------------------------------------------------------------
async def test_openai_chat_and_record(server: ScriptedServer) -> None:
    server.reply(Reply(json=completion({"role": "assistant", "content": "Hi there."})))
    model = openai(server)
    branch, rec, _ = observed_branch(system="Be brief.", chat_model=model)
    try:
        assert await branch.chat_and_record("Say hi.") == "Hi there."
    finally:
        await model.aclose()
    [request] = server.requests
    sent = request.json["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."}
    assert sent[-1]["role"] == "user"
    assert sent[-1]["content"].startswith("Say hi.")
    assert kinds(branch) == ["System", "Instruction", "AssistantResponse"]
    [end] = rec.terminals()
    assert isinstance(end, RunEnd)
    assert (end.input_tokens, end.output_tokens) == (12, 3)


async def test_openai_operate_runs_native_tool_calls_then_answers(server: ScriptedServer) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "multiply", "arguments": json.dumps({"a": 6, "b": 7})},
    }
    server.reply(
        Reply(
            json=completion(
                {"role": "assistant", "content": None, "tool_calls": [call]}, finish="tool_calls"
            )
        ),
        Reply(json=completion({"role": "assistant", "content": '{"product": 42}'})),
    )
    model = openai(server)
    branch, rec, _ = observed_branch(chat_model=model, tools=[multiply])
    try:
        result = await branch.operate(
            instruction="What is 6 x 7?", response_format=Product, actions=True
        )
    finally:
        await model.aclose()
    assert isinstance(result, Product)
    assert result.product == 42
    assert [r.output for r in result.action_responses] == [42]  # type: ignore[attr-defined]
    first, second = server.requests
    assert first.json["tools"][0]["function"]["name"] == "multiply"
    tool_message = [m for m in second.json["messages"] if m["role"] == "tool"]
    assert tool_message == [{"role": "tool", "tool_call_id": "call_1", "content": "42"}]
    history = list(branch.msgs)
    requests = [m for m in history if isinstance(m, ActionRequest)]
    responses = [m for m in history if isinstance(m, ActionResponse)]
    assert [(r.call_id, r.function) for r in requests] == [("call_1", "multiply")]
    assert responses[0].request_id == requests[0].id
    assert len(rec.starts()) == 1
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_openai_react_rounds_then_final_answer(server: ScriptedServer) -> None:
    analysis = {"analysis": "6 x 7 is simple.", "extension_needed": False}
    server.reply(
        Reply(json=completion({"role": "assistant", "content": json.dumps(analysis)})),
        Reply(json=completion({"role": "assistant", "content": '{"product": 42}'})),
    )
    model = openai(server)
    branch, rec, _ = observed_branch(chat_model=model, tools=[multiply])
    try:
        answer = await branch.ReAct("What is 6 x 7?", response_format=Product)
    finally:
        await model.aclose()
    assert answer == Product(product=42)
    assert len(server.requests) == 2
    assert len(rec.starts()) == 1
    assert_one_terminal_per_start(rec)
    assert isinstance(branch.msgs[-1], AssistantResponse)


# -- Anthropic ----------------------------------------------------------------------------------
async def test_anthropic_chat_and_record(server: ScriptedServer) -> None:
    server.reply(Reply(json=anthropic_message([{"type": "text", "text": "Hello."}])))
    model = anthropic(server)
    branch, rec, _ = observed_branch(system="Be brief.", chat_model=model)
    try:
        assert await branch.chat_and_record("Say hi.") == "Hello."
    finally:
        await model.aclose()
    [request] = server.requests
    assert request.json["system"] == "Be brief."
    assert request.json["messages"][0]["role"] == "user"
    assert kinds(branch) == ["System", "Instruction", "AssistantResponse"]
    assert isinstance(rec.terminals()[0], RunEnd)


async def test_anthropic_operate_with_tool_use(server: ScriptedServer) -> None:
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "multiply", "input": {"a": 3, "b": 5}}
    server.reply(
        Reply(json=anthropic_message([tool_use], stop="tool_use")),
        Reply(json=anthropic_message([{"type": "text", "text": '{"product": 15}'}])),
    )
    model = anthropic(server)
    branch, rec, _ = observed_branch(chat_model=model, tools=[multiply])
    try:
        result = await branch.operate(
            instruction="What is 3 x 5?", response_format=Product, actions=True
        )
    finally:
        await model.aclose()
    assert result.product == 15
    second = server.requests[1].json["messages"]
    results = [
        block
        for m in second
        if m["role"] == "user" and isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]
    assert [(r["tool_use_id"], r["content"]) for r in results] == [("toolu_1", "15")]
    assert len(rec.starts()) == 1


# -- agentic CLI --------------------------------------------------------------------------------
async def test_cli_chat_and_record(tmp_path: Path) -> None:
    branch, rec, _ = observed_branch(chat_model=fake_model("normal", tmp_path))
    assert await branch.chat_and_record("Say hello.") == "Hello from the fake CLI."
    assert kinds(branch) == ["Instruction", "AssistantResponse"]
    assert isinstance(rec.terminals()[0], RunEnd)
    assert_idle(branch)


async def test_cli_communicate_with_call_specific_model(tmp_path: Path) -> None:
    configured = fake_model("normal", tmp_path)
    override = fake_model("normal", tmp_path, model="opus")
    branch, _, _ = observed_branch(chat_model=configured)
    assert await branch.communicate("Hi", chat_model=override) == "Hello from the fake CLI."
    assert branch.chat_model is configured
    assert isinstance(branch.msgs[0], Instruction)
