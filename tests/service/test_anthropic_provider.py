"""Anthropic Messages against a real local HTTP server, on both backends."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from lionagi.errors import ConfigurationError
from lionagi.protocols._render import schema_instruction
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
)
from lionagi.service.errors import (
    AuthenticationError,
    BadRequestError,
    ProtocolError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
)
from lionagi.service.imodel import iModel
from lionagi.service.providers._anthropic_render import continued_body, to_anthropic_messages
from lionagi.service.types import FinalChunk, StreamChunk, TextDelta, ToolCallDelta, UsageChunk
from tests.payloads import ANTHROPIC_USAGE as USAGE
from tests.payloads import (
    anthropic_end,
    anthropic_event,
    anthropic_start,
    anthropic_text_block,
    anthropic_tool_block,
)
from tests.payloads import anthropic_message as message
from tests.service.http_server import AWAIT_CLOSE, DROP, HANG, Reply, ScriptedServer

# module-level mark: anyio parametrizes by backend at collection, which keeps parametrize ids
pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-secret-0123456789"

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def model_for(server: ScriptedServer, **kwargs: Any) -> iModel:
    # the transport itself: one request per call (retries are tested in test_retry.py)
    options: dict[str, Any] = {"api_key": KEY, "timeout": 10.0, "retry": None, **kwargs}
    return iModel("anthropic", "claude-test", base_url=server.url, **options)


def history() -> list[Message]:
    return [System(content="Be brief."), Instruction(instruction="Say hi.")]


async def collect(model: iModel, messages: list[Message], **kwargs: Any) -> list[StreamChunk]:
    return [item async for item in model.stream(messages, **kwargs)]


# -- whole replies -------------------------------------------------------------------------


async def test_plain_reply_and_request_shape(server: ScriptedServer) -> None:
    server.reply(Reply(json=message([{"type": "text", "text": "Hi!"}])))
    model = model_for(server, temperature=0.3)

    response = await model.invoke(history())

    assert response.text == "Hi!"
    assert response.provider == "anthropic"
    assert response.model == "claude-test-20250101"
    assert response.finish_reason == "end_turn"
    assert response.usage.input_tokens == 130  # fresh + cache read + cache write
    assert response.usage.output_tokens == 4
    assert response.usage.cached_input_tokens == 100
    assert response.usage.cache_write_tokens == 20
    [received] = server.requests
    assert received.path == "/v1/messages"
    assert received.headers["x-api-key"] == KEY
    assert received.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in received.headers
    assert received.json == {
        "model": "claude-test",
        "max_tokens": 4096,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hi."}]}],
        "temperature": 0.3,
    }
    await model.aclose()


class Answer(BaseModel):
    value: int


async def test_tools_history_and_response_format_in_body(server: ScriptedServer) -> None:
    server.reply(Reply(json=message([{"type": "text", "text": '{"value": 1}'}])))
    model = model_for(server)
    call = ActionRequest(call_id="toolu_1", function="get_weather", arguments={"city": "Oslo"})
    messages: list[Message] = [
        *history(),
        AssistantResponse(content="Checking."),
        call,
        ActionResponse(request_id=call.id, call_id="toolu_1", function="get_weather", output="3 C"),
        Instruction(instruction="And now?"),
    ]

    await model.invoke(messages, tools=[WEATHER_TOOL], response_format=Answer, max_tokens=99)

    body = server.requests[0].json
    system, rendered = to_anthropic_messages(messages)
    assert body["messages"] == rendered
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "get_weather",
        "input": {"city": "Oslo"},
    }
    assert body["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "3 C",
        "is_error": False,
    }
    assert body["system"] == f"{system}\n\n{schema_instruction(Answer.model_json_schema())}"
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city.",
            "input_schema": WEATHER_TOOL["function"]["parameters"],  # type: ignore[index]
        }
    ]
    assert body["max_tokens"] == 99
    assert "stream" not in body
    await model.aclose()


async def test_plain_tool_calls(server: ScriptedServer) -> None:
    content: list[dict[str, Any]] = [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Oslo"}},
        {"type": "tool_use", "id": "toolu_b", "name": "now", "input": {}},
    ]
    server.reply(Reply(json=message(content, stop="tool_use")))
    model = model_for(server)

    response = await model.invoke(history(), tools=[WEATHER_TOOL])

    assert response.text == "Let me check."
    assert response.finish_reason == "tool_use"
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("toolu_a", "get_weather", {"city": "Oslo"}),
        ("toolu_b", "now", {}),
    ]
    await model.aclose()


@pytest.mark.parametrize(
    ("status", "kind", "error_type"),
    [
        (401, "authentication_error", AuthenticationError),
        (403, "permission_error", AuthenticationError),
        (400, "invalid_request_error", BadRequestError),
        (413, "request_too_large", BadRequestError),
        (500, "api_error", ServerError),
        (529, "overloaded_error", ServerError),
    ],
)
async def test_status_errors(
    server: ScriptedServer, status: int, kind: str, error_type: type[ProviderError]
) -> None:
    body = {"type": "error", "error": {"type": kind, "message": f"bad things; key={KEY}"}}
    server.reply(Reply(status=status, json=body))
    model = model_for(server)

    with pytest.raises(error_type) as caught:
        await model.invoke(history())

    assert caught.value.status == status
    text = str(caught.value)
    assert "anthropic/claude-test" in text
    assert "bad things" in text
    assert KEY not in text
    assert KEY not in repr(model.provider)
    assert KEY not in str(model.to_dict())
    await model.aclose()


async def test_rate_limit_carries_retry_after(server: ScriptedServer) -> None:
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "too many"}}
    server.reply(Reply(status=429, json=body, headers={"retry-after": "12"}))
    model = model_for(server)

    with pytest.raises(RateLimitError) as caught:
        await model.invoke(history())

    assert caught.value.retry_after == 12.0
    assert "too many" in str(caught.value)
    await model.aclose()


async def test_server_that_never_answers_times_out(server: ScriptedServer) -> None:
    server.reply(Reply(hang=True))
    model = model_for(server, timeout=0.2)

    with pytest.raises(ProviderTimeout):
        await model.invoke(history())
    await model.aclose()


# -- streams -------------------------------------------------------------------------------


async def test_streamed_reply(server: ScriptedServer) -> None:
    server.reply(
        Reply(events=[*anthropic_start(), *anthropic_text_block(0, "Hel", "lo"), *anthropic_end()])
    )
    model = model_for(server)

    chunks = await collect(model, history())

    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["Hel", "lo"]
    [usage_chunk] = [c for c in chunks if isinstance(c, UsageChunk)]
    assert usage_chunk.usage.output_tokens == 9
    assert usage_chunk.usage.cached_input_tokens == 100
    assert usage_chunk.usage.cache_write_tokens == 20
    assert usage_chunk.usage.input_tokens == 130
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert final.response.text == "Hello"
    assert final.response.finish_reason == "end_turn"
    assert final.response.model == "claude-test-20250101"
    assert final.response.usage == usage_chunk.usage
    assert server.requests[0].json["stream"] is True
    await model.aclose()


async def test_streamed_tool_calls(server: ScriptedServer) -> None:
    events = [
        *anthropic_start(),
        *anthropic_text_block(0, "Checking."),
        *anthropic_tool_block(1, "toolu_a", "get_weather", '{"ci', 'ty": "Oslo"}'),
        *anthropic_tool_block(2, "toolu_b", "now"),
        *anthropic_end("tool_use"),
    ]
    server.reply(Reply(events=events))
    model = model_for(server)

    chunks = await collect(model, history(), tools=[WEATHER_TOOL])

    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert [(d.index, d.id, d.name, d.arguments) for d in deltas] == [
        (0, "toolu_a", "get_weather", ""),
        (0, None, None, '{"ci'),
        (0, None, None, 'ty": "Oslo"}'),
        (1, "toolu_b", "now", ""),
    ]
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert final.response.text == "Checking."
    assert final.response.finish_reason == "tool_use"
    assert [(c.id, c.name, c.arguments) for c in final.response.tool_calls] == [
        ("toolu_a", "get_weather", {"city": "Oslo"}),
        ("toolu_b", "now", {}),
    ]
    await model.aclose()


@pytest.mark.parametrize("name", ["", None, 3])
async def test_a_tool_use_without_a_name_is_a_protocol_error(
    server: ScriptedServer, name: object
) -> None:
    content = [{"type": "tool_use", "id": "toolu_a", "name": name, "input": {}}]
    server.reply(Reply(json=message(content, stop="tool_use")))
    model = model_for(server)

    with pytest.raises(ProtocolError, match="tool_use block 'toolu_a' name must be a non-empty"):
        await model.invoke(history())
    await model.aclose()


async def test_streamed_tool_input_that_is_not_json(server: ScriptedServer) -> None:
    events = [
        *anthropic_start(),
        *anthropic_tool_block(0, "t", "f", "{oops"),
        *anthropic_end("tool_use"),
    ]
    server.reply(Reply(events=events))
    model = model_for(server)

    with pytest.raises(ProtocolError, match="not JSON"):
        await collect(model, history())
    await model.aclose()


@pytest.mark.parametrize(
    ("kind", "error_type"),
    [("overloaded_error", ServerError), ("rate_limit_error", RateLimitError)],
)
async def test_error_event_inside_a_stream(
    server: ScriptedServer, kind: str, error_type: type[ProviderError]
) -> None:
    error = anthropic_event("error", error={"type": kind, "message": "try later"})
    server.reply(Reply(events=[*anthropic_start(), *anthropic_text_block(0, "Hi"), error]))
    model = model_for(server)

    with pytest.raises(error_type, match="try later"):
        await collect(model, history())
    await model.aclose()


async def test_stream_error_status(server: ScriptedServer) -> None:
    body = {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}
    server.reply(Reply(status=401, json=body))
    model = model_for(server)

    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY") as caught:
        await collect(model, history())

    assert KEY not in str(caught.value)
    await model.aclose()


async def test_stream_that_breaks_midway_is_a_connection_error(server: ScriptedServer) -> None:
    server.reply(Reply(events=[*anthropic_start(), *anthropic_text_block(0, "Hel")[:2], DROP]))
    model = model_for(server)
    stream = model.stream(history())

    first = await stream.__anext__()
    with pytest.raises(ProviderConnectionError):
        await stream.__anext__()

    assert first == TextDelta(text="Hel")
    await model.aclose()


async def test_stream_that_ends_without_message_stop(server: ScriptedServer) -> None:
    server.reply(Reply(events=[*anthropic_start(), *anthropic_text_block(0, "Hel")]))
    model = model_for(server)

    with pytest.raises(ProtocolError, match="ended before"):
        await collect(model, history())
    await model.aclose()


async def test_malformed_sse_event(server: ScriptedServer) -> None:
    server.reply(Reply(events=[*anthropic_start(), "event: content_block_delta\ndata: {nope\n\n"]))
    model = model_for(server)

    with pytest.raises(ProtocolError, match="malformed stream event"):
        await collect(model, history())
    await model.aclose()


async def test_stream_that_stalls_times_out(server: ScriptedServer) -> None:
    server.reply(Reply(events=[*anthropic_start(), HANG]))
    model = model_for(server, timeout=0.2)

    with pytest.raises(ProviderTimeout):
        await collect(model, history())
    await model.aclose()


async def test_aclose_halfway_closes_the_connection(server: ScriptedServer) -> None:
    server.reply(
        Reply(events=[*anthropic_start(), *anthropic_text_block(0, "one", "two")[:3], AWAIT_CLOSE])
    )
    model = model_for(server)
    stream = model.stream(history())

    first = await stream.__anext__()
    await stream.aclose()

    assert first == TextDelta(text="one")
    closed = await anyio.to_thread.run_sync(server.client_closed.wait, 30.0)
    assert closed, "the server never saw the connection close"
    await model.aclose()


def test_same_model_on_asyncio_then_trio(server: ScriptedServer) -> None:
    for text in ("one", "two"):
        server.reply(
            Reply(json=message([{"type": "text", "text": text}])),
            Reply(events=[*anthropic_start(), *anthropic_text_block(0, text), *anthropic_end()]),
        )
    model = model_for(server)

    async def run() -> tuple[str, str]:
        try:
            plain = (await model.invoke(history())).text
            chunks = await collect(model, history())
            final = chunks[-1]
            assert isinstance(final, FinalChunk)
            return plain, final.response.text
        finally:
            await model.aclose()

    assert anyio.run(run, backend="asyncio") == ("one", "one")
    assert anyio.run(run, backend="trio") == ("two", "two")


# -- pause_turn continuation --------------------------------------------------------------

SEARCH = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}


async def test_pause_turn_is_continued_at_most_max_pause_continuations_times(
    server: ScriptedServer,
) -> None:
    paused = message([{"type": "text", "text": "a"}, SEARCH], stop="pause_turn")
    server.reply(*(Reply(json=paused) for _ in range(3)))
    model = model_for(server, max_pause_continuations=2)

    response = await model.invoke(history())

    assert len(server.requests) == 3  # the first request and two continuations
    assert response.finish_reason == "pause_turn"  # returned as it stands after that
    assert response.text == "aaa"
    last = server.requests[-1].json["messages"][-1]
    assert last == {"role": "assistant", "content": [paused["content"][0], SEARCH] * 2}
    assert response.usage.output_tokens == 3 * USAGE["output_tokens"]
    assert isinstance(response.raw, dict)
    assert response.raw["content"] == [paused["content"][0], SEARCH] * 3  # every round's blocks
    await model.aclose()


async def test_max_pause_continuations_zero_returns_the_paused_reply(
    server: ScriptedServer,
) -> None:
    server.reply(
        Reply(
            events=[*anthropic_start(), *anthropic_text_block(0, "a"), *anthropic_end("pause_turn")]
        )
    )
    model = model_for(server, max_pause_continuations=0)

    chunks = await collect(model, history())

    assert len(server.requests) == 1
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert final.response.finish_reason == "pause_turn"
    assert final.response.text == "a"
    await model.aclose()


@pytest.mark.parametrize("bad", [-1, 1.5, True, "8"])
def test_max_pause_continuations_must_be_a_count(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_pause_continuations"):
        iModel("anthropic", "claude-test", api_key=KEY, max_pause_continuations=bad)


async def test_a_tool_call_after_a_streamed_pause_is_numbered_after_the_earlier_ones(
    server: ScriptedServer,
) -> None:
    server.reply(
        Reply(
            events=[
                *anthropic_start(),
                *anthropic_tool_block(0, "toolu_a", "get_weather", '{"city": "Oslo"}'),
                *anthropic_end("pause_turn"),
            ]
        ),
        Reply(
            events=[
                *anthropic_start(),
                *anthropic_tool_block(0, "toolu_b", "get_weather", '{"city": "Rome"}'),
                *anthropic_end("tool_use"),
            ]
        ),
    )
    model = model_for(server)

    chunks = await collect(model, history(), tools=[WEATHER_TOOL])

    starts = [(c.index, c.id) for c in chunks if isinstance(c, ToolCallDelta) and c.id]
    assert starts == [(0, "toolu_a"), (1, "toolu_b")]
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert [c.id for c in final.response.tool_calls] == ["toolu_a", "toolu_b"]
    usage = [c for c in chunks if isinstance(c, UsageChunk)]
    assert [u.usage.output_tokens for u in usage] == [18]  # once, both answers summed
    sent = server.requests[1].json["messages"][-1]["content"]
    assert sent == [
        {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Oslo"}}
    ]
    await model.aclose()


def test_a_continuation_joins_a_trailing_assistant_message() -> None:
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "Go."},
            {"role": "assistant", "content": "Sure:"},
        ],
    }
    block = {"type": "text", "text": " here"}

    continued = continued_body(body, [block], "container_1")

    assert continued["messages"] == [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": [{"type": "text", "text": "Sure:"}, block]},
    ]
    assert continued["container"] == "container_1"
    assert body["messages"][-1] == {"role": "assistant", "content": "Sure:"}  # left as it was
