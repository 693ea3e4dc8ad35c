"""OpenAI-compatible chat completions against a real local HTTP server, on both backends."""

from __future__ import annotations

import json
import socket
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

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
from lionagi.service.providers._openai_render import to_openai_messages
from lionagi.service.types import FinalChunk, StreamChunk, TextDelta, ToolCallDelta, UsageChunk
from tests.payloads import DONE, USAGE_EVENT, chunk, completion
from tests.service.http_server import AWAIT_CLOSE, DROP, HANG, Reply, ScriptedServer, sse

# module-level mark: anyio parametrizes by backend at collection, which keeps parametrize ids
pytestmark = pytest.mark.anyio

KEY = "sk-test-secret-0123456789"


def model_for(server: ScriptedServer, **kwargs: Any) -> iModel:
    # the transport itself: one request per call (retries are tested in test_retry.py)
    options: dict[str, Any] = {"api_key": KEY, "timeout": 10.0, "retry": None, **kwargs}
    return iModel("openai", "gpt-test", base_url=f"{server.url}/v1", **options)


def history() -> list[Message]:
    return [System(content="Be brief."), Instruction(instruction="Say hi.")]


async def collect(model: iModel, messages: list[Message], **kwargs: Any) -> list[StreamChunk]:
    return [item async for item in model.stream(messages, **kwargs)]


# -- whole replies -------------------------------------------------------------------------


async def test_plain_reply_and_request_shape(server: ScriptedServer) -> None:
    server.reply(Reply(json=completion({"role": "assistant", "content": "Hi!"})))
    model = model_for(server, temperature=0.2)
    messages = history()

    response = await model.invoke(messages)

    assert response.text == "Hi!"
    assert response.model == "gpt-test-0001"
    assert response.provider == "openai"
    assert response.finish_reason == "stop"
    assert response.tool_calls == ()
    assert response.usage.input_tokens == 12
    assert response.usage.output_tokens == 3
    assert response.usage.cached_input_tokens == 8
    [received] = server.requests
    assert received.method == "POST"
    assert received.path == "/v1/chat/completions"
    assert received.headers["authorization"] == f"Bearer {KEY}"
    assert received.json == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hi."},
        ],
        "temperature": 0.2,
    }
    await model.aclose()


class Weather(BaseModel):
    city: str
    celsius: float


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


async def test_tools_and_response_format_in_body(server: ScriptedServer) -> None:
    server.reply(Reply(json=completion({"role": "assistant", "content": "{}"})))
    model = model_for(server)
    call = ActionRequest(call_id="call_1", function="get_weather", arguments={"city": "Oslo"})
    messages: list[Message] = [
        *history(),
        AssistantResponse(content="Checking."),
        call,
        ActionResponse(
            request_id=call.id, call_id="call_1", function="get_weather", output={"c": 3}
        ),
    ]

    await model.invoke(messages, tools=[WEATHER_TOOL], response_format=Weather, max_tokens=50)

    body = server.requests[0].json
    assert body["messages"] == to_openai_messages(messages)
    assert body["messages"][2]["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": '{"c": 3}'}
    assert body["tools"] == [WEATHER_TOOL]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Weather", "schema": Weather.model_json_schema()},
    }
    assert body["max_tokens"] == 50
    assert "stream" not in body
    await model.aclose()


async def test_local_server_preset_sends_no_auth_header(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.reply(Reply(json=completion({"role": "assistant", "content": "ok"})))
    model = iModel("ollama", "llama3", base_url=f"{server.url}/v1", timeout=10.0)

    response = await model.invoke(history())

    assert response.text == "ok"
    assert response.provider == "ollama"
    assert "authorization" not in server.requests[0].headers
    await model.aclose()


async def test_plain_tool_calls(server: ScriptedServer) -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            },
            {"id": "call_b", "type": "function", "function": {"name": "now", "arguments": ""}},
        ],
    }
    server.reply(Reply(json=completion(message, finish="tool_calls")))
    model = model_for(server)

    response = await model.invoke(history(), tools=[WEATHER_TOOL])

    assert response.text == ""
    assert response.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_a", "get_weather", {"city": "Oslo"}),
        ("call_b", "now", {}),
    ]
    await model.aclose()


async def test_tool_call_arguments_that_are_not_json(server: ScriptedServer) -> None:
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
        ],
    }
    server.reply(Reply(json=completion(message, finish="tool_calls")))
    model = model_for(server)

    with pytest.raises(ProtocolError, match="not JSON"):
        await model.invoke(history())
    await model.aclose()


@pytest.mark.parametrize("name", ["", None, 3])
async def test_a_tool_call_without_a_name_is_a_protocol_error(
    server: ScriptedServer, name: object
) -> None:
    call = {"id": "c", "type": "function", "function": {"name": name, "arguments": "{}"}}
    server.reply(Reply(json=completion({"role": "assistant", "tool_calls": [call]})))
    model = model_for(server)

    with pytest.raises(ProtocolError, match=r"tool_calls\[0\]\.function\.name must be a non-empty"):
        await model.invoke(history())
    await model.aclose()


async def test_answer_that_is_not_json(server: ScriptedServer) -> None:
    server.reply(Reply(body=b"<html>gateway</html>", headers={"content-type": "text/html"}))
    model = model_for(server)

    with pytest.raises(ProtocolError, match="not JSON"):
        await model.invoke(history())
    await model.aclose()


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (401, AuthenticationError),
        (403, AuthenticationError),
        (400, BadRequestError),
        (404, BadRequestError),
        (422, BadRequestError),
        (500, ServerError),
        (503, ServerError),
        (418, ProviderError),
    ],
)
async def test_status_errors(
    server: ScriptedServer, status: int, error_type: type[ProviderError]
) -> None:
    body = {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "x"}}
    server.reply(Reply(status=status, json=body))
    model = model_for(server)

    with pytest.raises(error_type) as caught:
        await model.invoke(history())

    assert type(caught.value) is error_type
    assert caught.value.status == status
    text = str(caught.value)
    assert "openai/gpt-test" in text
    assert f"status {status}" in text
    assert "Incorrect API key provided" in text
    assert KEY not in text
    assert KEY not in repr(caught.value)
    assert KEY not in repr(model.provider)
    await model.aclose()


async def test_rate_limit_carries_retry_after(server: ScriptedServer) -> None:
    server.reply(
        Reply(status=429, json={"error": {"message": "slow down"}}, headers={"Retry-After": "7"})
    )
    model = model_for(server)

    with pytest.raises(RateLimitError) as caught:
        await model.invoke(history())

    assert caught.value.retry_after == 7.0
    assert "slow down" in str(caught.value)
    await model.aclose()


async def test_error_body_without_json(server: ScriptedServer) -> None:
    server.reply(
        Reply(status=502, body=b"upstream exploded", headers={"content-type": "text/plain"})
    )
    model = model_for(server)

    with pytest.raises(ServerError, match="upstream exploded"):
        await model.invoke(history())
    await model.aclose()


async def test_server_that_never_answers_times_out(server: ScriptedServer) -> None:
    server.reply(Reply(hang=True))
    model = model_for(server, timeout=0.2)

    with pytest.raises(ProviderTimeout):
        await model.invoke(history())
    await model.aclose()


async def test_connection_refused_is_a_connection_error() -> None:
    with socket.socket() as unused:  # bound, never listening: connections are refused
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
        model = iModel("openai", "gpt-test", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY)
        with pytest.raises(ProviderConnectionError, match="cannot connect") as caught:
            await model.invoke(history())
    assert KEY not in str(caught.value)
    await model.aclose()


# -- streams -------------------------------------------------------------------------------


async def test_streamed_reply(server: ScriptedServer) -> None:
    events: list[Any] = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk({}, finish="stop"),
        USAGE_EVENT,
        DONE,
    ]
    server.reply(Reply(events=events))
    model = model_for(server)

    chunks = await collect(model, history())

    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["Hel", "lo"]
    usage_chunks = [c for c in chunks if isinstance(c, UsageChunk)]
    assert [(u.usage.input_tokens, u.usage.cached_input_tokens) for u in usage_chunks] == [(20, 16)]
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert sum(isinstance(c, FinalChunk) for c in chunks) == 1
    response = final.response
    assert response.text == "Hello"
    assert response.finish_reason == "stop"
    assert response.model == "gpt-test-0001"
    assert response.provider == "openai"
    assert response.usage.output_tokens == 5
    body = server.requests[0].json
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert server.requests[0].headers["accept"] == "text/event-stream"
    await model.aclose()


async def test_streamed_tool_calls(server: ScriptedServer) -> None:
    def call_delta(index: int, **fields: Any) -> str:
        entry: dict[str, Any] = {"index": index}
        if "id" in fields:
            entry.update(id=fields["id"], type="function")
        entry["function"] = {k: v for k, v in fields.items() if k in ("name", "arguments")}
        return chunk({"tool_calls": [entry]})

    events: list[Any] = [
        chunk({"role": "assistant", "content": None}),
        call_delta(0, id="call_a", name="get_weather", arguments=""),
        call_delta(0, arguments='{"ci'),
        call_delta(0, arguments='ty": "Oslo"}'),
        call_delta(1, id="call_b", name="now", arguments="{}"),
        chunk({}, finish="tool_calls"),
        USAGE_EVENT,
        DONE,
    ]
    server.reply(Reply(events=events))
    model = model_for(server)

    chunks = await collect(model, history(), tools=[WEATHER_TOOL])

    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert [(d.index, d.id, d.name, d.arguments) for d in deltas] == [
        (0, "call_a", "get_weather", ""),
        (0, None, None, '{"ci'),
        (0, None, None, 'ty": "Oslo"}'),
        (1, "call_b", "now", "{}"),
    ]
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert [(c.id, c.name, c.arguments) for c in final.response.tool_calls] == [
        ("call_a", "get_weather", {"city": "Oslo"}),
        ("call_b", "now", {}),
    ]
    assert final.response.finish_reason == "tool_calls"
    assert server.requests[0].json["tools"] == [WEATHER_TOOL]
    await model.aclose()


async def test_streamed_tool_call_with_bad_arguments(server: ScriptedServer) -> None:
    bad = chunk(
        {"tool_calls": [{"index": 0, "id": "c", "type": "function", "function": {"name": "f"}}]}
    )
    more = chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{not json"}}]})
    server.reply(Reply(events=[bad, more, chunk({}, finish="tool_calls"), DONE]))
    model = model_for(server)

    with pytest.raises(ProtocolError, match="not JSON"):
        await collect(model, history())
    await model.aclose()


async def test_sse_framing_split_events_comments_and_multiline_data(
    server: ScriptedServer,
) -> None:
    whole = json.dumps({"model": "m", "choices": [{"index": 0, "delta": {"content": "A"}}]})
    pretty = json.dumps(
        {
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "B"}, "finish_reason": "stop"}],
        },
        indent=1,
    )
    events: list[Any] = [
        ": keep-alive comment\n\n",
        f"data: {whole[:10]}",  # one event split over several network chunks
        f"{whole[10:]}\r\n\r",
        "\n",
        sse(pretty),  # data spread over several data: lines
        "event: message\nid: 7\nretry: 10\n" + DONE,
    ]
    server.reply(Reply(events=events))
    model = model_for(server)

    chunks = await collect(model, history())

    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["A", "B"]
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert final.response.text == "AB"
    assert final.response.usage.total_tokens == 0
    await model.aclose()


async def test_stream_error_status(server: ScriptedServer) -> None:
    server.reply(
        Reply(status=429, json={"error": {"message": "quota"}}, headers={"retry-after": "2.5"})
    )
    model = model_for(server)

    with pytest.raises(RateLimitError) as caught:
        await collect(model, history())

    assert caught.value.retry_after == 2.5
    assert KEY not in str(caught.value)
    await model.aclose()


async def test_error_payload_inside_a_stream(server: ScriptedServer) -> None:
    error = sse({"error": {"message": "model overloaded", "code": 503}})
    server.reply(Reply(events=[chunk({"content": "x"}), error]))
    model = model_for(server)

    with pytest.raises(ServerError, match="model overloaded"):
        await collect(model, history())
    await model.aclose()


async def test_stream_that_breaks_midway_is_a_connection_error(server: ScriptedServer) -> None:
    server.reply(Reply(events=[chunk({"content": "Hel"}), DROP]))
    model = model_for(server)
    stream = model.stream(history())

    first = await stream.__anext__()
    with pytest.raises(ProviderConnectionError):
        await stream.__anext__()

    assert first == TextDelta(text="Hel")
    await model.aclose()


async def test_stream_that_ends_without_finishing(server: ScriptedServer) -> None:
    server.reply(Reply(events=[chunk({"content": "Hel"})]))
    model = model_for(server)

    with pytest.raises(ProtocolError, match="ended before"):
        await collect(model, history())
    await model.aclose()


async def test_malformed_sse_event(server: ScriptedServer) -> None:
    server.reply(Reply(events=[chunk({"content": "a"}), "data: {not json\n\n", DONE]))
    model = model_for(server)

    with pytest.raises(ProtocolError, match="malformed stream event"):
        await collect(model, history())
    await model.aclose()


async def test_stream_that_stalls_times_out(server: ScriptedServer) -> None:
    server.reply(Reply(events=[chunk({"content": "a"}), HANG]))
    model = model_for(server, timeout=0.2)

    with pytest.raises(ProviderTimeout):
        await collect(model, history())
    await model.aclose()


async def test_aclose_halfway_closes_the_connection(server: ScriptedServer) -> None:
    server.reply(Reply(events=[chunk({"content": "one"}), chunk({"content": "two"}), AWAIT_CLOSE]))
    model = model_for(server)
    stream = model.stream(history())

    first = await stream.__anext__()
    second = await stream.__anext__()
    await stream.aclose()

    assert (first, second) == (TextDelta(text="one"), TextDelta(text="two"))
    closed = await anyio.to_thread.run_sync(server.client_closed.wait, 30.0)
    assert closed, "the server never saw the connection close"
    await model.aclose()


async def test_model_is_reusable_after_errors(server: ScriptedServer) -> None:
    server.reply(
        Reply(events=[chunk({"content": "a"}), DROP]),
        Reply(json=completion({"role": "assistant", "content": "fine"})),
    )
    model = model_for(server)

    with pytest.raises(ProviderConnectionError):
        await collect(model, history())
    response = await model.invoke(history())

    assert response.text == "fine"
    await model.aclose()


async def test_model_works_again_after_aclose(server: ScriptedServer) -> None:
    server.reply(
        Reply(json=completion({"role": "assistant", "content": "a"})),
        Reply(json=completion({"role": "assistant", "content": "b"})),
    )
    model = model_for(server)

    first = await model.invoke(history())
    await model.aclose()
    await model.aclose()  # idempotent
    second = await model.invoke(history())

    assert (first.text, second.text) == ("a", "b")
    await model.aclose()


def test_same_model_on_asyncio_then_trio(server: ScriptedServer) -> None:
    """One model object serves successive event loops; each run closes its loop's client."""
    for text in ("one", "two", "three"):
        server.reply(
            Reply(json=completion({"role": "assistant", "content": text})),
            Reply(events=[chunk({"content": text}), chunk({}, finish="stop"), DONE]),
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
    assert anyio.run(run, backend="asyncio") == ("three", "three")
    assert len(server.requests) == 6


# -- SSE decoding ----------------------------------------------------------------------
