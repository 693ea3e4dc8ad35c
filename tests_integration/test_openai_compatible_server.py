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
    print("chat:", repr(text))
    assert isinstance(text, str)
    assert text.strip()
    assert isinstance(branch.msgs[-1], AssistantResponse)


async def test_streaming() -> None:
    async with model(max_tokens=32) as chat:
        branch = Branch(chat_model=chat)
        seen = [m async for m in branch.run("Write the numbers one, two and three.")]
    assert next(type(m).__name__ for m in seen) == "Instruction"
    assert any(isinstance(m, AssistantResponse) and m.content for m in seen)


# llama-cpp-python's server offers the tools only when tool_choice says "auto" or names one
# (without it, it answers in text as if no tools were sent); it cannot stream an "auto" choice
# that picks a call (the stream breaks off), so run(), which streams, names the tool
async def test_tool_round_through_run() -> None:
    # a named tool_choice makes the server's grammar produce a call with schema-valid input
    force = {"type": "function", "function": {"name": "add"}}
    async with model(max_tokens=64, tool_choice=force) as chat:
        branch = Branch(chat_model=chat, tools=[add])
        seen = [m async for m in branch.run("Add 2 and 3.", max_tool_rounds=1)]
    requests = [m for m in seen if isinstance(m, ActionRequest)]
    responses = [m for m in seen if isinstance(m, ActionResponse)]
    assert requests, seen
    first = requests[0]
    assert first.function == "add"
    ran = responses[0]
    assert ran.call_id == first.call_id
    assert not ran.is_error, ran.output
    assert ran.output == first.arguments["a"] + first.arguments["b"]
    # the second call (forced again) came after the result was sent back, and was not run
    assert len(requests) == 2
    assert responses[1].is_error


async def test_tool_round_through_operate() -> None:
    async with model(max_tokens=128, tool_choice="auto") as chat:
        branch = Branch(chat_model=chat, tools=[add])
        result = await branch.operate(
            instruction="Use the add tool to add 2 and 3.", actions=True, max_parse_retries=1
        )
    assert result is not None
    print("operate:", result.action_responses)  # what the model chose, for the record
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
    print("structured:", city)
    assert isinstance(city, City)
