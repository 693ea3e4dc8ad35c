"""Chat, streaming, a tool round through ``run()`` and ``operate``, and structured output
against a real OpenAI-compatible server (llama-cpp-python's, started by ``nox -s integration``).

A small local model answers loosely, so the tests check what the library guarantees -- typed
messages, recorded history, a parsed structured answer or a typed error -- rather than exact
words.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from lionagi import ActionRequest, ActionResponse, AssistantResponse, Branch, ParseError, iModel
from tests_integration.conftest import BASE_URL, MODEL

pytestmark = pytest.mark.anyio


def model(**kw: Any) -> iModel:
    return iModel(
        "openai",
        MODEL,
        base_url=BASE_URL,
        api_key="none",
        timeout=300,
        structured_output="json_object",
        temperature=0,
        **kw,
    )


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class City(BaseModel):
    name: str
    country: str


async def test_chat() -> None:
    async with model(max_tokens=32) as chat:
        branch = Branch(chat_model=chat)
        text = await branch.chat_and_record("Say hello in one word.")
    assert isinstance(text, str)
    assert text.strip()
    assert isinstance(branch.msgs[-1], AssistantResponse)


async def test_streaming() -> None:
    async with model(max_tokens=32) as chat:
        branch = Branch(chat_model=chat)
        seen = [m async for m in branch.run("Count from one to three.")]
    assert next(type(m).__name__ for m in seen) == "Instruction"
    assert any(isinstance(m, AssistantResponse) and m.content for m in seen)


async def test_tool_round_through_run() -> None:
    async with model(max_tokens=128) as chat:
        branch = Branch(chat_model=chat, tools=[add])
        seen = [m async for m in branch.run("Use the add tool to add 2 and 3.", max_tool_rounds=2)]
    requests = [m for m in seen if isinstance(m, ActionRequest)]
    responses = [m for m in seen if isinstance(m, ActionResponse)]
    assert len(requests) == len(responses)  # every call the model made was answered
    for request, response in zip(requests, responses, strict=True):
        assert response.call_id == request.call_id


async def test_tool_round_through_operate() -> None:
    async with model(max_tokens=128) as chat:
        branch = Branch(chat_model=chat, tools=[add])
        result = await branch.operate(
            instruction="Use the add tool to add 2 and 3.", actions=True, max_parse_retries=1
        )
    assert result is not None
    for response in result.action_responses:
        assert response.function == "add"


async def test_structured_output() -> None:
    async with model(max_tokens=64) as chat:
        branch = Branch(chat_model=chat)
        try:
            city = await branch.communicate(
                "Name the capital of France as JSON.", response_format=City
            )
        except ParseError:  # a tiny model may not follow the schema: still a typed error
            return
    assert isinstance(city, City)
