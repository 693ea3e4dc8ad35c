"""The OpenAI Responses API provider against a local server with recorded-shape replies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import ActionResponse, Instruction, System
from lionagi.service.errors import AuthenticationError, ProtocolError, ServerError
from lionagi.service.imodel import iModel
from lionagi.service.types import FinalChunk, TextDelta, ToolCallDelta, UsageChunk
from lionagi.session.branch import Branch
from tests.service.http_server import Reply, ScriptedServer, sse

pytestmark = pytest.mark.anyio

KEY = "sk-responses-secret-9"
ASK = [System(content="Be brief."), Instruction(instruction="Say hi.")]
USAGE = {
    "input_tokens": 20,
    "input_tokens_details": {"cached_tokens": 4},
    "output_tokens": 9,
    "output_tokens_details": {"reasoning_tokens": 5},
    "total_tokens": 29,
}
REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Add the numbers."}],
    "encrypted_content": "gAAAA-opaque",
}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def model_for(server: ScriptedServer, **kw: Any) -> iModel:
    options: dict[str, Any] = {"api_key": KEY, "timeout": 10.0, "retry": None, **kw}
    return iModel("openai", "o4-mini", endpoint="response", base_url=f"{server.url}/v1", **options)


def message(text: str, item_id: str = "msg_1") -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def response(*output: dict[str, Any], status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1764547200,
        "status": status,
        "model": "o4-mini-2025-04-16",
        "output": list(output),
        "usage": USAGE,
        **extra,
    }


def event(kind: str, **data: Any) -> str:
    return sse({"type": kind, **data}, event=kind)


async def test_text_reply_and_request_shape(server: ScriptedServer) -> None:
    model = model_for(server, max_tokens=50)
    assert model.provider_name == "openai_responses"
    server.reply(Reply(json=response(REASONING, message("Hi."))))
    reply = await model.invoke(ASK, reasoning={"effort": "low"})
    await model.aclose()
    assert reply.text == "Hi."
    assert reply.provider == "openai_responses"
    assert reply.model == "o4-mini-2025-04-16"
    assert reply.finish_reason == "completed"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (20, 9)
    assert reply.usage.cached_input_tokens == 4
    [request] = server.requests
    assert request.path == "/v1/responses"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json == {
        "model": "o4-mini",
        "input": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hi."},
        ],
        "max_output_tokens": 50,
        "reasoning": {"effort": "low"},
    }


async def test_tools_and_structured_output_in_the_request(server: ScriptedServer) -> None:
    class Answer(BaseModel):
        value: int

    tool = {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
    }
    server.reply(Reply(json=response(function_call("call_1", "add", {"a": 1, "b": 2}))))
    model = model_for(server)
    reply = await model.invoke(ASK, tools=[tool], response_format=Answer)
    await model.aclose()
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_1", "add", {"a": 1, "b": 2})
    ]
    assert reply.finish_reason == "tool_calls"
    body = server.requests[0].json
    assert body["tools"] == [
        {
            "type": "function",
            "name": "add",
            "description": "Add two integers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        }
    ]
    assert body["text"]["format"]["type"] == "json_schema"
    assert body["text"]["format"]["name"] == "Answer"
    assert body["text"]["format"]["schema"]["properties"]["value"]["type"] == "integer"


async def test_reasoning_items_go_back_on_the_next_turn(server: ScriptedServer) -> None:
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    server.reply(
        Reply(json=response(REASONING, function_call("call_1", "add", {"a": 2, "b": 3}))),
        Reply(json=response(message("5", item_id="msg_2"))),
    )
    model = model_for(server)
    branch = Branch(chat_model=model, tools=[add])
    result = await branch.operate(instruction="2 + 3?", actions=True)
    await model.aclose()
    assert any(isinstance(m, ActionResponse) and m.output == 5 for m in branch.msgs)
    assert result is not None
    first, second = (r.json for r in server.requests)
    assert [t["name"] for t in first["tools"]] == ["add"]
    sent = second["input"]
    kinds = [item.get("type", item.get("role")) for item in sent]
    # operate's follow-up asks for the answer after the tool results
    assert kinds == ["user", "reasoning", "function_call", "function_call_output", "user"]
    assert sent[1] == REASONING  # verbatim, encrypted content included
    assert sent[2]["call_id"] == "call_1"
    assert sent[3] == {"type": "function_call_output", "call_id": "call_1", "output": "5"}


def streamed(*output: dict[str, Any]) -> Reply:
    """``output`` as the Responses API streams it: each item added, its text or argument
    deltas, the item done; then the completed response."""
    events: list[str | Any] = []
    for index, item in enumerate(output):
        kind = item["type"]
        added = {**item, "arguments": ""} if kind == "function_call" else {"type": kind}
        events.append(event("response.output_item.added", output_index=index, item=added))
        if kind == "message":
            text = item["content"][0]["text"]
            pieces = (text[: len(text) // 2], text[len(text) // 2 :])
            events.extend(
                event("response.output_text.delta", output_index=index, delta=piece)
                for piece in pieces
            )
        elif kind == "function_call":
            events.append(
                event(
                    "response.function_call_arguments.delta",
                    output_index=index,
                    delta=item["arguments"],
                )
            )
        events.append(event("response.output_item.done", output_index=index, item=item))
    events.append(event("response.completed", response=response(*output)))
    return Reply(events=events)


@pytest.mark.parametrize("preamble", [False, True], ids=["calls_only", "text_then_call"])
async def test_a_streamed_turn_sends_reasoning_back(server: ScriptedServer, preamble: bool) -> None:
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    said = [message("Let me add.")] if preamble else []
    call = function_call("call_1", "add", {"a": 2, "b": 3})
    server.reply(streamed(REASONING, *said, call), streamed(message("5", item_id="msg_2")))
    model = model_for(server)
    branch = Branch(chat_model=model, tools=[add])
    async with branch.run("2 + 3?") as stream:
        seen = [m async for m in stream]
    await model.aclose()
    assert [type(m).__name__ for m in seen] == [
        "Instruction",
        "AssistantResponse",
        "ActionRequest",
        "ActionResponse",
        "AssistantResponse",
    ]
    assert seen[1].content == ("Let me add." if preamble else "")  # type: ignore[attr-defined]
    assert seen[-1].content == "5"  # type: ignore[attr-defined]
    second = server.requests[1].json
    assert second["stream"] is True
    # the first reply goes back as its output items, verbatim: reasoning, text, call (ids kept)
    assert second["input"] == [
        {"role": "user", "content": "2 + 3?"},
        REASONING,
        *said,
        call,
        {"type": "function_call_output", "call_id": "call_1", "output": "5"},
    ]


async def test_stream_events_become_chunks(server: ScriptedServer) -> None:
    done = response(REASONING, message("Hello there"), function_call("c9", "add", {"a": 1}))
    server.reply(
        Reply(
            events=[
                event("response.created", response=response(status="in_progress")),
                event("response.output_item.added", output_index=0, item={"type": "reasoning"}),
                event("response.output_text.delta", output_index=1, delta="Hello "),
                event("response.output_text.delta", output_index=1, delta="there"),
                event(
                    "response.output_item.added",
                    output_index=2,
                    item={"type": "function_call", "call_id": "c9", "name": "add"},
                ),
                event("response.function_call_arguments.delta", output_index=2, delta='{"a"'),
                event("response.function_call_arguments.delta", output_index=2, delta=": 1}"),
                event("response.completed", response=done),
            ]
        )
    )
    model = model_for(server)
    chunks = [c async for c in model.stream(ASK)]
    await model.aclose()
    assert chunks[:5] == [
        TextDelta(text="Hello "),
        TextDelta(text="there"),
        ToolCallDelta(index=2, id="c9", name="add", arguments=""),
        ToolCallDelta(index=2, arguments='{"a"'),
        ToolCallDelta(index=2, arguments=": 1}"),
    ]
    assert isinstance(chunks[5], UsageChunk)
    final = chunks[6]
    assert isinstance(final, FinalChunk)
    assert final.response.text == "Hello there"
    assert final.response.tool_calls[0].arguments == {"a": 1}
    raw = final.response.raw
    assert isinstance(raw, dict)
    output = raw["output"]
    assert isinstance(output, list)
    assert output[0] == REASONING
    assert server.requests[0].json["stream"] is True


async def test_failures_are_typed(server: ScriptedServer) -> None:
    model = model_for(server)
    server.reply(Reply(status=401, json={"error": {"message": "Incorrect API key"}}))
    with pytest.raises(AuthenticationError):
        await model.invoke(ASK)
    server.reply(
        Reply(json=response(status="failed", error={"code": "server_error", "message": "boom"}))
    )
    with pytest.raises(ServerError, match="boom"):
        await model.invoke(ASK)
    server.reply(
        Reply(
            events=[
                event(
                    "response.failed",
                    response=response(status="failed", error={"message": "overloaded"}),
                )
            ]
        )
    )
    with pytest.raises(ServerError, match="overloaded"):
        async for _ in model.stream(ASK):
            pass
    server.reply(Reply(events=[event("response.output_text.delta", output_index=0, delta="x")]))
    with pytest.raises(ProtocolError, match="before the response was complete"):
        async for _ in model.stream(ASK):
            pass
    server.reply(Reply(json={"object": "response", "status": "completed"}))
    with pytest.raises(ProtocolError, match="no output items"):
        await model.invoke(ASK)
    await model.aclose()


async def test_incomplete_reply_says_why(server: ScriptedServer) -> None:
    server.reply(
        Reply(
            json=response(
                message("Partial"),
                status="incomplete",
                incomplete_details={"reason": "max_output_tokens"},
            )
        )
    )
    model = model_for(server)
    reply = await model.invoke(ASK)
    await model.aclose()
    assert (reply.text, reply.finish_reason) == ("Partial", "max_output_tokens")


def test_endpoint_names() -> None:
    assert iModel("openai", "gpt-4o", api_key=KEY, endpoint="chat").provider_name == "openai"
    assert iModel("openai_responses", "gpt-4o", api_key=KEY).provider_name == "openai_responses"
    assert iModel("openai", "text-embedding-3-small", api_key=KEY, endpoint="embed").model == (
        "text-embedding-3-small"
    )
    with pytest.raises(ConfigurationError, match="endpoint='response'"):
        iModel("anthropic", "claude", api_key=KEY, endpoint="response")
