"""Replays recorded-shape provider answers (``replay/*.json``) through the real providers.

Each file is one answer as a provider sends it — built from the providers' public API
references and the official SDKs' test fixtures (shapes and facts, not their code) — with what
the library must read from it: text, tool calls, usage, stop reason, refusal, reasoning, or the
typed error. HTTP answers are served by a local server; Claude Code transcripts by a small
script that prints the recorded lines. Every case runs streamed or not as recorded, on both
backends, and the model must stay usable after it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lionagi.protocols.messages import Instruction, Message, System
from lionagi.service import errors
from lionagi.service.imodel import iModel
from lionagi.service.types import (
    FinalChunk,
    ModelResponse,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
)
from tests.service.http_server import Reply, ScriptedServer
from tests.service.replay_data import REPLAY, load, reply_of

pytestmark = pytest.mark.anyio

CASES = sorted(REPLAY.glob("*.json"))
KEY = "sk-replay-0123456789abcdef"
HISTORY: list[Message] = [System(content="Be brief."), Instruction(instruction="Go.")]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def model_of(case: dict[str, Any], server: ScriptedServer, path: Path) -> iModel:
    provider = case["provider"]
    if provider == "claude_code":
        return iModel(
            "claude_code",
            "sonnet",
            executable=[sys.executable, str(Path(__file__).with_name("replay_cli.py"))],
            env={"REPLAY_FILE": str(path)},
            timeout=60,
            retry=None,
        )
    base = server.url if provider == "anthropic" else f"{server.url}/v1"
    # no retries: each case is one answer, read once
    return iModel(provider, "m", base_url=base, api_key=KEY, timeout=20, retry=None)


async def answer(model: iModel, stream: bool) -> tuple[ModelResponse, list[StreamChunk]]:
    if not stream:
        return await model.invoke(HISTORY), []
    chunks = [chunk async for chunk in model.stream(HISTORY)]
    final = chunks[-1]
    assert isinstance(final, FinalChunk), chunks
    return final.response, chunks


def check(response: ModelResponse, chunks: list[StreamChunk], expect: dict[str, Any]) -> None:
    assert response.text == expect.get("text", "")
    assert response.finish_reason == expect.get("finish_reason")
    assert response.refusal == expect.get("refusal")
    calls = [
        {"id": c.id, "name": c.name, "arguments": c.arguments, "provider_fields": c.provider_fields}
        for c in response.tool_calls
    ]
    wanted = [{"provider_fields": {}, **c} for c in expect.get("tool_calls", [])]
    assert calls == wanted
    usage = response.usage.model_dump()
    for field, value in expect.get("usage", {}).items():
        assert usage[field] == value, (field, usage)
    assert [r.block for r in response.reasoning] == expect.get("reasoning", [])
    if "reasoning_text" in expect:
        assert [r.text for r in response.reasoning] == expect["reasoning_text"]
    thoughts = [c.text for c in chunks if isinstance(c, ReasoningDelta)]
    if thoughts:  # reasoning deltas add up to the reasoning kept
        assert "".join(thoughts) == "".join(r.text for r in response.reasoning)
    texts = [c.text for c in chunks if isinstance(c, TextDelta)]
    if chunks and not any(c.complete for c in chunks if isinstance(c, TextDelta)):
        assert "".join(texts) == response.text  # deltas add up to the reply
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    if deltas:  # every streamed call is known by the id its deltas carried
        delta_ids = {c.id for c in deltas if c.id}
        assert {call["id"] for call in calls} <= delta_ids
        named = [c.index for c in deltas if c.name]  # a call's name arrives once
        assert len(named) == len(set(named)), deltas


def check_continuations(server: ScriptedServer, wanted: list[dict[str, Any]]) -> None:
    """A reply paused by the server (Anthropic ``pause_turn``) is continued: each follow-up
    request is the first one with the reply so far as the assistant turn."""
    bodies = [received.json for received in server.requests]
    assert len(bodies) == 1 + len(wanted), bodies
    first = bodies[0]
    for body, want in zip(bodies[1:], wanted, strict=True):
        assert body["messages"][:-1] == first["messages"]
        assert body["messages"][-1] == {"role": "assistant", "content": want["content"]}
        assert body.get("container") == want.get("container")
        assert {k: v for k, v in body.items() if k not in ("messages", "container")} == {
            k: v for k, v in first.items() if k != "messages"
        }


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
async def test_replay(path: Path, server: ScriptedServer) -> None:
    case = load(path)
    expect = case["expect"]
    model = model_of(case, server, path)
    if case["provider"] != "claude_code":
        server.reply(*(reply_of(reply) for reply in case.get("replies", [case.get("reply")])))
    try:
        if "error" in expect:
            wanted = expect["error"]
            with pytest.raises(getattr(errors, wanted["type"]), match=wanted["match"]) as caught:
                await answer(model, case["stream"])
            assert type(caught.value).__name__ == wanted["type"]
            if "status" in wanted:
                assert caught.value.status == wanted["status"]
            assert KEY not in str(caught.value)
        else:
            response, chunks = await answer(model, case["stream"])
            check(response, chunks, expect)
            if case["provider"] != "claude_code":
                check_continuations(server, expect.get("continued", []))
        if case["provider"] != "claude_code":  # the same model answers the next call
            server.reply(Reply(json=_plain(case["provider"])))
            after = await model.invoke(HISTORY)
            assert after.text == "still here"
    finally:
        await model.aclose()


def _plain(provider: str) -> dict[str, Any]:
    if provider == "anthropic":
        return {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "still here"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 2},
        }
    if provider == "openai_responses":
        text = {"type": "output_text", "text": "still here"}
        item = {"type": "message", "role": "assistant", "content": [text]}
        return {"object": "response", "status": "completed", "output": [item]}
    return {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "still here"},
                "finish_reason": "stop",
            }
        ]
    }


def test_every_provider_has_replays_streamed_and_not() -> None:
    seen = {(load(p)["provider"], load(p)["stream"]) for p in CASES}
    for provider in ("openai", "anthropic", "groq", "openrouter", "ollama"):
        assert (provider, True) in seen, provider
    for provider in ("openai", "anthropic", "groq", "ollama", "vllm"):
        assert (provider, False) in seen, provider
    assert ("claude_code", True) in seen
