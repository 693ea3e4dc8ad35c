"""What the providers send and how the library lives with what comes back, end to end.

Tool rounds through ``run()``/``operate`` against recorded answers (Gemini's empty call ids and
thought signatures, Anthropic thinking), request shapes (assistant tool-call content, structured
output modes, option mapping), lone surrogates, secret scrubbing and connection failures —
against a local server, on both backends.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from lionagi.errors import ConfigurationError, OperationError
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    System,
)
from lionagi.service.errors import BadRequestError, ProtocolError, ProviderConnectionError
from lionagi.service.imodel import iModel
from lionagi.session.branch import Branch
from tests.service.http_server import Reply, ScriptedServer, Step, sse
from tests.service.replay_data import REPLAY, load, reply_of

pytestmark = pytest.mark.anyio

KEY = "sk-wire-test-4f9a2c71d8e3b605"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def openai_model(server: ScriptedServer, provider: str = "openai", **kw: Any) -> iModel:
    return iModel(
        provider, "m", base_url=f"{server.url}/v1", api_key=KEY, timeout=20, retry=None, **kw
    )


def anthropic_model(server: ScriptedServer, **kw: Any) -> iModel:
    return iModel(
        "anthropic", "claude-x", base_url=server.url, api_key=KEY, timeout=20, retry=None, **kw
    )


def recorded(name: str) -> Reply:
    return reply_of(load(REPLAY / f"{name}.json")["reply"])


def text_completion(text: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    return {"model": "m", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


def text_stream(text: str) -> Reply:
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
    return Reply(events=[sse(chunk), sse("[DONE]")])


def anthropic_text(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }


class Answer(BaseModel):
    city: str
    celsius: float


# -- tool rounds -----------------------------------------------------------------------------
async def test_run_runs_a_streamed_call_with_an_empty_id_once_and_sends_its_signature_back(
    server: ScriptedServer,
) -> None:
    ran: list[str] = []

    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return "sunny"

    server.reply(recorded("gemini_tool_call_stream"), text_stream("Sunny in Paris."))
    model = openai_model(server)
    branch = Branch(chat_model=model, tools=[get_weather])

    seen = [message async for message in branch.run("Weather in Paris?")]

    assert ran == ["Paris"]  # once, though Gemini sent "id": ""
    assert [type(m).__name__ for m in seen] == [
        "Instruction",
        "ActionRequest",
        "ActionResponse",
        "AssistantResponse",
    ]
    call = seen[1]
    assert isinstance(call, ActionRequest)
    assert call.call_id == "call_0"
    second = server.requests[1].json["messages"]
    assistant, tool = second[-2], second[-1]
    # content is a string (llama.cpp's server rejects null); the signature goes back
    assert assistant["content"] == ""
    [sent] = assistant["tool_calls"]
    assert sent["id"] == "call_0"
    assert tool["tool_call_id"] == "call_0"
    signature = load(REPLAY / "gemini_tool_call_stream.json")["expect"]["tool_calls"][0]
    assert sent["extra_content"] == signature["provider_fields"]["extra_content"]
    await model.aclose()


async def test_run_sends_anthropic_thinking_back_before_the_tool_use(
    server: ScriptedServer,
) -> None:
    def get_weather(location: str) -> str:
        """The weather."""
        return "sunny"

    end: list[str | Step] = [
        sse({"type": "message_start", "message": {"model": "c", "usage": {"input_tokens": 1}}}),
        sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
        sse(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Sunny."},
            }
        ),
        sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}),
        sse({"type": "message_stop"}),
    ]
    server.reply(recorded("anthropic_thinking_stream"), Reply(events=end))
    model = anthropic_model(server)
    branch = Branch(chat_model=model, tools=[get_weather])

    seen = [message async for message in branch.run("Weather?")]

    kinds = [type(m).__name__ for m in seen]
    assert kinds == [
        "Instruction",
        "AssistantResponse",
        "ActionRequest",
        "ActionResponse",
        "AssistantResponse",
    ]
    carrier = seen[1]
    assert isinstance(carrier, AssistantResponse)
    assert carrier.content == ""
    [thought] = carrier.reasoning
    assert thought.text == "The user wants the weather. Call the tool."
    assistant = server.requests[1].json["messages"][1]
    assert assistant["role"] == "assistant"
    assert [block["type"] for block in assistant["content"]] == ["thinking", "tool_use"]
    expected = load(REPLAY / "anthropic_thinking_stream.json")["expect"]["reasoning"][0]
    assert assistant["content"][0] == expected
    await model.aclose()


async def test_operate_sends_thinking_and_redacted_thinking_back(server: ScriptedServer) -> None:
    def get_weather(location: str) -> str:
        """The weather."""
        return "sunny"

    server.reply(recorded("anthropic_thinking"), Reply(json=anthropic_text("Sunny.")))
    model = anthropic_model(server)
    branch = Branch(chat_model=model, tools=[get_weather])

    result = await branch.operate(instruction="Weather?", actions=True)

    assert result.action_responses[0].output == "sunny"
    assistant = server.requests[1].json["messages"][1]
    assert [b["type"] for b in assistant["content"]] == [
        "thinking",
        "redacted_thinking",
        "tool_use",
    ]
    await model.aclose()


async def test_a_refusal_is_recorded_on_the_assistant_message(server: ScriptedServer) -> None:
    server.reply(recorded("openai_refusal"))
    model = openai_model(server)
    branch = Branch(chat_model=model)

    await branch.chat_and_record("Do the bad thing.")

    message = branch.msgs[-1]
    assert isinstance(message, AssistantResponse)
    assert message.refusal == "I'm sorry, I cannot assist with that request."
    await model.aclose()


async def test_run_records_a_streamed_refusal(server: ScriptedServer) -> None:
    server.reply(recorded("openai_refusal_stream"))
    model = openai_model(server)
    branch = Branch(chat_model=model)

    seen = [m async for m in branch.run("Do the bad thing.")]

    last = seen[-1]
    assert isinstance(last, AssistantResponse)
    assert last.refusal == "I'm sorry, I can't help with that."
    await model.aclose()


# -- JSON nested too deeply --------------------------------------------------------------------
DEEP = "[" * 5000 + "]" * 5000


async def test_json_nested_thousands_deep_is_a_protocol_error(server: ScriptedServer) -> None:
    body = json.dumps(text_completion("x"))[:-1] + f', "extra": {DEEP}}}'
    server.reply(
        Reply(body=body.encode()),
        Reply(events=[f'data: {{"choices": {DEEP}}}\n\n']),
        Reply(json=text_completion("fine")),
    )
    model = openai_model(server)

    with pytest.raises(ProtocolError, match="nested too deeply"):
        await model.invoke([Instruction(instruction="x")])
    with pytest.raises(ProtocolError, match="nested too deeply"):
        [c async for c in model.stream([Instruction(instruction="x")])]
    assert (await model.invoke([Instruction(instruction="x")])).text == "fine"
    await model.aclose()


async def test_tool_arguments_nested_thousands_deep_are_a_protocol_error(
    server: ScriptedServer,
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": DEEP}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    server.reply(Reply(json={"choices": [{"index": 0, "message": message}]}))
    model = openai_model(server)

    with pytest.raises(ProtocolError, match="nested too deeply"):
        await model.invoke([Instruction(instruction="x")])
    await model.aclose()


# -- lone surrogates ---------------------------------------------------------------------------
async def test_a_lone_surrogate_in_a_reply_is_escaped_and_the_branch_lives_on(
    server: ScriptedServer,
) -> None:
    body = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "bad \\ud83d end"}, "finish_reason": "stop"}]}'  # noqa: E501
    surrogate_delta = b'data: {"choices": [{"index": 0, "delta": {"content": "x\\udcff"}, "finish_reason": "stop"}]}\n\n'  # noqa: E501
    server.reply(
        Reply(body=body),
        Reply(events=[surrogate_delta.decode(), sse("[DONE]")]),
        Reply(json=text_completion("fine")),
    )
    model = openai_model(server)
    branch = Branch(chat_model=model)

    assert await branch.chat_and_record("One.") == "bad \\ud83d end"
    streamed = [m async for m in branch.run("Two.")]
    assert await branch.chat_and_record("Three.") == "fine"

    assert streamed[-1].content == "x\\udcff"  # type: ignore[attr-defined]
    last = server.requests[-1].body.decode("utf-8")  # the history encodes
    assert "bad \\\\ud83d end" in last
    await model.aclose()


async def test_a_tool_output_with_a_surrogateescape_name_is_escaped(
    server: ScriptedServer,
) -> None:
    name = b"caf\xe9.txt".decode("utf-8", "surrogateescape")

    def list_files() -> list[str]:
        """The files here."""
        return [name]

    call = {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    server.reply(
        Reply(json={"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}),
        Reply(json=text_completion("one file")),
    )
    model = openai_model(server)
    branch = Branch(chat_model=model, tools=[list_files])

    await branch.operate(instruction="List.", actions=True)

    [result] = [m for m in branch.msgs if isinstance(m, ActionResponse)]
    assert result.output == ["caf\\udce9.txt"]
    assert len(server.requests) == 2
    await model.aclose()


async def test_caller_text_with_a_lone_surrogate_is_rejected_before_any_request(
    server: ScriptedServer,
) -> None:
    model = openai_model(server)
    branch = Branch(chat_model=model)

    with pytest.raises(OperationError, match=r"instruction holds a lone surrogate .* position 4"):
        await branch.chat("bad \ud800 text")
    with pytest.raises(OperationError, match="context holds a lone surrogate"):
        await branch.chat("fine", context={"k": ["\udfff"]})
    assert server.requests == []
    await model.aclose()


async def test_a_surrogate_entering_by_another_door_is_escaped_when_sent(
    server: ScriptedServer,
) -> None:
    server.reply(Reply(json=text_completion("ok")))
    model = openai_model(server)

    response = await model.invoke([System(content="sys \ud800"), Instruction(instruction="x")])

    assert response.text == "ok"
    assert server.requests[0].json["messages"][0]["content"] == "sys \\ud800"
    await model.aclose()


# -- secrets -----------------------------------------------------------------------------------
def fragments(secret: str, size: int = 8) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


async def test_an_echoed_key_is_scrubbed_before_the_message_is_cut(
    server: ScriptedServer,
) -> None:
    text = "x" * 480 + f" key {KEY} was rejected"  # the key straddles the 500-char cut
    server.reply(
        Reply(status=400, body=text.encode(), headers={"content-type": "text/plain"}),
        Reply(status=400, json={"detail": {"echo": text}}),  # no message field: dumped, cut
    )
    model = openai_model(server)

    for _ in range(2):
        with pytest.raises(BadRequestError) as caught:
            await model.invoke([Instruction(instruction="x")])
        shown = str(caught.value)
        assert "x" * 400 in shown
        assert not any(piece in shown for piece in fragments(KEY)), shown
    await model.aclose()


async def test_a_partial_key_is_scrubbed(server: ScriptedServer) -> None:
    message = f"Incorrect API key provided: {KEY[:14]}...{KEY[-4:]}"
    server.reply(Reply(status=401, json={"error": {"message": message}}))
    model = openai_model(server)

    with pytest.raises(Exception, match=r"Incorrect API key provided: \*+") as caught:
        await model.invoke([Instruction(instruction="x")])

    assert KEY[:14] not in str(caught.value)
    await model.aclose()


async def test_a_placeholder_key_does_not_mangle_server_text(server: ScriptedServer) -> None:
    message = "tool_choice must be one of none, auto or required"
    server.reply(Reply(status=400, json={"error": {"message": message}}))
    model = iModel(
        "openai", "m", base_url=f"{server.url}/v1", api_key="none", timeout=20, retry=None
    )

    with pytest.raises(BadRequestError) as caught:
        await model.invoke([Instruction(instruction="x")])

    assert message in str(caught.value)
    await model.aclose()


# -- connection failures -----------------------------------------------------------------------
@pytest.fixture
def resetting_port() -> Iterator[int]:
    """A port whose server accepts each connection and resets it at once."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.recv(65536)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        listener.close()


async def test_a_reset_connection_is_a_connection_error(resetting_port: int) -> None:
    model = iModel(
        "openai",
        "m",
        base_url=f"http://127.0.0.1:{resetting_port}/v1",
        api_key=KEY,
        timeout=20,
        retry=None,
    )

    with pytest.raises(ProviderConnectionError, match="broke off") as caught:
        await model.invoke([Instruction(instruction="x")])

    assert not isinstance(caught.value, ProtocolError)
    await model.aclose()


# -- structured output -------------------------------------------------------------------------
SCHEMA_LINE = "follows this JSON schema"


def schema_count(body: dict[str, Any]) -> int:
    """How often the Answer schema is spelled out in a request body (its field title, which
    appears once per copy of the schema, in the body or in prompt text)."""
    return json.dumps(body).count("Celsius")


@pytest.mark.parametrize(
    ("mode", "native"),
    [
        ("json_schema", {"type": "json_schema"}),
        ("json_object", {"type": "json_object"}),
        ("prompt", None),
    ],
)
async def test_structured_output_modes_send_the_schema_once(
    server: ScriptedServer, mode: str, native: dict[str, Any] | None
) -> None:
    server.reply(Reply(json=text_completion('{"city": "Oslo", "celsius": 3}')))
    model = openai_model(server, structured_output=mode)
    branch = Branch(chat_model=model)

    answer = await branch.communicate("Weather in Oslo?", response_format=Answer)

    assert answer == Answer(city="Oslo", celsius=3)
    body = server.requests[0].json
    sent = body.get("response_format")
    if native is None:
        assert sent is None
    else:
        assert {k: sent[k] for k in native} == native
    in_prompt = SCHEMA_LINE in json.dumps(body["messages"])
    assert in_prompt == (mode != "json_schema")
    assert schema_count(body) == 1
    await model.aclose()


async def test_presets_pick_a_structured_output_mode_and_iModel_can_override(
    server: ScriptedServer,
) -> None:
    assert openai_model(server).structured_output == "json_schema"
    assert openai_model(server, provider="groq").structured_output == "json_object"
    assert openai_model(server, provider="deepseek").structured_output == "json_object"
    assert anthropic_model(server).structured_output == "prompt"
    chosen = openai_model(server, provider="groq", structured_output="prompt")
    assert chosen.structured_output == "prompt"
    assert iModel.from_dict(chosen.to_dict()).structured_output == "prompt"
    with pytest.raises(ConfigurationError, match="structured_output must be one of"):
        openai_model(server, structured_output="xml")


async def test_anthropic_gets_the_schema_once(server: ScriptedServer) -> None:
    server.reply(Reply(json=anthropic_text('{"city": "Oslo", "celsius": 3}')))
    model = anthropic_model(server)
    branch = Branch(chat_model=model)

    await branch.communicate("Weather in Oslo?", response_format=Answer)

    assert schema_count(server.requests[0].json) == 1
    await model.aclose()


# -- options -----------------------------------------------------------------------------------
async def test_anthropic_maps_stop_and_refuses_options_it_cannot_take(
    server: ScriptedServer,
) -> None:
    server.reply(Reply(json=anthropic_text("ok")))
    model = anthropic_model(server, temperature=0.1)

    await model.invoke([Instruction(instruction="x")], stop="END", extra_body={"top_k": 5})
    with pytest.raises(ConfigurationError, match="anthropic does not take the option 'seed'"):
        await model.invoke([Instruction(instruction="x")], seed=1)

    [sent] = server.requests
    body = sent.json
    assert body["stop_sequences"] == ["END"]
    assert "stop" not in body
    assert (body["temperature"], body["top_k"]) == (0.1, 5)
    await model.aclose()


async def test_openai_passes_common_options_and_extra_body(server: ScriptedServer) -> None:
    server.reply(Reply(json=text_completion("ok")))
    model = openai_model(server)

    await model.invoke([Instruction(instruction="x")], stop=["END"], seed=3, extra_body={"a": 1})

    body = server.requests[0].json
    assert (body["stop"], body["seed"], body["a"]) == (["END"], 3, 1)
    assert "extra_body" not in body
    await model.aclose()


# provider -> (tool-use settings given as the model's defaults, its plain reply or None)
_TOOL_CHOICE: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "openai": ({"tool_choice": "auto", "parallel_tool_calls": False}, text_completion("ok")),
    "openai_responses": (
        {"tool_choice": "auto", "parallel_tool_calls": False},
        {
            "object": "response",
            "status": "completed",
            "model": "m",
            "output": [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "ok"}],
                }
            ],
        },
    ),
    "anthropic": ({"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}, None),
}


@pytest.mark.parametrize("provider", list(_TOOL_CHOICE))
async def test_a_default_tool_choice_goes_only_with_tools(
    server: ScriptedServer, provider: str
) -> None:
    settings, reply = _TOOL_CHOICE[provider]
    server.reply(Reply(json=reply or anthropic_text("ok")))
    server.reply(Reply(json=reply or anthropic_text("ok")))
    if provider == "anthropic":
        model = anthropic_model(server, **settings)
    else:
        model = openai_model(server, provider, **settings)

    tool = {
        "type": "function",
        "function": {"name": "now", "description": "The time.", "parameters": {"type": "object"}},
    }

    await model.invoke([Instruction(instruction="x")])
    await model.invoke([Instruction(instruction="x")], tools=[tool])

    plain, with_tools = (request.json for request in server.requests)
    assert "tools" not in plain
    assert not set(settings) & set(plain), plain
    assert with_tools["tools"]
    assert {k: with_tools[k] for k in settings} == settings
    await model.aclose()
